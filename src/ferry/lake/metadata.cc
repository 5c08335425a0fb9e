#include "ferry/lake/metadata.h"

#include <algorithm>
#include <cstdlib>

#include "ferry/base/assert.h"

namespace ferry::lake {

Json TypeToJson(const DataType& t) {
  if (!t.is_list()) return t.ToIceberg();
  const ListElement& e = t.list();
  return Json{{"type", "list"},
              {"element-id", e.id},
              {"element", TypeToJson(e.type)},
              {"element-required", e.required}};
}

Result<DataType> TypeFromJson(const Json& j, const std::string& column) {
  if (j.is_string()) return DataType::FromIceberg(j.get<std::string>());
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Status::Corruption("column '" + column +
                              "' has a type that is neither a name nor an object");
  }
  const std::string kind = j["type"].get<std::string>();
  if (kind != "list") {
    return Status::NotSupported("column '" + column + "' has the nested type " + kind +
                                "; ferry reads and writes primitive columns and lists only");
  }
  if (!j.contains("element-id") || !j["element-id"].is_number_integer() || !j.contains("element")) {
    return Status::Corruption("column '" + column + "' is a list without element-id or element");
  }
  if (!j["element"].is_string()) {
    return Status::NotSupported("column '" + column +
                                "' is a list of a nested type; ferry handles lists of primitive "
                                "types only");
  }
  FERRY_ASSIGN_OR_RETURN(DataType element, DataType::FromIceberg(j["element"].get<std::string>()));
  return DataType::List(element, j.value("element-required", false),
                        j["element-id"].get<int32_t>());
}

Json SchemaToJson(const Schema& schema) {
  Json fields = Json::array();
  for (const auto& f : schema.fields) {
    Json jf{{"id", f.id}, {"name", f.name}, {"required", f.required}, {"type", TypeToJson(f.type)}};
    if (!f.doc.empty()) jf["doc"] = f.doc;
    fields.push_back(std::move(jf));
  }
  Json j{{"type", "struct"}, {"schema-id", schema.schema_id}, {"fields", std::move(fields)}};
  if (!schema.identifier_field_ids.empty()) j["identifier-field-ids"] = schema.identifier_field_ids;
  return j;
}

Result<Schema> SchemaFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("fields") || !j["fields"].is_array()) {
    return Status::Corruption("schema JSON has no fields array");
  }
  Schema s;
  s.schema_id = j.value("schema-id", 0);
  for (const auto& jf : j["fields"]) {
    if (!jf.contains("type")) {
      return Status::Corruption("column '" + jf.value("name", std::string("?")) + "' has no type");
    }
    FERRY_ASSIGN_OR_RETURN(DataType t,
                           TypeFromJson(jf["type"], jf.value("name", std::string("?"))));
    Field f;
    f.id = jf.value("id", 0);
    f.name = jf.value("name", "");
    f.required = jf.value("required", false);
    f.type = t;
    f.doc = jf.value("doc", "");
    s.fields.push_back(std::move(f));
  }
  if (j.contains("identifier-field-ids")) {
    s.identifier_field_ids = j["identifier-field-ids"].get<std::vector<int32_t>>();
  }
  return s;
}

Result<TableMetadata> TableMetadata::Parse(const std::string& text, const std::string& location) {
  Json doc = Json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Corruption("table metadata " + location + " is not valid JSON");
  }
  return FromJson(std::move(doc), location);
}

Result<TableMetadata> TableMetadata::FromJson(Json doc, const std::string& location) {
  if (!doc.is_object())
    return Status::Corruption("table metadata " + location + " is not an object");
  if (doc.value("format-version", 0) != 2) {
    return Status::NotSupported("table metadata " + location + " has format-version " +
                                doc.value("format-version", Json(0)).dump() +
                                "; ferry writes format version 2 tables");
  }
  for (const char* key : {"table-uuid", "location", "schemas", "current-schema-id"}) {
    if (!doc.contains(key)) {
      return Status::Corruption("table metadata " + location + " lacks '" + key + "'");
    }
  }
  TableMetadata m;
  m.doc_ = std::move(doc);
  if (!m.doc_.contains("snapshots")) m.doc_["snapshots"] = Json::array();
  if (!m.doc_.contains("refs")) m.doc_["refs"] = Json::object();
  if (!m.doc_.contains("properties")) m.doc_["properties"] = Json::object();
  if (!m.doc_.contains("snapshot-log")) m.doc_["snapshot-log"] = Json::array();
  if (!m.doc_.contains("metadata-log")) m.doc_["metadata-log"] = Json::array();
  return m;
}

