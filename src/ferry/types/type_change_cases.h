// The schema-evolution rule (type_change.h) as a table of cases, for tests: each destination's
// test runs its own column check over these rows and must agree with every one of them.
#pragma once

#include <vector>

#include "ferry/types/data_type.h"
#include "ferry/types/type_change.h"

namespace ferry::testing {

struct TypeChangeCase {
  DataType table;
  DataType source;
  TypeChange expected;
};

inline std::vector<TypeChangeCase> TypeChangeCases() {
  using T = DataType;
  const auto list = [](const DataType& e) { return DataType::List(e, false); };
  return {
      {T::Int32(), T::Int32(), TypeChange::kSame},
      {T::Int32(), T::Int64(), TypeChange::kWiden},
      {T::Int64(), T::Int32(), TypeChange::kRefused},  // narrower: refused, not kept
      {T::Float32(), T::Float64(), TypeChange::kWiden},
      {T::Float64(), T::Float32(), TypeChange::kRefused},
      {T::Decimal(5, 2), T::Decimal(9, 2), TypeChange::kWiden},
      {T::Decimal(9, 2), T::Decimal(5, 2), TypeChange::kRefused},
      {T::Decimal(9, 2), T::Decimal(9, 3), TypeChange::kRefused},
      {T::Decimal(9, 2), T::Decimal(9, 2), TypeChange::kSame},
      {T::Int32(), T::Float64(), TypeChange::kRefused},
      {T::Int64(), T::String(), TypeChange::kRefused},
      {T::String(), T::Int64(), TypeChange::kRefused},
      {T::Timestamp(), T::TimestampTz(), TypeChange::kRefused},
      {T::String(), T::String(), TypeChange::kSame},
      {list(T::Int32()), list(T::Int32()), TypeChange::kSame},
      {list(T::Int32()), list(T::Int64()), TypeChange::kWiden},
      {list(T::Int64()), list(T::Int32()), TypeChange::kRefused},
      {list(T::Int32()), T::Int32(), TypeChange::kRefused},
      {T::Int32(), list(T::Int32()), TypeChange::kRefused},
  };
}

}  // namespace ferry::testing
