#include "ferry/source/sqlite/convert.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ferry/types/value_parse.h"

namespace ferry::source::sqlite_src {
namespace {

std::string Upper(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  return u;
}

bool Contains(const std::string& s, const char* needle) {
  return s.find(needle) != std::string::npos;
}

const char* StorageName(int type) {
  switch (type) {
    case SQLITE_INTEGER:
      return "an integer";
    case SQLITE_FLOAT:
      return "a real";
    case SQLITE_TEXT:
      return "text";
    case SQLITE_BLOB:
      return "a blob";
    default:
      return "NULL";
  }
}

std::string Shown(ferry::sqlite::Statement& st, int col) {
  switch (st.ColumnType(col)) {
    case SQLITE_INTEGER:
      return std::to_string(st.Int64(col));
    case SQLITE_FLOAT: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", st.Double(col));
      return buf;
    }
    case SQLITE_TEXT: {
      std::string t(st.Text(col).substr(0, 60));
      return "'" + t + (st.Text(col).size() > 60 ? "...'" : "'");
    }
    case SQLITE_BLOB:
      return "a blob of " + std::to_string(st.Blob(col).size()) + " bytes";
    default:
      return "NULL";
  }
}

Status Refuse(ferry::sqlite::Statement& st, int col, const DataType& t, const std::string& why) {
  return Status::InvalidArgument("holds " + std::string(StorageName(st.ColumnType(col))) + " (" +
                                 Shown(st, col) + ") that cannot be stored exactly as " +
                                 t.ToIceberg() + (why.empty() ? "" : ": " + why));
}

// Exact double -> int64 when the double is integral and in range.
bool DoubleToInt64(double d, int64_t* out) {
  if (!std::isfinite(d) || d != std::floor(d) || d < -9223372036854775808.0 ||
      d >= 9223372036854775808.0)
    return false;
  *out = static_cast<int64_t>(d);
  return true;
}

// Exact int64 -> double when it round-trips.
bool Int64ToDouble(int64_t v, double* out) {
  double d = static_cast<double>(v);
  if (d >= 9223372036854775808.0 || static_cast<int64_t>(d) != v) return false;
  *out = d;
  return true;
}

std::string ShortestDouble(double d) {
  char buf[64];
  for (int prec = 15; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  return buf;
}

}  // namespace

DataType MapDeclaredType(const std::string& declared) {
  std::string u = Upper(declared);
  // Names ferry gives a meaning beyond SQLite's affinity first.
  if (Contains(u, "BOOL")) return DataType::Boolean();
  if (u.rfind("DATETIME", 0) == 0 || u.rfind("TIMESTAMP", 0) == 0) {
    if (Contains(u, "TZ") || Contains(u, "WITH TIME ZONE")) return DataType::TimestampTz();
    return DataType::Timestamp();
  }
  if (u.rfind("DATE", 0) == 0) return DataType::Date();
  if (u == "TIME" || u.rfind("TIME(", 0) == 0) return DataType::Time();
  // SQLite's affinity rules, in their order.
  if (Contains(u, "INT")) return DataType::Int64();
  if (Contains(u, "CHAR") || Contains(u, "CLOB") || Contains(u, "TEXT")) return DataType::String();
  if (Contains(u, "BLOB")) return DataType::Binary();
  if (u.empty()) return DataType::String();  // untyped: text holds every value but blobs exactly
  if (Contains(u, "REAL") || Contains(u, "FLOA") || Contains(u, "DOUB")) return DataType::Float64();
  if (u.rfind("DECIMAL", 0) == 0 || u.rfind("NUMERIC", 0) == 0) {
    int p = 0, s = 0;
    auto open = u.find('(');
    if (open != std::string::npos) {
      int n = std::sscanf(u.c_str() + open, "(%d , %d)", &p, &s);
      if (n == 1) s = 0;
      if (n >= 1 && p >= 1 && p <= 38 && s >= 0 && s <= p) return DataType::Decimal(p, s);
    }
    return DataType::Float64();
  }
  return DataType::String();  // other names (JSON, UUID, ...) keep their text
}

Status AppendValue(ferry::sqlite::Statement& st, int col, Column* out) {
  int storage = st.ColumnType(col);
  if (storage == SQLITE_NULL) {
    out->AppendNull();
    return Status::OK();
  }
  const DataType& t = out->type();
  switch (t.kind()) {
    case TypeKind::kInt64: {
      if (storage == SQLITE_INTEGER) {
        out->AppendInt64(st.Int64(col));
        return Status::OK();
      }
      int64_t v;
      if (storage == SQLITE_FLOAT && DoubleToInt64(st.Double(col), &v)) {
        out->AppendInt64(v);
        return Status::OK();
      }
      return Refuse(st, col, t, "declare the column with the type its values have, e.g. TEXT");
    }
    case TypeKind::kFloat64: {
      if (storage == SQLITE_FLOAT) {
        out->AppendDouble(st.Double(col));
        return Status::OK();
      }
      double d;
      if (storage == SQLITE_INTEGER && Int64ToDouble(st.Int64(col), &d)) {
        out->AppendDouble(d);
        return Status::OK();
      }
      return Refuse(st, col, t,
                    storage == SQLITE_INTEGER ? "the integer is beyond a double's exact range; "
                                                "declare the column INTEGER"
                                              : "declare the column TEXT");
    }
    case TypeKind::kBoolean: {
      if (storage == SQLITE_INTEGER && (st.Int64(col) == 0 || st.Int64(col) == 1)) {
        out->AppendBool(st.Int64(col) == 1);
        return Status::OK();
      }
      return Refuse(st, col, t, "a BOOLEAN column holds 0 or 1");
    }
    case TypeKind::kString: {
      if (storage == SQLITE_TEXT) {
        out->AppendBytes(st.Text(col));
        return Status::OK();
      }
      if (storage == SQLITE_INTEGER) {
        out->AppendBytes(std::to_string(st.Int64(col)));
        return Status::OK();
      }
      if (storage == SQLITE_FLOAT) {
        out->AppendBytes(ShortestDouble(st.Double(col)));
        return Status::OK();
      }
      return Refuse(st, col, t, "declare the column BLOB to keep binary values");
    }
    case TypeKind::kBinary: {
      if (storage == SQLITE_BLOB) {
        out->AppendBytes(st.Blob(col));
        return Status::OK();
      }
      if (storage == SQLITE_TEXT) {
        out->AppendBytes(st.Text(col));
        return Status::OK();
      }
      return Refuse(st, col, t, "declare the column with the type its values have");
    }
    case TypeKind::kDate:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
    case TypeKind::kTime: {
      if (storage != SQLITE_TEXT) {
        return Refuse(st, col, t,
                      "ferry reads dates and times as ISO-8601 text and does not guess the unit "
                      "of numbers; declare the column INTEGER or REAL if it holds epoch numbers");
      }
      std::string_view text = st.Text(col);
      if (t.kind() == TypeKind::kDate) {
        auto d = ParseDate(text);
        if (!d.ok()) return Refuse(st, col, t, d.status().message());
        out->AppendInt32(*d);
      } else if (t.kind() == TypeKind::kTime) {
        auto v = ParseTime(text);
        if (!v.ok()) return Refuse(st, col, t, v.status().message());
        out->AppendInt64(*v);
      } else {
        auto v = ParseTimestamp(text, t.kind() == TypeKind::kTimestampTz);
        if (!v.ok()) return Refuse(st, col, t, v.status().message());
        out->AppendInt64(*v);
      }
      return Status::OK();
    }
    case TypeKind::kDecimal: {
      std::string text;
      if (storage == SQLITE_INTEGER) {
        text = std::to_string(st.Int64(col));
      } else if (storage == SQLITE_FLOAT) {
        // NUMERIC affinity stored the value as a double: accept it when the decimal with the
        // column's scale reads back as the very same double. Fast path: u / 10^s is the correctly
        // rounded double of the decimal u·10^-s whenever u and 10^s are exact doubles, which is
        // what parsing its text would give.
        const double d = st.Double(col);
        if (t.scale() <= 22 && std::isfinite(d)) {
          const double pow10 = static_cast<double>(Pow10(t.scale()));
          const double scaled = std::nearbyint(d * pow10);
          if (std::fabs(scaled) < 9007199254740992.0 && scaled / pow10 == d) {
            const int128_t u = static_cast<int128_t>(static_cast<int64_t>(scaled));
            const int128_t limit = Pow10(t.precision());
            if (u < limit && u > -limit) {
              out->AppendDecimal(u);
              return Status::OK();
            }
            return Refuse(st, col, t, "it does not fit the column's precision");
          }
        }
        char buf[80];
        std::snprintf(buf, sizeof buf, "%.*f", t.scale(), st.Double(col));
        if (std::strtod(buf, nullptr) != st.Double(col)) {
          return Refuse(st, col, t, "it has more digits than the column's scale");
        }
        text = buf;
      } else if (storage == SQLITE_TEXT) {
        text = std::string(st.Text(col));
      } else {
        return Refuse(st, col, t, "");
      }
      auto v = ParseDecimal(text, t.precision(), t.scale());
      if (!v.ok()) return Refuse(st, col, t, v.status().message());
      out->AppendDecimal(*v);
      return Status::OK();
    }
    default:
      return Status::Internal("SQLite source cannot produce " + t.ToIceberg());
  }
}

}  // namespace ferry::source::sqlite_src