Json NewTableDocument(NewTableParts p) {
  return Json{
      {"format-version", 2},
      {"table-uuid", std::move(p.table_uuid)},
      {"location", std::move(p.location)},
      {"last-sequence-number", 0},
      {"last-updated-ms", p.last_updated_ms},
      {"last-column-id", p.last_column_id},
      {"current-schema-id", p.current_schema_id},
      {"schemas", std::move(p.schemas)},
      {"default-spec-id", 0},
      {"partition-specs", std::move(p.specs)},
      {"last-partition-id", p.last_partition_id},
      {"default-sort-order-id", p.default_order_id},
      {"sort-orders", std::move(p.orders)},
      {"properties", std::move(p.properties)},
      {"current-snapshot-id", -1},
      {"refs", Json::object()},
      {"snapshots", Json::array()},
      {"statistics", Json::array()},
      {"partition-statistics", Json::array()},
      {"snapshot-log", Json::array()},
      {"metadata-log", Json::array()},
  };
}

TableMetadata TableMetadata::NewTable(const std::string& table_uuid, const std::string& location,
                                      const Schema& schema,
                                      const std::map<std::string, std::string>& properties) {
  Schema s = schema;
  s.schema_id = 0;
  NewTableParts parts;
  parts.table_uuid = table_uuid;
  parts.location = location;
  parts.schemas = Json::array({SchemaToJson(s)});
  parts.last_column_id = s.HighestFieldId();
  parts.specs = Json::array({Json{{"spec-id", 0}, {"fields", Json::array()}}});
  parts.orders = Json::array({Json{{"order-id", 0}, {"fields", Json::array()}}});
  for (const auto& [k, v] : properties) parts.properties[k] = v;
  TableMetadata m;
  m.doc_ = NewTableDocument(std::move(parts));
  return m;
}

Result<Schema> TableMetadata::SchemaById(int32_t id) const {
  for (const auto& s : doc_["schemas"]) {
    if (s.value("schema-id", -1) == id) return SchemaFromJson(s);
  }
  return Status::Corruption("table metadata has no schema with id " + std::to_string(id));
}

Result<Schema> TableMetadata::CurrentSchema() const { return SchemaById(current_schema_id()); }

int32_t TableMetadata::AddSchema(Schema schema) {
  int32_t max_id = -1;
  for (const auto& js : doc_["schemas"]) {
    int32_t id = js.value("schema-id", 0);
    max_id = std::max(max_id, id);
    auto existing = SchemaFromJson(js);
    if (existing.ok() && existing->SameStructure(schema)) return id;
  }
  schema.schema_id = max_id + 1;
  doc_["schemas"].push_back(SchemaToJson(schema));
  doc_["last-column-id"] = std::max(last_column_id(), schema.HighestFieldId());
  return schema.schema_id;
}

Result<PartitionSpec> TableMetadata::SpecById(int32_t id) const {
  if (!doc_.contains("partition-specs") || !doc_["partition-specs"].is_array()) {
    if (id == 0) return PartitionSpec{};  // none listed: unpartitioned
  } else {
    for (const auto& js : doc_["partition-specs"]) {
      if (js.value("spec-id", -1) == id) return PartitionSpec::FromJson(js);
    }
  }
  return Status::Corruption("table metadata has no partition spec with id " + std::to_string(id));
}

int32_t TableMetadata::AddSpec(PartitionSpec spec) {
  if (!doc_.contains("partition-specs") || !doc_["partition-specs"].is_array()) {
    doc_["partition-specs"] = Json::array({Json{{"spec-id", 0}, {"fields", Json::array()}}});
  }
  int32_t max_id = -1;
  int32_t last_field = doc_.value("last-partition-id", 999);
  std::vector<PartitionSpec> existing;
  for (const auto& js : doc_["partition-specs"]) {
    auto e = PartitionSpec::FromJson(js);
    max_id = std::max(max_id, js.value("spec-id", 0));
    if (!e.ok()) continue;
    if (e->SameLayout(spec)) return e->spec_id;
    for (const auto& f : e->fields) last_field = std::max(last_field, f.field_id);
    existing.push_back(std::move(*e));
  }
  for (auto& f : spec.fields) {
    f.field_id = 0;
    for (const auto& e : existing) {
      for (const auto& old : e.fields) {
        if (old.source_id == f.source_id && old.transform == f.transform) f.field_id = old.field_id;
      }
    }
    if (f.field_id == 0) f.field_id = ++last_field;
  }
  spec.spec_id = max_id + 1;
  doc_["partition-specs"].push_back(spec.ToJson());
  doc_["last-partition-id"] = last_field;
  return spec.spec_id;
}

