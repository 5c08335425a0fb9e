#include "ferry/lake/partition.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <set>

#include "ferry/format/parquet/encoding.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::lake {
namespace {

using Json = nlohmann::json;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

template <typename T>
T FloorMod(T v, T w) {
  T m = v % w;
  return m < 0 ? m + w : m;
}

std::string LittleEndian(uint64_t v, int width) {
  std::string out(static_cast<size_t>(width), '\0');
  for (int i = 0; i < width; ++i) out[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return out;
}

bool IsTemporal(TypeKind k) {
  return k == TypeKind::kDate || k == TypeKind::kTimestamp || k == TypeKind::kTimestampTz;
}

// Days since 1970-01-01 of a date or timestamp value.
int64_t DaysOf(TypeKind k, int64_t v) {
  return k == TypeKind::kDate ? v : FloorDiv(v, int64_t{86400} * 1000000);
}

// Sources whose values are integers in a Column (ints, dates, times, timestamps): their
// transforms' values are integers too (IntTransform, below).
bool IntSource(TypeKind k) {
  return k == TypeKind::kInt32 || k == TypeKind::kDate || k == TypeKind::kInt64 ||
         k == TypeKind::kTime || k == TypeKind::kTimestamp || k == TypeKind::kTimestampTz;
}

int64_t IntSourceValue(TypeKind k, const Column& col, size_t row) {
  return k == TypeKind::kInt32 || k == TypeKind::kDate ? col.ValueAt<int32_t>(row)
                                                       : col.ValueAt<int64_t>(row);
}

std::string Trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The first `n` code points of UTF-8 text.
std::string_view Utf8Prefix(std::string_view s, int64_t n) {
  size_t i = 0;
  int64_t seen = 0;
  while (i < s.size()) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (seen == n) break;
      ++seen;
    }
    ++i;
  }
  return s.substr(0, i);
}

std::string Hex(std::string_view bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// Percent-encodes what is not safe in a path segment.
std::string PathEscape(std::string_view s) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 15]);
    }
  }
  return out;
}

}  // namespace

int32_t Murmur3(std::string_view bytes) {
  const uint32_t c1 = 0xcc9e2d51;
  const uint32_t c2 = 0x1b873593;
  uint32_t h = 0;
  const size_t blocks = bytes.size() / 4;
  auto rotl = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  for (size_t i = 0; i < blocks; ++i) {
    uint32_t k;
    std::memcpy(&k, bytes.data() + i * 4, 4);  // little-endian machines only (as everywhere here)
    k *= c1;
    k = rotl(k, 15);
    k *= c2;
    h ^= k;
    h = rotl(h, 13);
    h = h * 5 + 0xe6546b64;
  }
  const auto* tail = reinterpret_cast<const uint8_t*>(bytes.data() + blocks * 4);
  uint32_t k = 0;
  switch (bytes.size() & 3) {
    case 3:
      k ^= static_cast<uint32_t>(tail[2]) << 16;
      [[fallthrough]];
    case 2:
      k ^= static_cast<uint32_t>(tail[1]) << 8;
      [[fallthrough]];
    case 1:
      k ^= tail[0];
      k *= c1;
      k = rotl(k, 15);
      k *= c2;
      h ^= k;
  }
  h ^= static_cast<uint32_t>(bytes.size());
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return static_cast<int32_t>(h);
}

Result<Transform> Transform::Parse(std::string_view text) {
  const std::string t = Lower(Trim(text));
  static const std::pair<const char*, TransformKind> kPlain[] = {
      {"identity", TransformKind::kIdentity}, {"year", TransformKind::kYear},
      {"month", TransformKind::kMonth},       {"day", TransformKind::kDay},
      {"hour", TransformKind::kHour},         {"void", TransformKind::kVoid}};
  for (const auto& [name, kind] : kPlain) {
    if (t == name) return Transform{kind, 0};
  }
  for (const auto& [name, kind] : {std::pair{"bucket[", TransformKind::kBucket},
                                   std::pair{"truncate[", TransformKind::kTruncate}}) {
    const size_t n = std::strlen(name);
    if (t.size() > n + 1 && t.compare(0, n, name) == 0 && t.back() == ']') {
      const std::string digits = t.substr(n, t.size() - n - 1);
      if (!digits.empty() && digits.size() <= 9 &&
          std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        const int32_t v = std::stoi(digits);
        if (v > 0) return Transform{kind, v};
      }
    }
  }
  return Status::NotSupported("partition transform '" + std::string(text) +
                              "' is not one ferry knows (identity, year, month, day, hour, "
                              "bucket[N], truncate[W], void)");
}

