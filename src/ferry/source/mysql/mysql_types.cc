#include "ferry/source/mysql/mysql_types.h"

#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ferry/clients/mysql/mysql_server.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::source {
namespace {

bool Unsigned(const MysqlColumn& c) { return c.column_type.find("unsigned") != std::string::npos; }

// n of "bit(n)" (NUMERIC_PRECISION holds it too; the column type is what every server prints).
int64_t BitWidth(const MysqlColumn& c) {
  const size_t open = c.column_type.find('(');
  if (open == std::string::npos) return c.precision > 0 ? c.precision : 1;
  int64_t n = 0;
  for (size_t i = open + 1;
       i < c.column_type.size() && c.column_type[i] >= '0' && c.column_type[i] <= '9'; ++i) {
    n = n * 10 + (c.column_type[i] - '0');
  }
  return n > 0 ? n : 1;
}

Result<int64_t> ParseInt64(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return Status::InvalidArgument("'" + std::string(text.substr(0, 40)) +
                                   "' is not a 64-bit integer");
  }
  return v;
}

Result<double> ParseDouble(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return Status::InvalidArgument("'" + std::string(text.substr(0, 40)) +
                                   "' is not a floating-point number");
  }
  return v;
}

bool IsDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

MysqlMapping MapMysqlColumn(const MysqlColumn& c) {
  MysqlMapping m;
  m.nullable = c.nullable;
  const std::string& t = c.data_type;
  auto set = [&](DataType type, MysqlWire wire) {
    m.type = std::move(type);
    m.wire = wire;
  };
  if (t == "tinyint" || t == "smallint" || t == "mediumint") {
    set(DataType::Int32(), MysqlWire::kInt32);
  } else if (t == "int" || t == "integer") {
    Unsigned(c) ? set(DataType::Int64(), MysqlWire::kInt64)
                : set(DataType::Int32(), MysqlWire::kInt32);
  } else if (t == "bigint") {
    Unsigned(c) ? set(DataType::Decimal(20, 0), MysqlWire::kUnsigned64)
                : set(DataType::Int64(), MysqlWire::kInt64);
  } else if (t == "float") {
    set(DataType::Float32(), MysqlWire::kFloat);
  } else if (t == "double" || t == "real") {
    set(DataType::Float64(), MysqlWire::kDouble);
  } else if (t == "decimal" || t == "numeric") {
    const int p = static_cast<int>(c.precision);
    const int s = static_cast<int>(c.scale);
    if (p >= 1 && p <= 38 && s >= 0 && s <= p) {
      set(DataType::Decimal(p, s), MysqlWire::kDecimal);
    } else {
      // Iceberg's decimals end at 38 digits; the server's exact text keeps every digit.
      set(DataType::String(), MysqlWire::kDecimalText);
    }
  } else if (t == "bit") {
    const int64_t n = BitWidth(c);
    if (n == 1) {
      set(DataType::Boolean(), MysqlWire::kBitBool);
    } else if (n < 64) {
      set(DataType::Int64(), MysqlWire::kBitInt);
    } else {
      set(DataType::Decimal(20, 0), MysqlWire::kBitUnsigned64);
    }
  } else if (t == "date") {
    set(DataType::Date(), MysqlWire::kDate);
  } else if (t == "datetime") {
    set(DataType::Timestamp(), MysqlWire::kDatetime);
  } else if (t == "timestamp") {
    set(DataType::TimestampTz(), MysqlWire::kTimestamp);
  } else if (t == "time") {
    set(DataType::Int64(), MysqlWire::kTime);
  } else if (t == "year") {
    set(DataType::Int32(), MysqlWire::kYear);
  } else if (t == "char" || t == "varchar" || t == "tinytext" || t == "text" || t == "mediumtext" ||
             t == "longtext" || t == "enum" || t == "set" || t == "json" || t == "inet4" ||
             t == "inet6") {
    set(DataType::String(), MysqlWire::kText);
  } else if (t == "binary" || t == "varbinary" || t == "tinyblob" || t == "blob" ||
             t == "mediumblob" || t == "longblob") {
    set(DataType::Binary(), MysqlWire::kBinary);
  } else if (t == "uuid") {
    set(DataType::Uuid(), MysqlWire::kUuid);
  } else {
    m.type = DataType::String();
    m.error = "ferry cannot map type " + c.column_type + " of column " +
              ferry::mysql::QuoteIdent(c.name) + "; select it in a view as text (e.g. ST_AsText(" +
              ferry::mysql::QuoteIdent(c.name) +
              ") for geometry, CAST(... AS CHAR) otherwise) or leave the table out";
  }
  if ((m.wire == MysqlWire::kDate || m.wire == MysqlWire::kDatetime ||
       m.wire == MysqlWire::kTimestamp) &&
      c.key_position == 0) {
    m.nullable = true;  // a zero date reads as NULL
  }
  return m;
}

