#include "ferry/sink/mysql/mysql_sql.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "ferry/sink/sink_util.h"
#include "ferry/types/value_json.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::sink::mysql {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMicrosPerDay = 86400000000LL;
// The years MySQL and MariaDB document for DATE and DATETIME.
constexpr int64_t kMinYear = 1000;
constexpr int64_t kMaxYear = 9999;

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Bytes InnoDB keys take for DECIMAL(p,s): 4 per 9 digits, fewer for the rest, on each side of
// the point.
int DecimalBytes(int precision, int scale) {
  static const int kRest[] = {0, 1, 1, 2, 2, 3, 3, 4, 4};
  auto side = [](int digits) { return digits / 9 * 4 + kRest[digits % 9]; };
  return side(precision - scale) + side(scale);
}

double DoubleAt(const Column& col, size_t row) {
  return col.type().kind() == TypeKind::kFloat32 ? static_cast<double>(col.ValueAt<float>(row))
                                                 : col.ValueAt<double>(row);
}

void AppendDouble(Column* col, double d) {
  if (col->type().kind() == TypeKind::kFloat32) {
    col->AppendFloat(static_cast<float>(d));
  } else {
    col->AppendDouble(d);
  }
}

Result<int64_t> ParseInt(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0) {
    return Status::InvalidArgument("'" + s + "' is not a 64-bit integer");
  }
  return static_cast<int64_t>(v);
}

Result<double> ParseDouble(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return Status::InvalidArgument("'" + s + "' is not a number");
  return v;
}

int64_t YearOfDays(int64_t days) {
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  return y;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// A primitive value's ISO text form (list elements).
std::string ElementText(const Column& c, size_t i) {
  return FormatTextValue(c, i).value_or(std::string());
}

std::string Shorten(std::string_view s, size_t n = 40) {
  if (s.size() <= n) return std::string(s);
  size_t cut = n;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...";
}

// A value for messages: numbers as they are, text quoted and shortened.
std::string DisplayValue(const Column& c, size_t i) {
  if (!c.IsValid(i)) return "NULL";
  switch (c.type().kind()) {
    case TypeKind::kBoolean:
      return c.ValueAt<uint8_t>(i) ? "true" : "false";
    case TypeKind::kInt32:
      return std::to_string(c.ValueAt<int32_t>(i));
    case TypeKind::kInt64:
      return std::to_string(c.ValueAt<int64_t>(i));
    case TypeKind::kFloat32:
    case TypeKind::kFloat64:
      return DoubleText(DoubleAt(c, i));
    case TypeKind::kString:
      return "'" + Shorten(c.GetBytes(i)) + "'";
    case TypeKind::kBinary:
      return "a binary value of " + std::to_string(c.GetBytes(i).size()) + " bytes";
    case TypeKind::kList:
      return "a list";
    default:
      return "'" + ElementText(c, i) + "'";
  }
}

}  // namespace

std::string Qualified(std::string_view db, std::string_view table) {
  return QuoteIdent(db) + "." + QuoteIdent(table);
}

size_t Utf8Chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

Status CheckIdentifier(std::string_view name, std::string_view what) {
  const std::string w(what);
  if (name.empty()) return Status::InvalidArgument("a " + w + " name is empty");
  const std::string shown = QuoteIdent(Shorten(name, 80));
  if (Utf8Chars(name) > kMaxIdentifierChars) {
    return Status::InvalidArgument(
        w + " name " + shown + " has " + std::to_string(Utf8Chars(name)) +
        " characters, and MySQL and MariaDB allow at most " + std::to_string(kMaxIdentifierChars) +
        "; rename the " + w + " at the source to at most 64 characters");
  }
  if (name.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument(w + " name " + shown +
                                   " holds a NUL character, which MySQL and MariaDB names cannot "
                                   "hold; rename the " +
                                   w + " at the source");
  }
  if (name.back() == ' ') {
    return Status::InvalidArgument(w + " name " + shown +
                                   " ends with a space, which MySQL and MariaDB names cannot; "
                                   "rename the " +
                                   w + " at the source");
  }
  return Status::OK();
}