std::string Transform::ToString() const {
  switch (kind) {
    case TransformKind::kIdentity:
      return "identity";
    case TransformKind::kYear:
      return "year";
    case TransformKind::kMonth:
      return "month";
    case TransformKind::kDay:
      return "day";
    case TransformKind::kHour:
      return "hour";
    case TransformKind::kBucket:
      return "bucket[" + std::to_string(param) + "]";
    case TransformKind::kTruncate:
      return "truncate[" + std::to_string(param) + "]";
    case TransformKind::kVoid:
      return "void";
  }
  return "?";
}

Result<DataType> Transform::ResultType(const DataType& source) const {
  const TypeKind k = source.kind();
  bool fits = false;
  DataType result = DataType::Int32();
  switch (kind) {
    case TransformKind::kIdentity:
    case TransformKind::kVoid:
      fits = !source.is_list();
      result = source;
      break;
    case TransformKind::kYear:
    case TransformKind::kMonth:
    case TransformKind::kDay:
      fits = IsTemporal(k);
      break;
    case TransformKind::kHour:
      fits = k == TypeKind::kTimestamp || k == TypeKind::kTimestampTz;
      break;
    case TransformKind::kBucket:
      fits = k == TypeKind::kInt32 || k == TypeKind::kInt64 || k == TypeKind::kDecimal ||
             k == TypeKind::kDate || k == TypeKind::kTime || k == TypeKind::kTimestamp ||
             k == TypeKind::kTimestampTz || k == TypeKind::kString || k == TypeKind::kUuid ||
             k == TypeKind::kBinary;
      break;
    case TransformKind::kTruncate:
      fits = k == TypeKind::kInt32 || k == TypeKind::kInt64 || k == TypeKind::kDecimal ||
             k == TypeKind::kString || k == TypeKind::kBinary;
      result = source;
      break;
  }
  if (!fits) {
    return Status::InvalidArgument("the partition transform " + ToString() +
                                   " does not apply to a column of type " + source.ToIceberg());
  }
  return result;
}

bool PartitionSpec::unpartitioned() const {
  return std::all_of(fields.begin(), fields.end(), [](const PartitionField& f) {
    return f.transform.kind == TransformKind::kVoid;
  });
}

Json PartitionSpec::FieldsJson() const {
  Json out = Json::array();
  for (const auto& f : fields) {
    out.push_back(Json{{"name", f.name},
                       {"transform", f.transform.ToString()},
                       {"source-id", f.source_id},
                       {"field-id", f.field_id}});
  }
  return out;
}

Json PartitionSpec::ToJson() const { return Json{{"spec-id", spec_id}, {"fields", FieldsJson()}}; }

Result<PartitionSpec> PartitionSpec::FromJson(const Json& j) {
  if (!j.is_object() || !j.contains("fields") || !j["fields"].is_array()) {
    return Status::Corruption("a partition spec without a fields array");
  }
  PartitionSpec s;
  s.spec_id = j.value("spec-id", 0);
  for (const auto& f : j["fields"]) {
    if (!f.is_object() || !f.contains("transform") || !f["transform"].is_string()) {
      return Status::Corruption("partition spec " + std::to_string(s.spec_id) +
                                " has a field without a transform");
    }
    PartitionField pf;
    pf.name = f.value("name", "");
    pf.field_id = f.value("field-id", 0);
    if (f.contains("source-id")) {
      pf.source_id = f.value("source-id", 0);
    } else if (f.contains("source-ids") && f["source-ids"].is_array() &&
               f["source-ids"].size() == 1) {
      pf.source_id = f["source-ids"][0].get<int32_t>();
    } else {
      return Status::NotSupported("partition spec " + std::to_string(s.spec_id) + " field '" +
                                  pf.name +
                                  "' has several source columns; ferry writes specs "
                                  "whose fields each have one");
    }
    auto t = Transform::Parse(f["transform"].get<std::string>());
    if (!t.ok()) {
      return t.status().WithContext("partition spec " + std::to_string(s.spec_id) + " field '" +
                                    pf.name + "'");
    }
    pf.transform = *t;
    s.fields.push_back(std::move(pf));
  }
  return s;
}