std::string MysqlSelectExpression(std::string_view name, MysqlWire wire) {
  const std::string c = ferry::mysql::QuoteIdent(name);
  switch (wire) {
    case MysqlWire::kFloat:
      return "CAST(" + c + " AS DOUBLE)";
    case MysqlWire::kBitBool:
    case MysqlWire::kBitInt:
    case MysqlWire::kBitUnsigned64:
      return "CAST(" + c + " AS UNSIGNED)";
    default:
      return c;
  }
}

bool IsZeroDate(std::string_view text) {
  if (text.size() < 10 || text[4] != '-' || text[7] != '-') return false;
  return text.substr(5, 2) == "00" || text.substr(8, 2) == "00";
}

Result<int64_t> ParseMysqlTime(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument("'" + std::string(text.substr(0, 40)) +
                                   "' is not a time ([-]HHH:MM:SS[.ffffff])");
  };
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  const size_t c1 = s.find(':');
  if (c1 == std::string_view::npos || c1 == 0 || c1 > 4 || s.size() < c1 + 6 || s[c1 + 3] != ':') {
    return bad();
  }
  std::string_view h = s.substr(0, c1), m = s.substr(c1 + 1, 2), sec = s.substr(c1 + 4, 2);
  std::string_view frac = s.substr(c1 + 6);
  if (!IsDigits(h) || !IsDigits(m) || !IsDigits(sec)) return bad();
  int64_t micros_frac = 0;
  if (!frac.empty()) {
    if (frac[0] != '.' || frac.size() > 7 || !IsDigits(frac.substr(1))) return bad();
    std::string digits(frac.substr(1));
    digits.resize(6, '0');
    micros_frac = std::stoll(digits);
  }
  const int64_t hours = std::stoll(std::string(h));
  const int64_t minutes = std::stoll(std::string(m));
  const int64_t seconds = std::stoll(std::string(sec));
  if (minutes > 59 || seconds > 59) return bad();
  const int64_t v = ((hours * 60 + minutes) * 60 + seconds) * 1000000 + micros_frac;
  return negative ? -v : v;
}

Status AppendMysqlValue(MysqlWire wire, std::optional<std::string_view> text, Column* col) {
  if (!text) {
    col->AppendNull();
    return Status::OK();
  }
  const std::string_view v = *text;
  switch (wire) {
    case MysqlWire::kInt32:
    case MysqlWire::kYear: {
      FERRY_ASSIGN_OR_RETURN(int64_t i, ParseInt64(v));
      if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max()) {
        return Status::InvalidArgument(std::string(v) + " does not fit a 32-bit int");
      }
      col->AppendInt32(static_cast<int32_t>(i));
      return Status::OK();
    }
    case MysqlWire::kInt64:
    case MysqlWire::kBitInt: {
      FERRY_ASSIGN_OR_RETURN(int64_t i, ParseInt64(v));
      col->AppendInt64(i);
      return Status::OK();
    }
    case MysqlWire::kUnsigned64:
    case MysqlWire::kBitUnsigned64:
    case MysqlWire::kDecimal: {
      const DataType& t = col->type();
      FERRY_ASSIGN_OR_RETURN(int128_t d, ParseDecimal(v, t.precision(), t.scale()));
      col->AppendDecimal(d);
      return Status::OK();
    }
    case MysqlWire::kFloat: {
      FERRY_ASSIGN_OR_RETURN(double d, ParseDouble(v));
      const auto f = static_cast<float>(d);
      if (static_cast<double>(f) != d) {
        return Status::InvalidArgument(std::string(v) + " is not a 32-bit float's value");
      }
      col->AppendFloat(f);
      return Status::OK();
    }
    case MysqlWire::kDouble: {
      FERRY_ASSIGN_OR_RETURN(double d, ParseDouble(v));
      col->AppendDouble(d);
      return Status::OK();
    }
    case MysqlWire::kBitBool:
      if (v != "0" && v != "1") {
        return Status::InvalidArgument("bit(1) value " + std::string(v) + " is not 0 or 1");
      }
      col->AppendBool(v == "1");
      return Status::OK();
    case MysqlWire::kDate: {
      if (IsZeroDate(v)) {
        col->AppendNull();
        return Status::OK();
      }
      FERRY_ASSIGN_OR_RETURN(int32_t days, ParseDate(v));
      col->AppendInt32(days);
      return Status::OK();
    }
    case MysqlWire::kDatetime:
    case MysqlWire::kTimestamp: {
      if (IsZeroDate(v)) {
        col->AppendNull();
        return Status::OK();
      }
      FERRY_ASSIGN_OR_RETURN(int64_t us, ParseTimestamp(v, /*allow_zone=*/false));
      col->AppendInt64(us);
      return Status::OK();
    }
    case MysqlWire::kTime: {
      FERRY_ASSIGN_OR_RETURN(int64_t us, ParseMysqlTime(v));
      col->AppendInt64(us);
      return Status::OK();
    }
    case MysqlWire::kText:
    case MysqlWire::kDecimalText:
      if (!ValidUtf8(v)) {
        return Status::InvalidArgument(
            "text that is not valid UTF-8 as the server sent it in utf8mb4 (a column declared "
            "in one character set holding bytes of another?)");
      }
      col->AppendBytes(v);
      return Status::OK();
    case MysqlWire::kBinary:
      col->AppendBytes(v);
      return Status::OK();
    case MysqlWire::kUuid: {
      uint8_t bytes[16];
      FERRY_RETURN_IF_ERROR(ParseUuid(v, bytes));
      col->AppendUuid(bytes);
      return Status::OK();
    }
  }
  return Status::Internal("unknown MySQL wire form");
}

