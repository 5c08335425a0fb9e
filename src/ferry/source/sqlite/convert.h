// SQLite declared types -> Iceberg types, and SQLite values -> column values, losslessly.
//
// SQLite is dynamically typed: a column declared INTEGER may hold text. The mapping follows the
// declared type (SQLite's affinity rules, plus DATE/DATETIME/TIMESTAMP/BOOLEAN/DECIMAL(p,s)
// names), and each value is converted exactly or refused with a message naming the fix.
#pragma once

#include <string>

#include "ferry/base/status.h"
#include "ferry/clients/sqlite/sqlite.h"
#include "ferry/types/batch.h"

namespace ferry::source::sqlite_src {

// The Iceberg type for a declared SQLite column type (case-insensitive).
DataType MapDeclaredType(const std::string& declared);

// Appends value `col` of the current row of `stmt` to `out` (of type out->type()).
// On failure returns a message describing the value (without table/column context).
Status AppendValue(ferry::sqlite::Statement& stmt, int col, Column* out);

}  // namespace ferry::source::sqlite_src
