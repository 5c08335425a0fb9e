// Schema evolution of a table that is updated in place (not replaced): the one rule every
// destination applies to a column whose source type changed. Iceberg's rule is the model: a
// column keeps its type or widens without rewriting a value (int -> long, float -> double, a
// decimal's precision at the same scale; a list's element likewise). Anything else, a narrower
// source type included, is refused: the caller names the column, both types and the fix (a full
// refresh, which recreates the table).
#pragma once

#include <optional>

#include "ferry/types/data_type.h"

namespace ferry {

// `to` holds every value of `from` exactly, and a table's column of type `from` can become `to`
// in place. Primitive types only (a list is never a widening of a primitive, nor the reverse).
bool IsWidening(const DataType& from, const DataType& to);

// How a table's column of type `table` takes the values of a source column of type `source`.
enum class TypeChange {
  kSame,     // the same type (for lists: the same element type; requiredness aside)
  kWiden,    // the column widens to the source's type
  kRefused,  // anything else: narrower, another kind, a list against a primitive
};
TypeChange CompareTypes(const DataType& table, const DataType& source);

// The type a table records for its column of type `table` once it takes values of `source`:
// `source` for a primitive; for a list, the source's element type, required only when both
// elements are. nullopt when CompareTypes refuses.
std::optional<DataType> EvolvedType(const DataType& table, const DataType& source);

}  // namespace ferry