bool PartitionSpec::SameLayout(const PartitionSpec& o) const {
  if (fields.size() != o.fields.size()) return false;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i].source_id != o.fields[i].source_id ||
        !(fields[i].transform == o.fields[i].transform)) {
      return false;
    }
  }
  return true;
}

std::string PartitionSpec::Describe(const Schema& schema) const {
  if (fields.empty()) return "unpartitioned";
  std::string out;
  for (const auto& f : fields) {
    if (!out.empty()) out += ", ";
    const Field* src = schema.FindById(f.source_id);
    out += f.transform.ToString() + "(" +
           (src ? src->name : "column " + std::to_string(f.source_id)) + ")";
  }
  return out;
}

Result<PartitionSpec> ParsePartitionBy(const std::vector<std::string>& terms,
                                       const Schema& schema) {
  PartitionSpec spec;
  int32_t next_id = 1000;
  std::set<std::string> names;
  for (const std::string& raw : terms) {
    const std::string term = Trim(raw);
    auto bad = [&](const std::string& why) {
      return Status::InvalidArgument("partition_by term '" + raw + "': " + why);
    };
    std::string column;
    Transform transform;
    if (schema.FindByName(term) != nullptr) {
      column = term;  // a column whose name looks like a call is that column
    } else {
      const size_t open = term.find('(');
      if (open == std::string::npos || term.back() != ')') {
        return bad("no column of that name (the table's columns are the source's)");
      }
      std::string fn = Lower(Trim(term.substr(0, open)));
      std::string args = term.substr(open + 1, term.size() - open - 2);
      std::string param;
      // Iceberg's own spelling: bucket[16](id)
      if (const size_t br = fn.find('['); br != std::string::npos && fn.back() == ']') {
        param = fn.substr(br + 1, fn.size() - br - 2);
        fn = Trim(fn.substr(0, br));
      } else if (fn == "bucket" || fn == "truncate") {
        const size_t comma = args.find(',');
        if (comma == std::string::npos) {
          return bad(fn + " takes a number and a column: " + fn + "(16, id)");
        }
        param = Trim(args.substr(0, comma));
        args = args.substr(comma + 1);
      }
      column = Trim(args);
      if (column.size() >= 2 && column.front() == '"' && column.back() == '"') {
        column = column.substr(1, column.size() - 2);
      }
      auto t = Transform::Parse(param.empty() ? fn : fn + "[" + param + "]");
      if (!t.ok()) {
        if (fn == "bucket" || fn == "truncate") {
          return bad(fn + "'s number must be a positive integer, not '" + param + "'");
        }
        return bad("unknown transform '" + fn +
                   "' (identity, year, month, day, hour, bucket, truncate, void)");
      }
      if ((fn == "bucket" || fn == "truncate") == param.empty()) {
        return bad(fn + " takes " + (param.empty() ? "a number and a column" : "a column only"));
      }
      transform = *t;
    }
    const Field* f = schema.FindByName(column);
    if (f == nullptr) return bad("no column '" + column + "' in the table");
    auto type = transform.ResultType(f->type);
    if (!type.ok()) return bad(type.status().message() + " ('" + column + "')");
    PartitionField pf;
    pf.source_id = f->id;
    pf.field_id = next_id++;
    pf.transform = transform;
    switch (transform.kind) {
      case TransformKind::kIdentity:
        pf.name = f->name;
        break;
      case TransformKind::kYear:
        pf.name = f->name + "_year";
        break;
      case TransformKind::kMonth:
        pf.name = f->name + "_month";
        break;
      case TransformKind::kDay:
        pf.name = f->name + "_day";
        break;
      case TransformKind::kHour:
        pf.name = f->name + "_hour";
        break;
      case TransformKind::kBucket:
        pf.name = f->name + "_bucket";
        break;
      case TransformKind::kTruncate:
        pf.name = f->name + "_trunc";
        break;
      case TransformKind::kVoid:
        pf.name = f->name + "_null";
        break;
    }
    for (const auto& other : spec.fields) {
      if (other.source_id == pf.source_id && other.transform == pf.transform) {
        return bad("column '" + column + "' is partitioned by " + transform.ToString() + " twice");
      }
    }
    if (!names.insert(pf.name).second) {
      return bad("two partition fields would be named '" + pf.name + "'");
    }
    spec.fields.push_back(std::move(pf));
  }
  return spec;
}

