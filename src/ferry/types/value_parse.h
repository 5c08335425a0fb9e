// Text forms of values, parsed exactly: dates, times, timestamps (ISO 8601) and decimals.
// Every function refuses rather than rounds: a value that does not fit returns an error message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry {

// Days since 1970-01-01 in the proleptic Gregorian calendar (valid for years -999999..999999).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d);
void CivilFromDays(int64_t days, int64_t* y, unsigned* m, unsigned* d);

// "YYYY-MM-DD" -> days since epoch.
Result<int32_t> ParseDate(std::string_view text);
// "HH:MM[:SS[.ffffff]]" -> microseconds since midnight.
Result<int64_t> ParseTime(std::string_view text);
// "YYYY-MM-DD[( |T)HH:MM[:SS[.ffffff]]][Z|±HH[:MM]]" -> microseconds since epoch. A zone offset is
// applied (result in UTC) only when `allow_zone`; otherwise a zone is an error.
Result<int64_t> ParseTimestamp(std::string_view text, bool allow_zone);

// "-123.45" with at most `scale` fraction digits (trailing zeros beyond it are allowed) and at most
// `precision` digits in all -> unscaled integer.
Result<int128_t> ParseDecimal(std::string_view text, int precision, int scale);
std::string FormatDecimal(int128_t unscaled, int scale);
// 10^digits as int128 (digits <= 38).
int128_t Pow10(int digits);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool ValidUtf8(std::string_view s);

std::string FormatTimestamp(int64_t micros);  // "2024-06-01 05:00:00.000001"
std::string FormatDate(int32_t days);         // "2024-06-01"

}  // namespace ferry