std::optional<int64_t> TableMetadata::BranchHead(const std::string& branch) const {
  const Json& refs = doc_["refs"];
  if (refs.contains(branch)) return refs[branch]["snapshot-id"].get<int64_t>();
  if (branch == "main") {
    int64_t cur = doc_.value("current-snapshot-id", int64_t{-1});
    if (!doc_["current-snapshot-id"].is_null() && cur >= 0) return cur;
  }
  return std::nullopt;
}

const Json* TableMetadata::FindSnapshot(int64_t snapshot_id) const {
  for (const auto& s : doc_["snapshots"]) {
    if (s["snapshot-id"].get<int64_t>() == snapshot_id) return &s;
  }
  return nullptr;
}

void TableMetadata::AddSnapshot(Json snapshot, const std::string& branch) {
  int64_t seq = last_sequence_number() + 1;
  snapshot["sequence-number"] = seq;
  doc_["last-sequence-number"] = seq;
  int64_t id = snapshot["snapshot-id"].get<int64_t>();
  int64_t ts = snapshot["timestamp-ms"].get<int64_t>();
  doc_["snapshots"].push_back(std::move(snapshot));
  SetBranch(branch, id, ts);
}

void TableMetadata::SetBranch(const std::string& branch, int64_t snapshot_id, int64_t now_ms) {
  FERRY_CHECK(FindSnapshot(snapshot_id) != nullptr);
  doc_["refs"][branch] = Json{{"snapshot-id", snapshot_id}, {"type", "branch"}};
  if (branch == "main") {
    doc_["current-snapshot-id"] = snapshot_id;
    doc_["snapshot-log"].push_back(Json{{"timestamp-ms", now_ms}, {"snapshot-id", snapshot_id}});
  }
}

void TableMetadata::RemoveBranch(const std::string& branch) {
  FERRY_CHECK(branch != "main");
  doc_["refs"].erase(branch);
}

std::vector<std::string> TableMetadata::Branches() const {
  std::vector<std::string> out;
  for (auto it = doc_["refs"].begin(); it != doc_["refs"].end(); ++it) out.push_back(it.key());
  return out;
}

std::optional<std::string> TableMetadata::Property(const std::string& key) const {
  const Json& p = doc_["properties"];
  if (!p.contains(key) || !p[key].is_string()) return std::nullopt;
  return p[key].get<std::string>();
}

void TableMetadata::SetProperty(const std::string& key, const std::string& value) {
  doc_["properties"][key] = value;
}

void TableMetadata::RemoveProperty(const std::string& key) { doc_["properties"].erase(key); }

void TableMetadata::StartUpdate(const std::string& previous_location, int64_t now_ms) {
  int64_t prev_updated = last_updated_ms();
  if (!previous_location.empty()) {
    Json& log = doc_["metadata-log"];
    log.push_back(Json{{"timestamp-ms", prev_updated}, {"metadata-file", previous_location}});
    size_t keep = 100;
    if (auto v = Property("write.metadata.previous-versions-max")) {
      // As Java's: a number below 1 keeps one previous file.
      char* end = nullptr;
      long n = std::strtol(v->c_str(), &end, 10);
      if (end != v->c_str() && *end == '\0') keep = static_cast<size_t>(std::max(1L, n));
    }
    if (log.size() > keep)
      log.erase(log.begin(), log.begin() + static_cast<long>(log.size() - keep));
  }
  doc_["last-updated-ms"] = std::max(now_ms, prev_updated);
}

int64_t MetadataVersion(const std::string& metadata_location) {
  auto slash = metadata_location.rfind('/');
  std::string name = metadata_location.substr(slash == std::string::npos ? 0 : slash + 1);
  size_t i = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == 0 || i >= name.size() || name[i] != '-') return -1;
  return std::strtoll(name.substr(0, i).c_str(), nullptr, 10);
}

}  // namespace ferry::lake