namespace {

// Transform `t` (not void) of the integer `v` of a column of kind `k` (IntSource).
int64_t IntTransform(const Transform& t, TypeKind k, int64_t v) {
  switch (t.kind) {
    case TransformKind::kIdentity:
    case TransformKind::kVoid:
      return v;
    case TransformKind::kYear:
    case TransformKind::kMonth: {
      int64_t y = 0;
      unsigned m = 0;
      unsigned d = 0;
      CivilFromDays(DaysOf(k, v), &y, &m, &d);
      return t.kind == TransformKind::kYear ? y - 1970 : (y - 1970) * 12 + (m - 1);
    }
    case TransformKind::kDay:
      return DaysOf(k, v);
    case TransformKind::kHour:
      return FloorDiv(v, int64_t{3600} * 1000000);
    case TransformKind::kBucket: {  // ints, dates, times and timestamps hash as a long
      char bytes[8];
      for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
      return (Murmur3(std::string_view(bytes, 8)) & std::numeric_limits<int32_t>::max()) % t.param;
    }
    case TransformKind::kTruncate:
      return v - FloorMod<int64_t>(v, t.param);
  }
  return v;
}

}  // namespace

PartitionValue ApplyTransform(const Transform& t, const DataType& source, const Column& col,
                              size_t row) {
  PartitionValue v;
  if (t.kind == TransformKind::kVoid || !col.IsValid(row)) return v;
  v.null = false;
  const TypeKind k = source.kind();
  if (IntSource(k)) {
    v.i = IntTransform(t, k, IntSourceValue(k, col, row));
    return v;
  }
  // The source value in PartitionValue's form (integer sources are done above).
  PartitionValue in;
  in.null = false;
  switch (k) {
    case TypeKind::kBoolean:
      in.i = col.ValueAt<uint8_t>(row);
      break;
    case TypeKind::kFloat32:
      in.f = col.ValueAt<float>(row);
      break;
    case TypeKind::kFloat64:
      in.f = col.ValueAt<double>(row);
      break;
    case TypeKind::kDecimal:
      in.dec = col.ValueAt<__int128>(row);
      break;
    case TypeKind::kUuid:
      in.bytes.assign(reinterpret_cast<const char*>(col.fixed_data() + row * 16), 16);
      break;
    case TypeKind::kString:
    case TypeKind::kBinary:
      in.bytes = std::string(col.GetBytes(row));
      break;
    default:  // lists (refused by ResultType); integer sources returned above
      return PartitionValue{};
  }
  // Only identity, bucket and truncate apply to these types (ResultType refuses the others).
  switch (t.kind) {
    case TransformKind::kBucket: {
      std::string bytes = k == TypeKind::kDecimal ? parquet::internal::MinimalBigEndian(in.dec)
                                                  : std::move(in.bytes);
      v.i = (Murmur3(bytes) & std::numeric_limits<int32_t>::max()) % t.param;
      return v;
    }
    case TransformKind::kTruncate:
      if (k == TypeKind::kDecimal) {
        in.dec -= FloorMod<__int128>(in.dec, t.param);
      } else if (k == TypeKind::kString) {
        in.bytes = std::string(Utf8Prefix(in.bytes, t.param));
      } else if (k == TypeKind::kBinary) {
        in.bytes.resize(std::min<size_t>(in.bytes.size(), static_cast<size_t>(t.param)));
      }
      return in;
    default:
      return in;  // identity
  }
}

