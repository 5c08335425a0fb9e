#include "ferry/types/value_text.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "ferry/types/value_parse.h"

namespace ferry {
namespace {

constexpr int64_t kMicrosPerDay = 86400000000LL;

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned DaysInMonth(int64_t y, unsigned m) {
  static const unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

Status Bad(std::string_view what, std::string_view text) {
  return Status::InvalidArgument("'" + std::string(text) + "' is not a valid " + std::string(what));
}

// Reads "[±]Y{4,7}-MM-DD" at the start of `s` (a sign is required for more than 4 digits; 7
// cover every int32 day);
// sets *end past it and returns days since 1970-01-01.
Result<int64_t> DatePartIso(std::string_view s, size_t* end) {
  size_t p = 0;
  bool neg = false, sign = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    sign = true;
    p = 1;
  }
  int64_t y = 0;
  size_t digits = 0;
  while (p < s.size() && s[p] >= '0' && s[p] <= '9' && digits < 8) {
    y = y * 10 + (s[p] - '0');
    ++p;
    ++digits;
  }
  if (digits < 4 || digits > 7 || (digits > 4 && !sign)) {
    return Bad("date (expected YYYY-MM-DD, or ±YYYYY-MM-DD outside years 0000..9999)", s);
  }
  if (neg) y = -y;
  auto two = [&](size_t at, int64_t* out) {
    if (at + 2 > s.size() || s[at] < '0' || s[at] > '9' || s[at + 1] < '0' || s[at + 1] > '9') {
      return false;
    }
    *out = (s[at] - '0') * 10 + (s[at + 1] - '0');
    return true;
  };
  int64_t m = 0, d = 0;
  if (p + 6 > s.size() || s[p] != '-' || !two(p + 1, &m) || s[p + 3] != '-' || !two(p + 4, &d)) {
    return Bad("date (expected YYYY-MM-DD)", s);
  }
  if (m < 1 || m > 12 || d < 1 || d > DaysInMonth(y, static_cast<unsigned>(m))) {
    return Bad("date (no such day)", s);
  }
  *end = p + 6;
  return DaysFromCivil(y, static_cast<unsigned>(m), static_cast<unsigned>(d));
}

// Writes `v` as exactly `width` decimal digits (zero-padded) at `p`; returns the end.
char* AppendDigits(char* p, uint64_t v, size_t width) {
  for (size_t i = width; i > 0; --i) {
    p[i - 1] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return p + width;
}

// FormatDateIso's form of `days` at `p` (room for 32 bytes); returns the end.
char* AppendDateIso(char* p, int32_t days) {
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  if (y < 0 || y > 9999) *p++ = y < 0 ? '-' : '+';
  const uint64_t year = static_cast<uint64_t>(y < 0 ? -y : y);
  // At least four digits; years past 9999 (the expanded form) take as many as they need.
  p = AppendDigits(p, year, year > 9999 ? std::to_string(year).size() : 4);
  *p++ = '-';
  p = AppendDigits(p, m, 2);
  *p++ = '-';
  return AppendDigits(p, d, 2);
}

// "HH:MM:SS.ffffff" of `us` microseconds since midnight at `p` (room for 32 bytes); returns
// the end. Hours past 99 take the digits they need; a negative time is written with '-'.
char* AppendTimeIso(char* p, int64_t us) {
  if (us < 0) *p++ = '-';
  const uint64_t u = us < 0 ? 0 - static_cast<uint64_t>(us) : static_cast<uint64_t>(us);
  const uint64_t hours = u / 3600000000ULL;
  p = AppendDigits(p, hours, hours > 99 ? std::to_string(hours).size() : 2);
  *p++ = ':';
  p = AppendDigits(p, u / 60000000ULL % 60, 2);
  *p++ = ':';
  p = AppendDigits(p, u / 1000000ULL % 60, 2);
  *p++ = '.';
  return AppendDigits(p, u % 1000000ULL, 6);
}

}  // namespace

std::string FormatDateIso(int32_t days) {
  char buf[40];
  return std::string(buf, AppendDateIso(buf, days));
}

Result<int32_t> ParseDateIso(std::string_view text) {
  size_t end = 0;
  FERRY_ASSIGN_OR_RETURN(int64_t days, DatePartIso(text, &end));
  if (end != text.size()) return Bad("date (expected YYYY-MM-DD)", text);
  if (days < INT32_MIN || days > INT32_MAX) return Bad("date (out of range)", text);
  return static_cast<int32_t>(days);
}

std::string FormatTimeIso(int64_t us) {
  char buf[48];
  return std::string(buf, AppendTimeIso(buf, us));
}

std::string FormatTimestampIso(int64_t micros) {
  int64_t days = micros / kMicrosPerDay;
  int64_t rem = micros % kMicrosPerDay;
  if (rem < 0) {
    rem += kMicrosPerDay;
    --days;
  }
  char buf[72];
  char* p = AppendDateIso(buf, static_cast<int32_t>(days));
  *p++ = ' ';
  return std::string(buf, AppendTimeIso(p, rem));
}

Result<int64_t> ParseTimestampIso(std::string_view text, bool allow_zone) {
  // The plain form is ParseTimestamp's, with its detailed messages.
  if (text.size() >= 4 && text[0] >= '0' && text[0] <= '9') {
    return ParseTimestamp(text, allow_zone);
  }
  size_t end = 0;
  auto days = DatePartIso(text, &end);
  if (!days.ok()) return Bad("timestamp", text);
  // The time and zone after the date: parsed as they would be after any date.
  std::string rest = "1970-01-01" + std::string(text.substr(end));
  auto tod = ParseTimestamp(rest, allow_zone);
  if (!tod.ok()) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a valid timestamp: its time or zone part is not "
                                   "HH:MM[:SS[.ffffff]][±HH:MM]" +
                                   (allow_zone ? "" : " without a zone"));
  }
  const __int128 us = static_cast<__int128>(*days) * kMicrosPerDay + *tod;
  if (us < INT64_MIN || us > INT64_MAX) return Bad("timestamp (out of range)", text);
  return static_cast<int64_t>(us);
}

