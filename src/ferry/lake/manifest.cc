#include "ferry/lake/manifest.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

#include "ferry/format/avro/avro.h"
#include "ferry/format/parquet/encoding.h"
#include "ferry/lake/metadata.h"

namespace ferry::lake {
namespace {

using Json = nlohmann::json;

Json F(const char* name, Json type, int id) {
  return Json{{"name", name}, {"type", std::move(type)}, {"field-id", id}};
}
Json Opt(const char* name, Json type, int id) {
  return Json{{"name", name},
              {"type", Json::array({"null", std::move(type)})},
              {"default", nullptr},
              {"field-id", id}};
}
// Iceberg's int-keyed map: an array of {key, value} records with logicalType "map".
Json IntMap(int key_id, int value_id, const char* value_type) {
  std::string rec = "k" + std::to_string(key_id) + "_v" + std::to_string(value_id);
  return Json{
      {"type", "array"},
      {"logicalType", "map"},
      {"items",
       {{"type", "record"},
        {"name", rec},
        {"fields", Json::array({F("key", "int", key_id), F("value", value_type, value_id)})}}}};
}
Json List(const char* item, int element_id) {
  return Json{{"type", "array"}, {"items", item}, {"element-id", element_id}};
}

// The Avro type of partition values of type `t` (Iceberg's Avro mapping).
Json AvroTypeOf(const DataType& t, int32_t field_id) {
  switch (t.kind()) {
    case TypeKind::kBoolean:
      return "boolean";
    case TypeKind::kInt32:
      return "int";
    case TypeKind::kDate:
      return Json{{"type", "int"}, {"logicalType", "date"}};
    case TypeKind::kInt64:
      return "long";
    case TypeKind::kTime:
      return Json{{"type", "long"}, {"logicalType", "time-micros"}};
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return Json{{"type", "long"},
                  {"logicalType", "timestamp-micros"},
                  {"adjust-to-utc", t.kind() == TypeKind::kTimestampTz}};
    case TypeKind::kFloat32:
      return "float";
    case TypeKind::kFloat64:
      return "double";
    case TypeKind::kDecimal:
      return Json{{"type", "fixed"},
                  {"name", "decimal_" + std::to_string(field_id)},
                  {"size", parquet::internal::DecimalBytesForPrecision(t.precision())},
                  {"logicalType", "decimal"},
                  {"precision", t.precision()},
                  {"scale", t.scale()}};
    case TypeKind::kUuid:
      return Json{{"type", "fixed"},
                  {"name", "uuid_" + std::to_string(field_id)},
                  {"size", 16},
                  {"logicalType", "uuid"}};
    case TypeKind::kBinary:
      return "bytes";
    case TypeKind::kString:
    case TypeKind::kList:
      return "string";
  }
  return "string";
}

Json PartitionRecord(const PartitionSpec& spec, const std::vector<DataType>& types) {
  Json fields = Json::array();
  for (size_t i = 0; i < spec.fields.size(); ++i) {
    const PartitionField& f = spec.fields[i];
    fields.push_back(Json{{"name", parquet::internal::ParquetColumnName(f.name)},
                          {"type", Json::array({"null", AvroTypeOf(types[i], f.field_id)})},
                          {"default", nullptr},
                          {"field-id", f.field_id}});
  }
  return Json{{"type", "record"}, {"name", "r102"}, {"fields", std::move(fields)}};
}

void WritePartitionValue(avro::Encoder& e, const DataType& t, const PartitionValue& v) {
  if (v.null) {
    e.WriteUnionIndex(0);
    return;
  }
  e.WriteUnionIndex(1);
  switch (t.kind()) {
    case TypeKind::kBoolean:
      e.WriteBool(v.i != 0);
      break;
    case TypeKind::kFloat32:
      e.WriteFloat(static_cast<float>(v.f));
      break;
    case TypeKind::kFloat64:
      e.WriteDouble(v.f);
      break;
    case TypeKind::kDecimal: {
      const int width = parquet::internal::DecimalBytesForPrecision(t.precision());
      std::string bytes(static_cast<size_t>(width), '\0');
      parquet::internal::BigEndianBytes(v.dec, width, reinterpret_cast<uint8_t*>(bytes.data()));
      e.WriteFixed(bytes);
      break;
    }
    case TypeKind::kUuid:
      e.WriteFixed(v.bytes);
      break;
    case TypeKind::kString:
    case TypeKind::kBinary:
    case TypeKind::kList:
      e.WriteBytes(v.bytes);
      break;
    default:
      e.WriteLong(v.i);
  }
}

// A decoded partition value of Avro type `avro_type` (the union's non-null branch).
PartitionValue PartitionValueOf(const Json& avro_type, const Json& v) {
  PartitionValue out;
  if (v.is_null()) return out;
  out.null = false;
  const std::string logical =
      avro_type.is_object() ? avro_type.value("logicalType", std::string()) : std::string();
  if (v.is_boolean()) {
    out.i = v.get<bool>() ? 1 : 0;
  } else if (v.is_number_integer()) {
    out.i = v.get<int64_t>();
  } else if (v.is_number()) {
    out.f = v.get<double>();
  } else if (v.is_string()) {
    out.bytes = v.get<std::string>();
    if (logical == "decimal") {
      __int128 u = 0;
      if (!out.bytes.empty() && (static_cast<unsigned char>(out.bytes[0]) & 0x80)) u = -1;
      for (unsigned char c : out.bytes) u = (u << 8) | c;
      out.dec = u;
      out.bytes.clear();
    }
  }
  return out;
}

std::string ManifestEntrySchema(const Json& partition_record) {
  return [&] {
    Json data_file{{"type", "record"},
                   {"name", "r2"},
                   {"fields", Json::array({
                                  F("content", "int", 134),
                                  F("file_path", "string", 100),
                                  F("file_format", "string", 101),
                                  F("partition", partition_record, 102),
                                  F("record_count", "long", 103),
                                  F("file_size_in_bytes", "long", 104),
                                  Opt("column_sizes", IntMap(117, 118, "long"), 108),
                                  Opt("value_counts", IntMap(119, 120, "long"), 109),
                                  Opt("null_value_counts", IntMap(121, 122, "long"), 110),
                                  Opt("nan_value_counts", IntMap(138, 139, "long"), 137),
                                  Opt("lower_bounds", IntMap(126, 127, "bytes"), 125),
                                  Opt("upper_bounds", IntMap(129, 130, "bytes"), 128),
                                  Opt("key_metadata", "bytes", 131),
                                  Opt("split_offsets", List("long", 133), 132),
                                  Opt("equality_ids", List("int", 136), 135),
                                  Opt("sort_order_id", "int", 140),
                                  Opt("referenced_data_file", "string", 143),
                              })}};
    Json entry{{"type", "record"},
               {"name", "manifest_entry"},
               {"fields", Json::array({F("status", "int", 0), Opt("snapshot_id", "long", 1),
                                       Opt("sequence_number", "long", 3),
                                       Opt("file_sequence_number", "long", 4),
                                       F("data_file", data_file, 2)})}};
    return entry.dump();
  }();
}

const std::string& ManifestListSchema() {
  static const std::string kSchema = [] {
    Json summary{
        {"type", "record"},
        {"name", "r508"},
        {"fields",
         Json::array({F("contains_null", "boolean", 509), Opt("contains_nan", "boolean", 518),
                      Opt("lower_bound", "bytes", 510), Opt("upper_bound", "bytes", 511)})}};
    Json list{
        {"type", "record"},
        {"name", "manifest_file"},
        {"fields", Json::array({
                       F("manifest_path", "string", 500),
                       F("manifest_length", "long", 501),
                       F("partition_spec_id", "int", 502),
                       F("content", "int", 517),
                       F("sequence_number", "long", 515),
                       F("min_sequence_number", "long", 516),
                       F("added_snapshot_id", "long", 503),
                       F("added_files_count", "int", 504),
                       F("existing_files_count", "int", 505),
                       F("deleted_files_count", "int", 506),
                       F("added_rows_count", "long", 512),
                       F("existing_rows_count", "long", 513),
                       F("deleted_rows_count", "long", 514),
                       Opt("partitions",
                           Json{{"type", "array"}, {"items", summary}, {"element-id", 508}}, 507),
                       Opt("key_metadata", "bytes", 519),
                   })}};
    return list.dump();
  }();
  return kSchema;
}

void WriteOptLong(avro::Encoder& e, const std::optional<int64_t>& v) {
  if (!v) {
    e.WriteUnionIndex(0);
  } else {
    e.WriteUnionIndex(1);
    e.WriteLong(*v);
  }
}

template <typename V, typename WriteValue>
void WriteOptMap(avro::Encoder& e, const std::map<int32_t, V>& m, WriteValue write_value) {
  if (m.empty()) {
    e.WriteUnionIndex(0);
    return;
  }
  e.WriteUnionIndex(1);
  e.WriteBlockCount(static_cast<int64_t>(m.size()));
  for (const auto& [k, v] : m) {
    e.WriteInt(k);
    write_value(e, v);
  }
  e.WriteBlockCount(0);
}

// Resolves fields of a decoded record by Iceberg field id, using the writer schema.
class ById {
 public:
  // `record_schema` is the Avro record schema JSON of `record`.
  ById(const Json& record_schema, const Json& record) : record_(record) {
    for (const auto& f : record_schema["fields"]) {
      if (f.contains("field-id")) names_[f["field-id"].get<int>()] = f["name"].get<std::string>();
      types_[f["name"].get<std::string>()] = f["type"];
    }
  }
  const Json* Get(int id) const {
    auto it = names_.find(id);
    if (it == names_.end() || !record_.contains(it->second)) return nullptr;
    const Json& v = record_[it->second];
    return v.is_null() ? nullptr : &v;
  }
  int64_t Long(int id, int64_t def = 0) const {
    const Json* v = Get(id);
    return v && v->is_number_integer() ? v->get<int64_t>() : def;
  }
  // The (non-null branch of the) Avro type of field `id`.
  Json TypeOf(int id) const {
    auto it = names_.find(id);
    if (it == names_.end()) return nullptr;
    Json t = types_.at(it->second);
    if (t.is_array()) {
      for (const auto& b : t)
        if (b != "null") return b;
    }
    return t;
  }