std::string SingleValueBytes(const DataType& t, const PartitionValue& v) {
  switch (t.kind()) {
    case TypeKind::kBoolean:
      return std::string(1, v.i != 0 ? '\1' : '\0');
    case TypeKind::kInt32:
    case TypeKind::kDate:
      return LittleEndian(static_cast<uint64_t>(v.i), 4);
    case TypeKind::kInt64:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return LittleEndian(static_cast<uint64_t>(v.i), 8);
    case TypeKind::kFloat32: {
      const auto f = static_cast<float>(v.f);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return LittleEndian(bits, 4);
    }
    case TypeKind::kFloat64: {
      uint64_t bits;
      std::memcpy(&bits, &v.f, 8);
      return LittleEndian(bits, 8);
    }
    case TypeKind::kDecimal:
      return parquet::internal::MinimalBigEndian(v.dec);
    case TypeKind::kString:
    case TypeKind::kBinary:
    case TypeKind::kUuid:
    case TypeKind::kList:
      return v.bytes;
  }
  return v.bytes;
}

int CompareValues(const DataType& t, const PartitionValue& a, const PartitionValue& b) {
  switch (t.kind()) {
    case TypeKind::kFloat32:
    case TypeKind::kFloat64:
      return a.f < b.f ? -1 : (b.f < a.f ? 1 : 0);
    case TypeKind::kDecimal:
      return a.dec < b.dec ? -1 : (b.dec < a.dec ? 1 : 0);
    case TypeKind::kString:
    case TypeKind::kBinary:
    case TypeKind::kUuid:
    case TypeKind::kList:
      return a.bytes.compare(b.bytes) < 0 ? -1 : (a.bytes == b.bytes ? 0 : 1);
    default:
      return a.i < b.i ? -1 : (b.i < a.i ? 1 : 0);
  }
}

std::string ValueText(const DataType& t, const PartitionValue& v) {
  if (v.null) return "null";
  switch (t.kind()) {
    case TypeKind::kBoolean:
      return v.i != 0 ? "true" : "false";
    case TypeKind::kDate:
      return FormatDateIso(static_cast<int32_t>(v.i));
    case TypeKind::kTime:
      return FormatTimeIso(v.i);
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return FormatTimestampIso(v.i);
    case TypeKind::kFloat32:
    case TypeKind::kFloat64: {
      Json j = v.f;
      return j.dump();
    }
    case TypeKind::kDecimal:
      return FormatDecimal(v.dec, t.scale());
    case TypeKind::kString:
      return v.bytes;
    case TypeKind::kBinary:
      return Hex(v.bytes);
    case TypeKind::kUuid:
      return v.bytes.size() == 16 ? FormatUuid(reinterpret_cast<const uint8_t*>(v.bytes.data()))
                                  : Hex(v.bytes);
    default:
      return std::to_string(v.i);
  }
}

Result<Partitioner> Partitioner::Make(const PartitionSpec& spec, const Schema& schema) {
  Partitioner p;
  p.spec_ = spec;
  for (const auto& f : spec.fields) {
    size_t at = schema.fields.size();
    for (size_t i = 0; i < schema.fields.size(); ++i) {
      if (schema.fields[i].id == f.source_id) at = i;
    }
    if (at == schema.fields.size()) {
      return Status::InvalidArgument("partition field '" + f.name + "' reads column id " +
                                     std::to_string(f.source_id) +
                                     ", which the table's schema does not have");
    }
    auto type = f.transform.ResultType(schema.fields[at].type);
    if (!type.ok()) {
      return type.status().WithContext("partition field '" + f.name + "' over column '" +
                                       schema.fields[at].name + "'");
    }
    p.types_.push_back(*type);
    p.source_types_.push_back(schema.fields[at].type);
    p.columns_.push_back(at);
    if (f.transform.kind != TransformKind::kVoid && !IntSource(schema.fields[at].type.kind())) {
      p.int_valued_ = false;
    }
  }
  return p;
}