Result<std::vector<ColumnSpec>> ColumnSpecs(const Schema& schema, const Flavor& flavor) {
  const std::string text_charset = " CHARACTER SET utf8mb4 COLLATE " + flavor.binary_collation();
  std::vector<ColumnSpec> specs(schema.fields.size());
  int fixed_key_bytes = 0;
  int var_keys = 0;
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    const Field& f = schema.fields[i];
    const bool key = IsKey(schema, f.id);
    ColumnSpec& s = specs[i];
    int key_bytes = 0;
    switch (f.type.kind()) {
      case TypeKind::kBoolean:
        s.type = "BOOLEAN";
        key_bytes = 1;
        break;
      case TypeKind::kInt32:
        s.type = "INT";
        key_bytes = 4;
        break;
      case TypeKind::kInt64:
        s.type = "BIGINT";
        key_bytes = 8;
        break;
      case TypeKind::kFloat32:
        s.type = "FLOAT";
        key_bytes = 4;
        break;
      case TypeKind::kFloat64:
        s.type = "DOUBLE";
        key_bytes = 8;
        break;
      case TypeKind::kDecimal:
        s.type = "DECIMAL(" + std::to_string(f.type.precision()) + "," +
                 std::to_string(f.type.scale()) + ")";
        key_bytes = DecimalBytes(f.type.precision(), f.type.scale());
        break;
      case TypeKind::kDate:
        s.type = "DATE";
        key_bytes = 3;
        break;
      case TypeKind::kTime:
        s.type = "TIME(6)";
        key_bytes = 6;
        break;
      case TypeKind::kTimestamp:
        s.type = "DATETIME(6)";
        key_bytes = 8;
        break;
      case TypeKind::kTimestampTz:
        s.type = "DATETIME(6)";
        s.comment = std::string(kCommentPrefix) + "timestamptz";
        key_bytes = 8;
        break;
      case TypeKind::kString:
        s.type = "LONGTEXT" + text_charset;
        if (key) ++var_keys;
        break;
      case TypeKind::kBinary:
        s.type = "LONGBLOB";
        if (key) ++var_keys;
        break;
      case TypeKind::kUuid:
        // Not MariaDB's UUID type: it refuses values whose variant bits are not RFC 4122's, and
        // a source's uuid column may hold any 128 bits.
        s.type = "CHAR(36) CHARACTER SET ascii COLLATE ascii_bin";
        s.comment = std::string(kCommentPrefix) + "uuid";
        key_bytes = 36;
        break;
      case TypeKind::kList:
        if (key) {
          return Status::InvalidArgument("column " + QuoteIdent(f.name) + " (" +
                                         f.type.ToIceberg() +
                                         ") is part of the primary key, and MySQL and MariaDB "
                                         "keys cannot hold lists; choose other key columns");
        }
        s.type = "JSON";
        s.comment = std::string(kCommentPrefix) + f.type.ToIceberg();
        break;
    }
    if (key) fixed_key_bytes += key_bytes;
  }
  if (var_keys > 0) {
    const int share = (kMaxKeyBytes - fixed_key_bytes) / var_keys;
    if (share < 4) {
      return Status::InvalidArgument(
          "the primary key leaves no room for its text and binary columns within InnoDB's " +
          std::to_string(kMaxKeyBytes) + " key bytes; choose fewer key columns");
    }
    for (size_t i = 0; i < schema.fields.size(); ++i) {
      const Field& f = schema.fields[i];
      if (!IsKey(schema, f.id)) continue;
      if (f.type.kind() == TypeKind::kString) {
        specs[i].max_key_chars = share / 4;  // utf8mb4: up to 4 bytes a character
        specs[i].type = "VARCHAR(" + std::to_string(share / 4) + ")" + text_charset;
      } else if (f.type.kind() == TypeKind::kBinary) {
        specs[i].max_key_bytes = share;
        specs[i].type = "VARBINARY(" + std::to_string(share) + ")";
      }
    }
  }
  return specs;
}

std::string ColumnDefinition(const Field& f, const ColumnSpec& spec, bool not_null) {
  std::string out = QuoteIdent(f.name) + " " + spec.type;
  if (not_null) out += " NOT NULL";
  // The comment holds only ASCII type names: no escaping needed beyond the quotes.
  if (!spec.comment.empty()) out += " COMMENT '" + spec.comment + "'";
  return out;
}