std::string FormatUuid(const uint8_t bytes[16]) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

Status ParseUuid(std::string_view text, uint8_t out[16]) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() != 36) return Bad("uuid (expected xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", text);
  size_t p = 0;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      if (text[p] != '-') return Bad("uuid (expected xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", text);
      ++p;
    }
    int hi = nibble(text[p]), lo = nibble(text[p + 1]);
    if (hi < 0 || lo < 0) return Bad("uuid (expected hexadecimal digits)", text);
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
    p += 2;
  }
  return Status::OK();
}

std::string FormatBase64(std::string_view in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16 | static_cast<uint8_t>(in[i + 1]) << 8 |
                 static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> ParseBase64(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = value(c)) < 0) {
        return std::nullopt;
      }
    }
    uint32_t w = static_cast<uint32_t>(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
    out += static_cast<char>(w >> 16);
    if (pad < 2) out += static_cast<char>((w >> 8) & 255);
    if (pad < 1) out += static_cast<char>(w & 255);
  }
  return out;
}

std::optional<std::string> FormatTextValue(const Column& col, size_t row) {
  auto fixed = [&](auto v) {
    std::memcpy(&v, col.fixed_data() + row * sizeof(v), sizeof(v));
    return v;
  };
  switch (col.type().kind()) {
    case TypeKind::kDecimal:
      return FormatDecimal(fixed(int128_t{}), col.type().scale());
    case TypeKind::kDate:
      return FormatDateIso(fixed(int32_t{}));
    case TypeKind::kTime:
      return FormatTimeIso(fixed(int64_t{}));
    case TypeKind::kTimestamp:
      return FormatTimestampIso(fixed(int64_t{}));
    case TypeKind::kTimestampTz:
      return FormatTimestampIso(fixed(int64_t{})) + "+00:00";
    case TypeKind::kUuid:
      return FormatUuid(col.fixed_data() + row * 16);
    default:
      return std::nullopt;
  }
}

Status AppendTextValue(std::string_view text, Column* col) {
  const DataType& t = col->type();
  switch (t.kind()) {
    case TypeKind::kDecimal: {
      FERRY_ASSIGN_OR_RETURN(int128_t v, ParseDecimal(text, t.precision(), t.scale()));
      col->AppendDecimal(v);
      return Status::OK();
    }
    case TypeKind::kDate: {
      FERRY_ASSIGN_OR_RETURN(int32_t v, ParseDateIso(text));
      col->AppendInt32(v);
      return Status::OK();
    }
    case TypeKind::kTime: {
      FERRY_ASSIGN_OR_RETURN(int64_t v, ParseTime(text));
      col->AppendInt64(v);
      return Status::OK();
    }
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz: {
      FERRY_ASSIGN_OR_RETURN(int64_t v,
                             ParseTimestampIso(text, t.kind() == TypeKind::kTimestampTz));
      col->AppendInt64(v);
      return Status::OK();
    }
    case TypeKind::kUuid: {
      uint8_t b[16];
      FERRY_RETURN_IF_ERROR(ParseUuid(text, b));
      col->AppendUuid(b);
      return Status::OK();
    }
    default:
      return Status::InvalidArgument("a " + t.ToIceberg() + " is not stored in a text form");
  }
}

}  // namespace ferry