namespace {

// The unsigned type of the same width (std::make_unsigned does not know __int128 in strict
// C++).
template <typename T>
struct UnsignedOf {
  using type = std::make_unsigned_t<T>;
};
template <>
struct UnsignedOf<int128_t> {
  using type = unsigned __int128;
};

// v in the fewest little-endian bytes (at most `max`) whose sign extension gives it back.
template <typename T>
void PutSigned(T v, size_t max, std::string* out) {
  size_t n = 1;
  while (n < max) {
    const T lo = -(static_cast<T>(1) << (8 * n - 1));
    if (v >= lo && v < -lo) break;
    ++n;
  }
  out->resize(n);
  auto u = static_cast<typename UnsignedOf<T>::type>(v);
  for (size_t i = 0; i < n; ++i) {
    (*out)[i] = static_cast<char>(static_cast<uint8_t>(u & 0xFF));
    u >>= 8;
  }
}

// The value of `bytes` (1 to sizeof(T), little-endian, sign-extended); false for another size.
template <typename T>
bool GetSigned(std::string_view bytes, T* v) {
  if (bytes.empty() || bytes.size() > sizeof(T)) return false;
  typename UnsignedOf<T>::type u = 0;
  for (size_t i = bytes.size(); i-- > 0;) u = (u << 8) | static_cast<uint8_t>(bytes[i]);
  const unsigned shift = static_cast<unsigned>(8 * (sizeof(T) - bytes.size()));
  *v = static_cast<T>(u << shift) >> shift;
  return true;
}

}  // namespace

void PutMysqlBinaryInt64(int64_t v, std::string* out) { PutSigned(v, 8, out); }

void PutMysqlBinaryDecimal(int128_t unscaled, int scale, std::string* out) {
  PutSigned(unscaled, 16, out);
  out->push_back(static_cast<char>(scale));
}

std::string MysqlBinaryInt64(int64_t v) {
  std::string out;
  PutMysqlBinaryInt64(v, &out);
  return out;
}

std::string MysqlBinaryDecimal(int128_t unscaled, int scale) {
  std::string out;
  PutMysqlBinaryDecimal(unscaled, scale, &out);
  return out;
}

Status AppendMysqlBinary(MysqlWire wire, std::string_view bytes, Column* col) {
  auto bad = [&] {
    return Status::Corruption("a value in binary form of " + std::to_string(bytes.size()) +
                              " bytes for its kind");
  };
  int64_t v = 0;
  if (wire != MysqlWire::kDecimal && !GetSigned(bytes, &v)) return bad();
  switch (wire) {
    case MysqlWire::kInt32:
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return Status::InvalidArgument(std::to_string(v) + " does not fit a 32-bit int");
      }
      col->AppendInt32(static_cast<int32_t>(v));
      return Status::OK();
    case MysqlWire::kInt64:
    case MysqlWire::kDatetime:
    case MysqlWire::kTimestamp:
      col->AppendInt64(v);
      return Status::OK();
    case MysqlWire::kDate:
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return bad();
      }
      col->AppendInt32(static_cast<int32_t>(v));
      return Status::OK();
    case MysqlWire::kDecimal: {
      int128_t d = 0;
      if (bytes.size() < 2 || !GetSigned(bytes.substr(0, bytes.size() - 1), &d)) return bad();
      const int scale = static_cast<uint8_t>(bytes.back());
      const DataType& t = col->type();
      if (scale == t.scale() && t.precision() <= 38 && d < Pow10(t.precision()) &&
          d > -Pow10(t.precision())) {
        col->AppendDecimal(d);
        return Status::OK();
      }
      // Another scale than the column's (it changed since), or too many digits: as its text
      // converts, or is refused.
      FERRY_ASSIGN_OR_RETURN(int128_t exact,
                             ParseDecimal(FormatDecimal(d, scale), t.precision(), t.scale()));
      col->AppendDecimal(exact);
      return Status::OK();
    }
    default:
      return Status::Internal("a MySQL wire form without a binary form");
  }
}