Result<DataType> TypeFromComment(std::string_view comment) {
  if (!StartsWith(comment, kCommentPrefix)) {
    return Status::NotFound("the comment names no ferry type");
  }
  std::string text(comment.substr(kCommentPrefix.size()));
  size_t end = text.find_first_of(" ;,");
  if (end != std::string::npos) text.resize(end);
  if (StartsWith(text, "list<") && text.size() > 6 && text.back() == '>') {
    FERRY_ASSIGN_OR_RETURN(DataType element,
                           DataType::FromIceberg(text.substr(5, text.size() - 6)));
    if (element.is_list()) return Status::InvalidArgument("lists of lists are not supported");
    return DataType::List(element, false);
  }
  return DataType::FromIceberg(text);
}

Result<DataType> TypeOfServerColumn(const ServerColumn& c) {
  const std::string dt = Lower(c.data_type);
  const std::string ct = Lower(c.column_type);
  const bool is_unsigned = ct.find("unsigned") != std::string::npos;
  auto from_comment = TypeFromComment(c.comment);
  if (from_comment.ok()) {
    const DataType& t = *from_comment;
    // The comment counts only while the column still has the type ferry gave it.
    bool fits = false;
    switch (t.kind()) {
      case TypeKind::kTimestampTz:
        fits = dt == "datetime" || dt == "timestamp";
        break;
      case TypeKind::kUuid:
        fits = dt == "char" || dt == "varchar" || dt == "uuid";
        break;
      case TypeKind::kList:
        fits = dt == "longtext" || dt == "json" || dt == "text" || dt == "mediumtext";
        break;
      default:
        break;
    }
    if (fits) return t;
  }
  if (dt == "tinyint") {
    if (StartsWith(ct, "tinyint(1)")) return DataType::Boolean();
    return DataType::Int32();
  }
  if (dt == "smallint" || dt == "mediumint" || dt == "year") return DataType::Int32();
  if (dt == "int" || dt == "integer") return is_unsigned ? DataType::Int64() : DataType::Int32();
  if (dt == "bigint") return is_unsigned ? DataType::Decimal(20, 0) : DataType::Int64();
  if (dt == "float") return DataType::Float32();
  if (dt == "double" || dt == "real" || dt == "double precision") return DataType::Float64();
  if (dt == "decimal" || dt == "numeric") {
    if (c.precision < 1 || c.precision > 38) {
      return Status::NotSupported("column " + QuoteIdent(c.name) + " is " + c.column_type +
                                  ", and ferry's decimals hold at most 38 digits");
    }
    return DataType::Decimal(static_cast<int>(c.precision), static_cast<int>(c.scale));
  }
  if (dt == "date") return DataType::Date();
  if (dt == "time") return DataType::Time();
  if (dt == "datetime") return DataType::Timestamp();
  if (dt == "timestamp") return DataType::TimestampTz();  // shown in the session's zone, UTC
  if (dt == "char" || dt == "varchar" || dt == "tinytext" || dt == "text" || dt == "mediumtext" ||
      dt == "longtext" || dt == "enum" || dt == "set" || dt == "json" || dt == "inet4" ||
      dt == "inet6") {
    return DataType::String();
  }
  if (dt == "binary" || dt == "varbinary" || dt == "tinyblob" || dt == "blob" ||
      dt == "mediumblob" || dt == "longblob") {
    return DataType::Binary();
  }
  if (dt == "uuid") return DataType::Uuid();
  return Status::NotSupported("column " + QuoteIdent(c.name) + " has type " + c.column_type +
                              ", which ferry does not read");
}

TypeChange CompareColumnType(const ServerColumn& have, const DataType& want) {
  auto t = TypeOfServerColumn(have);
  return t.ok() ? CompareTypes(*t, want) : TypeChange::kRefused;
}

std::string ReadExpression(const ServerColumn& c, const DataType& t) {
  const std::string q = QuoteIdent(c.name);
  const TypeKind k = t.kind();
  if (k == TypeKind::kFloat32 || k == TypeKind::kFloat64) {
    // FLOAT prints with 6 digits; widened to DOUBLE it prints every digit (exactly).
    return "(" + q + " + 0e0)";
  }
  return q;
}

