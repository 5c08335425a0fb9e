// Text forms of values that cover EVERY value ferry holds, for destinations that store values as
// text (the SQLite, Redis and MySQL destinations): ISO 8601 with the expanded, signed year form for
// years outside 0000..9999, and canonical UUIDs. Each Format has a Parse that reads it back
// exactly. (value_parse.h has the plain forms that sources parse; these build on it.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry {

// "2024-06-01"; "+10000-01-01" and "-0044-03-15" (astronomical years: -0001 is 2 BC).
std::string FormatDateIso(int32_t days);
// Reads FormatDateIso's forms (and so every plain "YYYY-MM-DD").
Result<int32_t> ParseDateIso(std::string_view text);

// "13:45:00.000001" (microseconds since midnight, 0 <= micros < 86400000000).
std::string FormatTimeIso(int64_t micros);

// "2024-06-01 13:45:00.000001", the date part as in FormatDateIso.
std::string FormatTimestampIso(int64_t micros);
// Reads FormatTimestampIso's forms and everything ParseTimestamp reads, with expanded years too;
// a zone offset ("+00:00", "Z") is applied only when `allow_zone`, else it is an error.
Result<int64_t> ParseTimestampIso(std::string_view text, bool allow_zone);

// "123e4567-e89b-12d3-a456-426614174000" (lowercase) from 16 big-endian bytes.
std::string FormatUuid(const uint8_t bytes[16]);
// The canonical form in either case -> 16 bytes.
Status ParseUuid(std::string_view text, uint8_t out[16]);

// Standard base64 with padding (RFC 4648): how text destinations write binary list elements.
std::string FormatBase64(std::string_view bytes);
// FormatBase64's form back to bytes; nullopt for anything else.
std::optional<std::string> ParseBase64(std::string_view text);

// Row `row` of `col` in its text form, for the types stored as text everywhere: decimal (plain
// digits), date, time, timestamp, timestamptz (UTC, "+00:00") and uuid, in the forms above;
// nullopt for any other type.
std::optional<std::string> FormatTextValue(const Column& col, size_t row);
// Appends to `col` (of one of those types) the value that `text`, in one of those forms, holds.
Status AppendTextValue(std::string_view text, Column* col);

}  // namespace ferry