 private:
  const Json& record_;
  std::map<int, std::string> names_;
  std::map<std::string, Json> types_;
};

template <typename V>
void ReadIntMap(const Json* arr, std::map<int32_t, V>* out) {
  if (!arr || !arr->is_array()) return;
  for (const auto& kv : *arr) {
    if (!kv.contains("key") || !kv.contains("value")) continue;
    (*out)[kv["key"].get<int32_t>()] = kv["value"].get<V>();
  }
}

}  // namespace

Result<ManifestFile> WriteManifest(FileIO& io, const std::string& uri, const Schema& schema,
                                   const PartitionSpec& spec, int64_t snapshot_id, int32_t content,
                                   const std::vector<ManifestEntry>& entries) {
  auto partitioner = Partitioner::Make(spec, schema);
  if (!partitioner.ok()) return partitioner.status().WithContext("writing manifest " + uri);
  const std::vector<DataType>& types = partitioner->types();
  for (const auto& en : entries) {
    if (en.file.spec_id != spec.spec_id || en.file.partition.size() != spec.fields.size()) {
      return Status::InvalidArgument(
          "file " + en.file.path + " of partition spec " + std::to_string(en.file.spec_id) + " (" +
          std::to_string(en.file.partition.size()) + " values) in a manifest of spec " +
          std::to_string(spec.spec_id));
    }
  }
  FERRY_ASSIGN_OR_RETURN(auto out, io.NewFile(uri));
  std::map<std::string, std::string> meta = {
      {"schema", SchemaToJson(schema).dump()},
      {"schema-id", std::to_string(schema.schema_id)},
      {"partition-spec", spec.FieldsJson().dump()},
      {"partition-spec-id", std::to_string(spec.spec_id)},
      {"format-version", "2"},
      {"content", content == 0 ? "data" : "deletes"},
  };
  FERRY_ASSIGN_OR_RETURN(
      auto w,
      avro::ContainerWriter::Open(std::move(out), ManifestEntrySchema(PartitionRecord(spec, types)),
                                  meta, avro::Codec::kDeflate));
  ManifestFile mf;
  mf.path = uri;
  mf.content = content;
  mf.partition_spec_id = spec.spec_id;
  mf.added_snapshot_id = snapshot_id;
  mf.partitions.resize(spec.fields.size());
  std::vector<std::optional<PartitionValue>> lower(spec.fields.size()), upper(spec.fields.size());
  for (const auto& en : entries) {
    avro::Encoder& e = w->datum();
    e.WriteInt(static_cast<int32_t>(en.status));
    WriteOptLong(e, en.snapshot_id);
    WriteOptLong(e, en.sequence_number);
    WriteOptLong(e, en.file_sequence_number);
    const DataFile& f = en.file;
    e.WriteInt(static_cast<int32_t>(f.content));
    e.WriteString(f.path);
    e.WriteString(f.format);
    for (size_t i = 0; i < spec.fields.size(); ++i) {
      const PartitionValue& v = f.partition[i];
      WritePartitionValue(e, types[i], v);
      FieldSummary& sum = mf.partitions[i];
      const bool is_float =
          types[i].kind() == TypeKind::kFloat32 || types[i].kind() == TypeKind::kFloat64;
      if (is_float && !sum.contains_nan) sum.contains_nan = false;
      if (v.null) {
        sum.contains_null = true;
      } else if (is_float && std::isnan(v.f)) {
        sum.contains_nan = true;
      } else {
        if (!lower[i] || CompareValues(types[i], v, *lower[i]) < 0) lower[i] = v;
        if (!upper[i] || CompareValues(types[i], v, *upper[i]) > 0) upper[i] = v;
      }
    }
    e.WriteLong(f.record_count);
    e.WriteLong(f.file_size_bytes);
    auto long_value = [](avro::Encoder& enc, int64_t v) { enc.WriteLong(v); };
    auto bytes_value = [](avro::Encoder& enc, const std::string& v) { enc.WriteBytes(v); };
    WriteOptMap(e, f.column_sizes, long_value);
    WriteOptMap(e, f.value_counts, long_value);
    WriteOptMap(e, f.null_value_counts, long_value);
    WriteOptMap(e, f.nan_value_counts, long_value);
    WriteOptMap(e, f.lower_bounds, bytes_value);
    WriteOptMap(e, f.upper_bounds, bytes_value);
    e.WriteUnionIndex(0);  // key_metadata
    if (f.split_offsets.empty()) {
      e.WriteUnionIndex(0);
    } else {
      e.WriteUnionIndex(1);
      e.WriteBlockCount(static_cast<int64_t>(f.split_offsets.size()));
      for (int64_t o : f.split_offsets) e.WriteLong(o);
      e.WriteBlockCount(0);
    }
    if (f.equality_ids.empty()) {
      e.WriteUnionIndex(0);
    } else {
      e.WriteUnionIndex(1);
      e.WriteBlockCount(static_cast<int64_t>(f.equality_ids.size()));
      for (int32_t id : f.equality_ids) e.WriteInt(id);
      e.WriteBlockCount(0);
    }
    if (f.sort_order_id) {
      e.WriteUnionIndex(1);
      e.WriteInt(*f.sort_order_id);
    } else {
      e.WriteUnionIndex(0);
    }
    e.WriteUnionIndex(0);  // referenced_data_file
    FERRY_RETURN_IF_ERROR(w->EndDatum());
    switch (en.status) {
      case EntryStatus::kAdded:
        ++mf.added_files_count;
        mf.added_rows_count += f.record_count;
        break;
      case EntryStatus::kExisting:
        ++mf.existing_files_count;
        mf.existing_rows_count += f.record_count;
        break;
      case EntryStatus::kDeleted:
        ++mf.deleted_files_count;
        mf.deleted_rows_count += f.record_count;
        break;
    }
  }
  for (size_t i = 0; i < spec.fields.size(); ++i) {
    if (lower[i]) mf.partitions[i].lower_bound = SingleValueBytes(types[i], *lower[i]);
    if (upper[i]) mf.partitions[i].upper_bound = SingleValueBytes(types[i], *upper[i]);
  }
  FERRY_ASSIGN_OR_RETURN(uint64_t len, w->Close());
  mf.length = static_cast<int64_t>(len);
  return mf;
}

Result<int64_t> WriteManifestList(FileIO& io, const std::string& uri, int64_t snapshot_id,
                                  std::optional<int64_t> parent_snapshot_id,
                                  int64_t sequence_number, std::vector<ManifestFile> manifests) {
  FERRY_ASSIGN_OR_RETURN(auto out, io.NewFile(uri));
  std::map<std::string, std::string> meta = {
      {"snapshot-id", std::to_string(snapshot_id)},
      {"parent-snapshot-id", parent_snapshot_id ? std::to_string(*parent_snapshot_id) : "null"},
      {"sequence-number", std::to_string(sequence_number)},
      {"format-version", "2"},
  };
  FERRY_ASSIGN_OR_RETURN(auto w, avro::ContainerWriter::Open(std::move(out), ManifestListSchema(),
                                                             meta, avro::Codec::kDeflate));
  for (auto& m : manifests) {
    if (m.sequence_number < 0) {
      m.sequence_number = sequence_number;
      // A new manifest's entries inherit this number, unless they carry an older data sequence
      // number of their own (rewritten files): then the writer sets the minimum.
      if (m.min_sequence_number < 0) m.min_sequence_number = sequence_number;
    }
    avro::Encoder& e = w->datum();
    e.WriteString(m.path);
    e.WriteLong(m.length);
    e.WriteInt(m.partition_spec_id);
    e.WriteInt(m.content);
    e.WriteLong(m.sequence_number);
    e.WriteLong(m.min_sequence_number);
    e.WriteLong(m.added_snapshot_id);
    e.WriteInt(m.added_files_count);
    e.WriteInt(m.existing_files_count);
    e.WriteInt(m.deleted_files_count);
    e.WriteLong(m.added_rows_count);
    e.WriteLong(m.existing_rows_count);
    e.WriteLong(m.deleted_rows_count);
    e.WriteUnionIndex(1);  // partitions: one summary per field of the spec (none: unpartitioned)
    if (!m.partitions.empty()) {
      e.WriteBlockCount(static_cast<int64_t>(m.partitions.size()));
      for (const FieldSummary& p : m.partitions) {
        e.WriteBool(p.contains_null);
        if (p.contains_nan) {
          e.WriteUnionIndex(1);
          e.WriteBool(*p.contains_nan);
        } else {
          e.WriteUnionIndex(0);
        }
        for (const auto* b : {&p.lower_bound, &p.upper_bound}) {
          if (*b) {
            e.WriteUnionIndex(1);
            e.WriteBytes(**b);
          } else {
            e.WriteUnionIndex(0);
          }
        }
      }
    }
    e.WriteBlockCount(0);
    e.WriteUnionIndex(0);  // key_metadata
    FERRY_RETURN_IF_ERROR(w->EndDatum());
  }
  FERRY_ASSIGN_OR_RETURN(uint64_t len, w->Close());
  return static_cast<int64_t>(len);
}

Result<std::vector<ManifestFile>> ReadManifestList(FileIO& io, const std::string& uri) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, io.Read(uri));
  auto file = avro::ReadContainer(bytes);
  if (!file.ok()) return file.status().WithContext("manifest list " + uri);
  std::vector<ManifestFile> out;
  for (const auto& rec : file->records) {
    ById r(file->schema, rec);
    ManifestFile m;
    const Json* path = r.Get(500);
    if (!path || !path->is_string()) {
      return Status::Corruption("manifest list " + uri + " has an entry without manifest_path");
    }
    m.path = path->get<std::string>();
    m.length = r.Long(501);
    m.partition_spec_id = static_cast<int32_t>(r.Long(502));
    m.content = static_cast<int32_t>(r.Long(517));
    m.sequence_number = r.Long(515);
    m.min_sequence_number = r.Long(516);
    m.added_snapshot_id = r.Long(503);
    m.added_files_count = static_cast<int32_t>(r.Long(504));
    m.existing_files_count = static_cast<int32_t>(r.Long(505));
    m.deleted_files_count = static_cast<int32_t>(r.Long(506));
    m.added_rows_count = r.Long(512);
    m.existing_rows_count = r.Long(513);
    m.deleted_rows_count = r.Long(514);
    if (const Json* parts = r.Get(507); parts != nullptr && parts->is_array()) {
      const Json item_type = r.TypeOf(507).value("items", Json::object());
      if (!item_type.is_object() || !item_type.contains("fields")) {
        return Status::Corruption("manifest list " + uri +
                                  " has partition summaries without a record schema");
      }
      for (const Json& p : *parts) {
        ById s(item_type, p);
        FieldSummary sum;
        if (const Json* v = s.Get(509); v && v->is_boolean()) sum.contains_null = v->get<bool>();
        if (const Json* v = s.Get(518); v && v->is_boolean()) sum.contains_nan = v->get<bool>();
        if (const Json* v = s.Get(510); v && v->is_string())
          sum.lower_bound = v->get<std::string>();
        if (const Json* v = s.Get(511); v && v->is_string())
          sum.upper_bound = v->get<std::string>();
        m.partitions.push_back(std::move(sum));
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io, const ManifestFile& manifest) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, io.Read(manifest.path));
  auto file = avro::ReadContainer(bytes);
  if (!file.ok()) return file.status().WithContext("manifest " + manifest.path);
  std::vector<ManifestEntry> out;
  for (const auto& rec : file->records) {
    ById r(file->schema, rec);
    ManifestEntry en;
    en.status = static_cast<EntryStatus>(r.Long(0));
    if (const Json* v = r.Get(1)) en.snapshot_id = v->get<int64_t>();
    if (const Json* v = r.Get(3)) en.sequence_number = v->get<int64_t>();
    if (const Json* v = r.Get(4)) en.file_sequence_number = v->get<int64_t>();
    if (!en.snapshot_id) en.snapshot_id = manifest.added_snapshot_id;
    if (!en.sequence_number && en.status == EntryStatus::kAdded) {
      en.sequence_number = manifest.sequence_number;
    }
    if (!en.file_sequence_number && en.status == EntryStatus::kAdded) {
      en.file_sequence_number = manifest.sequence_number;
    }
    const Json* df = r.Get(2);
    if (!df)
      return Status::Corruption("manifest " + manifest.path + " has an entry without data_file");
    const Json data_file_type = r.TypeOf(2);
    ById d(data_file_type, *df);
    DataFile& f = en.file;
    f.spec_id = manifest.partition_spec_id;
    if (const Json* part = d.Get(102); part != nullptr && part->is_object()) {
      // The partition record's fields, in the spec's order, read by their names in this file.
      for (const auto& pf : d.TypeOf(102).value("fields", Json::array())) {
        const std::string name = pf.value("name", std::string());
        const Json declared = pf.value("type", Json());
        Json type = declared;
        if (declared.is_array()) {
          for (const auto& b : declared) {
            if (b != "null") type = b;
          }
        }
        f.partition.push_back(
            PartitionValueOf(type, part->contains(name) ? (*part)[name] : Json(nullptr)));
      }
    }
    f.content = static_cast<FileContent>(d.Long(134));
    if (const Json* v = d.Get(100)) f.path = v->get<std::string>();
    if (const Json* v = d.Get(101)) f.format = v->get<std::string>();
    f.record_count = d.Long(103);
    f.file_size_bytes = d.Long(104);
    ReadIntMap(d.Get(108), &f.column_sizes);
    ReadIntMap(d.Get(109), &f.value_counts);
    ReadIntMap(d.Get(110), &f.null_value_counts);
    ReadIntMap(d.Get(137), &f.nan_value_counts);
    ReadIntMap(d.Get(125), &f.lower_bounds);
    ReadIntMap(d.Get(128), &f.upper_bounds);
    if (const Json* v = d.Get(132)) f.split_offsets = v->get<std::vector<int64_t>>();
    if (const Json* v = d.Get(135)) f.equality_ids = v->get<std::vector<int32_t>>();
    if (const Json* v = d.Get(140)) f.sort_order_id = v->get<int32_t>();
    out.push_back(std::move(en));
  }
  return out;
}

}  // namespace ferry::lake