Status AppendServerText(std::string_view text, Column* col) {
  const DataType& t = col->type();
  switch (t.kind()) {
    case TypeKind::kBoolean: {
      FERRY_ASSIGN_OR_RETURN(int64_t v, ParseInt(text));
      col->AppendBool(v != 0);
      return Status::OK();
    }
    case TypeKind::kInt32: {
      FERRY_ASSIGN_OR_RETURN(int64_t v, ParseInt(text));
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return Status::InvalidArgument(std::string(text) + " does not fit a 32-bit int");
      }
      col->AppendInt32(static_cast<int32_t>(v));
      return Status::OK();
    }
    case TypeKind::kInt64: {
      FERRY_ASSIGN_OR_RETURN(int64_t v, ParseInt(text));
      col->AppendInt64(v);
      return Status::OK();
    }
    case TypeKind::kFloat32:
    case TypeKind::kFloat64: {
      FERRY_ASSIGN_OR_RETURN(double v, ParseDouble(text));
      AppendDouble(col, v);
      return Status::OK();
    }
    case TypeKind::kDecimal:
    case TypeKind::kDate:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
    case TypeKind::kUuid:
      return AppendTextValue(text, col);
    case TypeKind::kString:
    case TypeKind::kBinary:
      col->AppendBytes(text);
      return Status::OK();
    case TypeKind::kList:
      return AppendListJson(text, col);
  }
  return Status::Internal("unknown type");
}

Result<std::string> ListJson(const Column& list, size_t row) {
  return FormatListJson(list, row, [](const Column& c, size_t i) -> Result<std::string> {
    return ElementText(c, i);
  });
}

Status AppendListJson(std::string_view json, Column* col) {
  return ::ferry::AppendListJson(json, col, AppendServerText);
}

std::string DoubleText(double d) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

RowEncoder::RowEncoder(std::shared_ptr<const Schema> schema, std::vector<ColumnSpec> specs,
                       Escaper escape, std::string table)
    : schema_(std::move(schema)),
      specs_(std::move(specs)),
      escape_(std::move(escape)),
      table_(std::move(table)) {
  keys_ = KeyPositions(*schema_);
}

std::string RowEncoder::RowText(const Batch& batch, size_t row) const {
  if (keys_.empty() || batch.num_columns() != schema_->fields.size()) {
    return "row " + std::to_string(row + 1) + " of a batch";
  }
  std::string out = "the row with ";
  for (size_t k = 0; k < keys_.size(); ++k) {
    out += (k ? ", " : "") + schema_->fields[keys_[k]].name + " = " +
           DisplayValue(batch.column(keys_[k]), row);
  }
  return out;
}

Status RowEncoder::AppendRow(const Batch& batch, size_t row, const std::vector<size_t>& cols,
                             std::string* out) const {
  out->push_back('(');
  for (size_t j = 0; j < cols.size(); ++j) {
    if (j) out->push_back(',');
    // Deletes carry only the key columns: batch column j is field cols[j].
    const size_t field = cols[j];
    const Column& col =
        batch.num_columns() == schema_->fields.size() ? batch.column(field) : batch.column(j);
    Status s = AppendValue(col, row, field, out);
    if (!s.ok()) {
      return Status::InvalidArgument("column " + QuoteIdent(schema_->fields[field].name) +
                                     " of table " + table_ + ", " + RowText(batch, row) + ": " +
                                     s.message());
    }
  }
  out->push_back(')');
  return Status::OK();
}