MysqlCursor ClassifyMysqlCursor(const MysqlColumn& c, MysqlWire wire) {
  MysqlCursor k;
  switch (wire) {
    case MysqlWire::kInt32:
    case MysqlWire::kInt64:
    case MysqlWire::kUnsigned64:
    case MysqlWire::kYear:
      k.kind = MysqlCursor::Kind::kInteger;
      k.candidate = true;
      return k;
    case MysqlWire::kDecimal:
    case MysqlWire::kDecimalText:
      k.kind = MysqlCursor::Kind::kNumber;
      k.candidate = true;
      return k;
    case MysqlWire::kDate:
    case MysqlWire::kDatetime:
    case MysqlWire::kTimestamp:
      k.kind = MysqlCursor::Kind::kText;
      k.candidate = true;
      return k;
    case MysqlWire::kTime:
    case MysqlWire::kUuid:
      k.kind = MysqlCursor::Kind::kText;
      return k;
    case MysqlWire::kText:
      if (c.data_type == "enum" || c.data_type == "set") {
        k.why = "ENUM and SET values sort by their position in the type, not as text";
        return k;
      }
      if (c.data_type == "json") {
        k.why = "JSON values have no order";
        return k;
      }
      k.kind = MysqlCursor::Kind::kText;
      return k;
    case MysqlWire::kFloat:
    case MysqlWire::kDouble:
      k.why = "floating-point values are not kept exactly enough to compare with";
      return k;
    case MysqlWire::kBitBool:
    case MysqlWire::kBitInt:
    case MysqlWire::kBitUnsigned64:
      k.why = "BIT values are not compared as numbers";
      return k;
    case MysqlWire::kBinary:
      k.why = "binary values cannot be kept as text";
      return k;
  }
  return k;
}

bool MysqlRangeKey(const MysqlColumn& c, MysqlWire wire) {
  switch (wire) {
    case MysqlWire::kInt32:
    case MysqlWire::kInt64:
    case MysqlWire::kUnsigned64:
    case MysqlWire::kYear:
    case MysqlWire::kDecimal:
    case MysqlWire::kDecimalText:
    case MysqlWire::kDate:
    case MysqlWire::kDatetime:
    case MysqlWire::kTimestamp:
    case MysqlWire::kTime:
    case MysqlWire::kBinary:
    case MysqlWire::kUuid:
      return true;
    case MysqlWire::kText:
      return c.data_type != "enum" && c.data_type != "set" && c.data_type != "json";
    default:
      return false;
  }
}

std::string MysqlKeyExpression(std::string_view name, MysqlWire wire) {
  const std::string c = ferry::mysql::QuoteIdent(name);
  return wire == MysqlWire::kBinary ? "HEX(" + c + ")" : c;
}

Result<std::string> MysqlLiteral(MysqlWire wire, std::string_view text,
                                 const std::function<std::string(std::string_view)>& quote) {
  auto bad = [&](const char* what) {
    return Status::InvalidArgument("'" + std::string(text.substr(0, 80)) + "' is not " + what);
  };
  switch (wire) {
    case MysqlWire::kInt32:
    case MysqlWire::kInt64:
    case MysqlWire::kUnsigned64:
    case MysqlWire::kYear:
    case MysqlWire::kDecimal:
    case MysqlWire::kDecimalText: {
      std::string_view s = text;
      if (!s.empty() && s[0] == '-') s.remove_prefix(1);
      const size_t dot = s.find('.');
      if (!IsDigits(s.substr(0, dot)) ||
          (dot != std::string_view::npos && !IsDigits(s.substr(dot + 1)))) {
        return bad("a number");
      }
      return std::string(text);
    }
    case MysqlWire::kBinary: {
      if (text.size() % 2 != 0) return bad("hexadecimal bytes");
      for (char c : text) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) return bad("hexadecimal bytes");
      }
      return "X'" + std::string(text) + "'";
    }
    default:
      return quote(text);
  }
}

}  // namespace ferry::source
