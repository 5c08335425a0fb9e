#include "ferry/types/value_parse.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

namespace ferry {
namespace {

bool Digits(std::string_view s, size_t pos, size_t n, int64_t* out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

unsigned DaysInMonth(int64_t y, unsigned m) {
  static const unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

Status Bad(std::string_view what, std::string_view text) {
  return Status::InvalidArgument("'" + std::string(text) + "' is not a valid " + std::string(what));
}

// Parses "YYYY-MM-DD" at the start; sets *end.
Result<int64_t> DatePart(std::string_view s, size_t* end) {
  int64_t y, m, d;
  if (!Digits(s, 0, 4, &y) || s.size() < 10 || s[4] != '-' || !Digits(s, 5, 2, &m) || s[7] != '-' ||
      !Digits(s, 8, 2, &d)) {
    return Bad("date (expected YYYY-MM-DD)", s);
  }
  if (m < 1 || m > 12 || d < 1 || d > DaysInMonth(y, static_cast<unsigned>(m))) {
    return Bad("date (no such day)", s);
  }
  *end = 10;
  return DaysFromCivil(y, static_cast<unsigned>(m), static_cast<unsigned>(d));
}

// Parses "HH:MM[:SS[.f{1,9}]]" at s[pos]; sets *end. Fractions beyond microseconds must be zeros.
Result<int64_t> TimePart(std::string_view s, size_t pos, size_t* end) {
  int64_t h, mi, sec = 0, frac = 0;
  if (!Digits(s, pos, 2, &h) || pos + 2 >= s.size() || s[pos + 2] != ':' ||
      !Digits(s, pos + 3, 2, &mi)) {
    return Bad("time (expected HH:MM[:SS[.ffffff]])", s);
  }
  size_t p = pos + 5;
  if (p < s.size() && s[p] == ':') {
    if (!Digits(s, p + 1, 2, &sec)) return Bad("time (seconds)", s);
    p += 3;
    if (p < s.size() && s[p] == '.') {
      ++p;
      int n = 0;
      while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
        if (n < 6) {
          frac = frac * 10 + (s[p] - '0');
        } else if (s[p] != '0') {
          return Status::InvalidArgument("'" + std::string(s) +
                                         "' has more precision than microseconds; ferry stores "
                                         "microseconds and does not round");
        }
        ++n;
        ++p;
      }
      if (n == 0) return Bad("time (empty fraction)", s);
      for (int i = n; i < 6; ++i) frac *= 10;
    }
  }
  if (h > 23 || mi > 59 || sec > 59) return Bad("time (out of range)", s);
  *end = p;
  return ((h * 60 + mi) * 60 + sec) * 1000000 + frac;
}

}  // namespace

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

Result<int32_t> ParseDate(std::string_view text) {
  size_t end = 0;
  FERRY_ASSIGN_OR_RETURN(int64_t days, DatePart(text, &end));
  if (end != text.size()) return Bad("date (expected YYYY-MM-DD)", text);
  return static_cast<int32_t>(days);
}

Result<int64_t> ParseTime(std::string_view text) {
  size_t end = 0;
  FERRY_ASSIGN_OR_RETURN(int64_t us, TimePart(text, 0, &end));
  if (end != text.size()) return Bad("time (trailing characters)", text);
  return us;
}

Result<int64_t> ParseTimestamp(std::string_view s, bool allow_zone) {
  size_t p = 0;
  FERRY_ASSIGN_OR_RETURN(int64_t days, DatePart(s, &p));
  int64_t us = 0;
  if (p < s.size() && (s[p] == ' ' || s[p] == 'T')) {
    FERRY_ASSIGN_OR_RETURN(us, TimePart(s, p + 1, &p));
  }
  int64_t offset_us = 0;
  if (p < s.size()) {
    if (!allow_zone) {
      return Status::InvalidArgument("'" + std::string(s) +
                                     "' carries a time zone, but the column is a timestamp "
                                     "without time zone; declare it TIMESTAMPTZ");
    }
    if (s[p] == 'Z' && p + 1 == s.size()) {
      p = s.size();
    } else if (s[p] == '+' || s[p] == '-') {
      int64_t oh = 0, om = 0;
      int sign = s[p] == '-' ? -1 : 1;
      if (!Digits(s, p + 1, 2, &oh)) return Bad("timestamp (zone offset)", s);
      size_t q = p + 3;
      if (q < s.size() && s[q] == ':') ++q;
      if (q < s.size()) {
        if (!Digits(s, q, 2, &om)) return Bad("timestamp (zone offset)", s);
        q += 2;
      }
      if (q != s.size() || oh > 18 || om > 59) return Bad("timestamp (zone offset)", s);
      offset_us = sign * (oh * 3600 + om * 60) * 1000000;
      p = q;
    } else {
      return Bad("timestamp", s);
    }
  }
  // Range check: keep to what int64 microseconds hold (about ±292,000 years).
  constexpr int64_t kMaxDays = 106751990;
  if (days > kMaxDays || days < -kMaxDays) return Bad("timestamp (out of range)", s);
  return days * 86400000000LL + us - offset_us;
}

int128_t Pow10(int digits) {
  // 10^0 .. 10^38: every power a decimal(38) needs (10^38 < 2^127).
  static constexpr auto kTable = [] {
    std::array<int128_t, 39> t{};
    t[0] = 1;
    for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] * 10;
    return t;
  }();
  if (digits >= 0 && digits < static_cast<int>(kTable.size())) return kTable[digits];
  int128_t v = 1;
  for (int i = 0; i < digits; ++i) v *= 10;
  return v;
}

Result<int128_t> ParseDecimal(std::string_view text, int precision, int scale) {
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  int128_t v = 0;
  int int_digits = 0, frac_digits = 0;
  bool dot = false, any = false;
  for (char c : s) {
    if (c == '.') {
      if (dot) return Bad("decimal", text);
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') return Bad("decimal", text);
    any = true;
    if (dot) {
      if (frac_digits >= scale) {
        if (c != '0') {
          return Status::InvalidArgument("'" + std::string(text) + "' has more than " +
                                         std::to_string(scale) +
                                         " digits after the point; ferry does not round");
        }
        continue;
      }
      ++frac_digits;
    } else {
      if (int_digits == 0 && c == '0') continue;  // leading zeros
      ++int_digits;
    }
    if (int_digits + (dot ? frac_digits : 0) > 38) return Bad("decimal (over 38 digits)", text);
    v = v * 10 + (c - '0');
  }
  if (!any) return Bad("decimal", text);
  if (int_digits > precision - scale) {
    return Status::InvalidArgument("'" + std::string(text) + "' does not fit decimal(" +
                                   std::to_string(precision) + "," + std::to_string(scale) + ")");
  }
  v *= Pow10(scale - frac_digits);
  return neg ? -v : v;
}

std::string FormatDecimal(int128_t unscaled, int scale) {
  bool neg = unscaled < 0;
  unsigned __int128 u = neg ? static_cast<unsigned __int128>(-(unscaled + 1)) + 1
                            : static_cast<unsigned __int128>(unscaled);
  // Digits from the end of a buffer: up to 39 digits, zeros up to the point, the point, a zero
  // before it and a sign.
  std::string buf(static_cast<size_t>(std::max(scale, 0)) + 44, '\0');
  char* end = buf.data() + buf.size();
  char* p = end;
  int n = 0;
  do {
    *--p = static_cast<char>('0' + static_cast<int>(u % 10));
    u /= 10;
    if (++n == scale) *--p = '.';
  } while (u != 0);
  if (scale > 0) {
    while (n < scale) {  // zeros up to the point, then the point
      *--p = '0';
      if (++n == scale) *--p = '.';
    }
    if (*p == '.') *--p = '0';
  }
  if (neg) *--p = '-';
  return std::string(p, end);
}

std::string FormatDate(int32_t days) {
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u", static_cast<long long>(y), m, d);
  return buf;
}

std::string FormatTimestamp(int64_t micros) {
  int64_t days = micros / 86400000000LL;
  int64_t rem = micros % 86400000000LL;
  if (rem < 0) {
    rem += 86400000000LL;
    --days;
  }
  int64_t secs = rem / 1000000, frac = rem % 1000000;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %02lld:%02lld:%02lld.%06lld",
                FormatDate(static_cast<int32_t>(days)).c_str(), static_cast<long long>(secs / 3600),
                static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60),
                static_cast<long long>(frac));
  return buf;
}

bool ValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* end = p + s.size();
  while (p < end) {
    // Runs of ASCII, eight bytes at a time.
    while (end - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      if (w & 0x8080808080808080ULL) break;
      p += 8;
    }
    if (p == end) break;
    uint8_t c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    p += n + 1;
  }
  return true;
}

}  // namespace ferry