Status RowEncoder::AppendValue(const Column& col, size_t row, size_t field,
                               std::string* out) const {
  if (!col.IsValid(row)) {
    out->append("NULL");
    return Status::OK();
  }
  const ColumnSpec& spec = specs_[field];
  auto quoted = [&](std::string_view text) {
    out->push_back('\'');
    escape_(text, out);
    out->push_back('\'');
  };
  auto out_of_range = [&](const std::string& what, const std::string& shown) {
    return Status::InvalidArgument(
        what + " " + shown + " is outside the years " + std::to_string(kMinYear) + " to " +
        std::to_string(kMaxYear) +
        " that MySQL and MariaDB support for DATE and DATETIME; correct the value at the source "
        "(or set it to NULL)");
  };
  switch (col.type().kind()) {
    case TypeKind::kBoolean:
      out->push_back(col.ValueAt<uint8_t>(row) ? '1' : '0');
      return Status::OK();
    case TypeKind::kInt32:
      out->append(std::to_string(col.ValueAt<int32_t>(row)));
      return Status::OK();
    case TypeKind::kInt64:
      out->append(std::to_string(col.ValueAt<int64_t>(row)));
      return Status::OK();
    case TypeKind::kFloat32:
    case TypeKind::kFloat64: {
      const double d = DoubleAt(col, row);
      if (!std::isfinite(d)) {
        return Status::InvalidArgument(
            std::string(std::isnan(d) ? "NaN"
                        : d > 0       ? "Infinity"
                                      : "-Infinity") +
            " cannot be stored: MySQL and MariaDB FLOAT and DOUBLE columns hold only finite "
            "numbers; replace the value at the source (with NULL or a finite number)");
      }
      // Floats widen to double exactly; "%.17g" reads back as the same double, which narrows
      // back to the same float.
      out->append(DoubleText(d));
      return Status::OK();
    }
    case TypeKind::kDecimal:
      out->append(FormatDecimal(col.ValueAt<int128_t>(row), col.type().scale()));
      return Status::OK();
    case TypeKind::kDate: {
      const int32_t days = col.ValueAt<int32_t>(row);
      const int64_t y = YearOfDays(days);
      if (y < kMinYear || y > kMaxYear) return out_of_range("date", FormatDateIso(days));
      quoted(FormatDateIso(days));
      return Status::OK();
    }
    case TypeKind::kTime:
      quoted(FormatTimeIso(col.ValueAt<int64_t>(row)));
      return Status::OK();
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz: {
      const int64_t us = col.ValueAt<int64_t>(row);
      const int64_t y = YearOfDays(FloorDiv(us, kMicrosPerDay));
      if (y < kMinYear || y > kMaxYear) return out_of_range("timestamp", FormatTimestampIso(us));
      quoted(FormatTimestampIso(us));
      return Status::OK();
    }
    case TypeKind::kString: {
      std::string_view v = col.GetBytes(row);
      if (spec.max_key_chars > 0) {
        const size_t n = Utf8Chars(v);
        if (n > static_cast<size_t>(spec.max_key_chars)) {
          return Status::InvalidArgument(
              "a key value has " + std::to_string(n) + " characters ('" + Shorten(v) +
              "'), and this primary-key column is VARCHAR(" + std::to_string(spec.max_key_chars) +
              ") (InnoDB keys hold at most " + std::to_string(kMaxKeyBytes) +
              " bytes); shorten the key values at the source or choose another primary_key for "
              "the stream");
        }
      }
      quoted(v);
      return Status::OK();
    }
    case TypeKind::kBinary: {
      std::string_view v = col.GetBytes(row);
      if (spec.max_key_bytes > 0 && v.size() > static_cast<size_t>(spec.max_key_bytes)) {
        return Status::InvalidArgument(
            "a key value has " + std::to_string(v.size()) +
            " bytes, and this primary-key column is VARBINARY(" +
            std::to_string(spec.max_key_bytes) + ") (InnoDB keys hold at most " +
            std::to_string(kMaxKeyBytes) +
            " bytes); shorten the key values at the source or choose another primary_key for the "
            "stream");
      }
      static const char* kHex = "0123456789ABCDEF";
      out->append("X'");
      for (unsigned char c : v) {
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
      }
      out->push_back('\'');
      return Status::OK();
    }
    case TypeKind::kUuid:
      quoted(FormatUuid(col.fixed_data() + row * 16));
      return Status::OK();
    case TypeKind::kList: {
      FERRY_ASSIGN_OR_RETURN(std::string json, ListJson(col, row));
      quoted(json);
      return Status::OK();
    }
  }
  return Status::Internal("unknown type");
}

}  // namespace ferry::sink::mysql
