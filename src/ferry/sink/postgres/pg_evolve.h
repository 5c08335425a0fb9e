// Schema evolution of a PostgreSQL target table: the one rule of types/type_change.h, applied to
// columns as PostgreSQL describes them (format_type). No libpq, so unit tests use it alone.
#pragma once

#include <optional>
#include <string>

#include "ferry/types/data_type.h"
#include "ferry/types/type_change.h"

namespace ferry::sink::pg {

// The ferry type whose column ferry creates as `pg_type` (the inverse of PgTypeName), or
// nullopt for a type ferry does not create ("smallint", "character varying(10)", ...).
std::optional<DataType> FerryTypeOfPgName(const std::string& pg_type);

// How a target column of PostgreSQL type `have` takes values of ferry type `want`: for the types
// ferry creates, CompareTypes of the ferry types; of the others, smallint widens to integer or
// bigint, and numeric without precision and character varying without length hold every decimal
// and string as they are (kSame: nothing to change). Anything else is kRefused.
TypeChange CompareColumnType(const std::string& have, const DataType& want);

}  // namespace ferry::sink::pg