void Partitioner::IntsOf(const Batch& batch, std::vector<int64_t>* values,
                         std::vector<uint8_t>* nulls) const {
  const size_t rows = batch.num_rows();
  values->resize(columns_.size() * rows);
  nulls->resize(columns_.size() * rows);
  for (size_t f = 0; f < columns_.size(); ++f) {
    const Transform& t = spec_.fields[f].transform;
    const TypeKind k = source_types_[f].kind();
    const Column& col = batch.column(columns_[f]);
    int64_t* out = values->data() + f * rows;
    uint8_t* null = nulls->data() + f * rows;
    if (t.kind == TransformKind::kVoid) {
      std::fill(out, out + rows, 0);
      std::fill(null, null + rows, 1);
      continue;
    }
    const uint8_t* valid = col.validity();
    for (size_t r = 0; r < rows; ++r) {
      null[r] = valid[r] == 0;
      out[r] = null[r] != 0 ? 0 : IntTransform(t, k, IntSourceValue(k, col, r));
    }
  }
}

void Partitioner::IntsTuple(const std::vector<int64_t>& values, const std::vector<uint8_t>& nulls,
                            size_t rows, size_t row, PartitionTuple* out) const {
  out->resize(columns_.size());
  for (size_t f = 0; f < columns_.size(); ++f) {
    PartitionValue& v = (*out)[f];
    v = PartitionValue{};
    v.null = nulls[f * rows + row] != 0;
    if (!v.null) v.i = values[f * rows + row];
  }
}

PartitionTuple Partitioner::Of(const Batch& batch, size_t row) const {
  PartitionTuple t;
  Into(batch, row, &t);
  return t;
}

void Partitioner::Into(const Batch& batch, size_t row, PartitionTuple* out) const {
  out->resize(columns_.size());
  for (size_t i = 0; i < columns_.size(); ++i) {
    (*out)[i] =
        ApplyTransform(spec_.fields[i].transform, source_types_[i], batch.column(columns_[i]), row);
  }
}

std::string PartitionKey(const PartitionTuple& t) {
  // Each value: a null flag, then (not null) its fields' bytes as they are in memory (one
  // process's map key, never stored) and its byte string after its length.
  size_t n = 0;
  for (const PartitionValue& v : t) n += v.null ? 1 : 1 + 8 + 8 + 16 + 8 + v.bytes.size();
  std::string key;
  key.reserve(n);
  auto put = [&key](const void* p, size_t len) { key.append(static_cast<const char*>(p), len); };
  for (const PartitionValue& v : t) {
    if (v.null) {
      key.push_back('\0');
      continue;
    }
    key.push_back('\1');
    put(&v.i, 8);
    put(&v.f, 8);
    put(&v.dec, 16);
    const uint64_t len = v.bytes.size();
    put(&len, 8);
    key += v.bytes;
  }
  return key;
}

std::string Partitioner::Path(const PartitionTuple& t) const {
  std::string path;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!path.empty()) path += '/';
    std::string text;
    const PartitionValue& v = t[i];
    if (v.null) {
      text = "null";
    } else {
      switch (spec_.fields[i].transform.kind) {
        case TransformKind::kYear:
          text = std::to_string(1970 + v.i);
          break;
        case TransformKind::kMonth: {
          const int64_t y = 1970 + FloorDiv(v.i, 12);
          const int64_t m = FloorMod<int64_t>(v.i, 12) + 1;
          text = std::to_string(y) + (m < 10 ? "-0" : "-") + std::to_string(m);
          break;
        }
        case TransformKind::kDay:
          text = FormatDateIso(static_cast<int32_t>(v.i));
          break;
        case TransformKind::kHour: {
          const int64_t h = FloorMod<int64_t>(v.i, 24);
          text = FormatDateIso(static_cast<int32_t>(FloorDiv(v.i, 24))) + (h < 10 ? "-0" : "-") +
                 std::to_string(h);
          break;
        }
        default:
          text = ValueText(types_[i], v);
      }
    }
    // A folder name, so kept short: the file's own name is what makes it unique.
    if (text.size() > 64) text.resize(64);
    path += PathEscape(spec_.fields[i].name) + "=" + PathEscape(text);
  }
  return path;
}

}  // namespace ferry::lake
