#include "ferry/catalog_server/new_table_internal.h"

#include <algorithm>
#include <set>

#include "ferry/base/uuid.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/partition.h"
#include "ferry/lake/table_commit.h"

namespace ferry::catalog_server {
namespace {

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

bool IsInt(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer();
}

std::string NameOf(const Json& field) {
  auto it = field.find("name");
  return it != field.end() && it->is_string() ? it->get<std::string>() : std::string("?");
}

// The field ids of a schema, every nesting level included.
struct SchemaIds {
  std::set<int64_t> ids;
  int64_t highest = 0;

  Status Add(int64_t id, const std::string& where) {
    if (id <= 0) return Bad(where + " has the id " + std::to_string(id) + "; ids are positive");
    if (!ids.insert(id).second) {
      return Bad(where + " has the id " + std::to_string(id) + ", which another field has");
    }
    highest = std::max(highest, id);
    return Status::OK();
  }
};

Status CheckFields(const Json& fields, const std::string& where, SchemaIds& ids);

// A field's type: a primitive's name, or a struct, list or map object.
Status CheckType(const Json& type, const std::string& where, SchemaIds& ids) {
  if (type.is_string()) {
    if (type.get<std::string>().empty()) return Bad(where + " has an empty type name");
    return Status::OK();
  }
  if (!type.is_object() || !type.contains("type") || !type["type"].is_string()) {
    return Bad(where + " has a type that is neither a name nor a struct, list or map object");
  }
  const std::string kind = type["type"].get<std::string>();
  if (kind == "struct") return CheckFields(type.value("fields", Json()), where, ids);
  if (kind == "list") {
    if (!IsInt(type, "element-id") || !type.contains("element")) {
      return Bad(where + " is a list without element-id or element");
    }
    FERRY_RETURN_IF_ERROR(ids.Add(type["element-id"].get<int64_t>(), where + "'s element"));
    return CheckType(type["element"], where + "'s element", ids);
  }
  if (kind == "map") {
    if (!IsInt(type, "key-id") || !IsInt(type, "value-id") || !type.contains("key") ||
        !type.contains("value")) {
      return Bad(where + " is a map without key-id, value-id, key or value");
    }
    FERRY_RETURN_IF_ERROR(ids.Add(type["key-id"].get<int64_t>(), where + "'s key"));
    FERRY_RETURN_IF_ERROR(ids.Add(type["value-id"].get<int64_t>(), where + "'s value"));
    FERRY_RETURN_IF_ERROR(CheckType(type["key"], where + "'s key", ids));
    return CheckType(type["value"], where + "'s value", ids);
  }
  return Bad(where + " has the type object '" + kind + "'; expected struct, list or map");
}

Status CheckFields(const Json& fields, const std::string& where, SchemaIds& ids) {
  if (!fields.is_array()) return Bad(where + " has no fields array");
  std::set<std::string> names;
  for (const auto& f : fields) {
    if (!f.is_object()) return Bad(where + " has a field that is not an object");
    const std::string name = NameOf(f);
    const std::string at = "field '" + name + "'";
    if (!f.contains("name") || !f["name"].is_string() || name.empty()) {
      return Bad(where + " has a field without a name");
    }
    if (!names.insert(name).second) return Bad(where + " has two fields named '" + name + "'");
    if (!IsInt(f, "id")) return Bad(at + " has no integer id");
    if (f.contains("required") && !f["required"].is_boolean()) {
      return Bad(at + " has a 'required' that is not true or false");
    }
    if (!f.contains("type")) return Bad(at + " has no type");
    FERRY_RETURN_IF_ERROR(ids.Add(f["id"].get<int64_t>(), at));
    FERRY_RETURN_IF_ERROR(CheckType(f["type"], at, ids));
  }
  return Status::OK();
}

Result<Json> SchemaOf(const Json& request, SchemaIds& ids) {
  auto it = request.find("schema");
  if (it == request.end() || !it->is_object()) return Bad("the request has no schema object");
  Json schema = *it;
  FERRY_RETURN_IF_ERROR(CheckFields(schema.value("fields", Json()), "the schema", ids));
  if (schema.contains("identifier-field-ids")) {
    const Json& idf = schema["identifier-field-ids"];
    if (!idf.is_array()) return Bad("the schema's identifier-field-ids is not a list");
    for (const auto& id : idf) {
      if (!id.is_number_integer() || !ids.ids.count(id.get<int64_t>())) {
        return Bad("the schema's identifier-field-ids names " + id.dump() +
                   ", which is no field's id");
      }
    }
  }
  schema["type"] = "struct";
  schema["schema-id"] = 0;
  return schema;
}

Status CheckTransform(const Json& f, const std::string& where) {
  if (!f.contains("transform") || !f["transform"].is_string()) {
    return Bad(where + " has no transform");
  }
  auto t = lake::Transform::Parse(f["transform"].get<std::string>());
  if (!t.ok()) return Bad(where + ": " + t.status().message());
  return Status::OK();
}

Status CheckSource(const Json& f, const std::string& where, const SchemaIds& ids) {
  if (!IsInt(f, "source-id") || !ids.ids.count(f["source-id"].get<int64_t>())) {
    return Bad(where + " has a source-id that is no field of the schema");
  }
  return Status::OK();
}

// The spec (spec-id 0). Field ids the client gave are kept when every field has one, at least
// 1000 and unique; otherwise all are given from 1000 in order, as Java does for a new table.
Result<Json> SpecOf(const Json& request, const SchemaIds& ids, int64_t* last_partition_id) {
  Json fields = Json::array();
  auto it = request.find("partition-spec");
  if (it != request.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("fields") || !(*it)["fields"].is_array()) {
      return Bad("the partition-spec has no fields array");
    }
    fields = (*it)["fields"];
  }
  std::set<std::string> names;
  std::set<int64_t> given;
  bool keep_ids = true;
  for (const auto& f : fields) {
    if (!f.is_object()) return Bad("the partition-spec has a field that is not an object");
    const std::string where = "partition field '" + NameOf(f) + "'";
    if (!f.contains("name") || !f["name"].is_string() || NameOf(f).empty()) {
      return Bad("the partition-spec has a field without a name");
    }
    if (!names.insert(NameOf(f)).second) {
      return Bad("the partition-spec has two fields named '" + NameOf(f) + "'");
    }
    FERRY_RETURN_IF_ERROR(CheckSource(f, where, ids));
    FERRY_RETURN_IF_ERROR(CheckTransform(f, where));
    if (!IsInt(f, "field-id") || f["field-id"].get<int64_t>() < 1000 ||
        !given.insert(f["field-id"].get<int64_t>()).second) {
      keep_ids = false;
    }
  }
  int64_t last = 999;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!keep_ids) fields[i]["field-id"] = 1000 + static_cast<int64_t>(i);
    last = std::max(last, fields[i]["field-id"].get<int64_t>());
  }
  *last_partition_id = last;
  return Json{{"spec-id", 0}, {"fields", std::move(fields)}};
}

// The write order: order-id 0 (unsorted) without fields, else 1.
Result<Json> SortOrderOf(const Json& request, const SchemaIds& ids) {
  Json fields = Json::array();
  auto it = request.find("write-order");
  if (it != request.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("fields") || !(*it)["fields"].is_array()) {
      return Bad("the write-order has no fields array");
    }
    fields = (*it)["fields"];
  }
  for (const auto& f : fields) {
    if (!f.is_object()) return Bad("the write-order has a field that is not an object");
    FERRY_RETURN_IF_ERROR(CheckSource(f, "a write-order field", ids));
    FERRY_RETURN_IF_ERROR(CheckTransform(f, "a write-order field"));
    const std::string dir =
        f.value("direction", Json()).is_string() ? f["direction"].get<std::string>() : "";
    const std::string nulls =
        f.value("null-order", Json()).is_string() ? f["null-order"].get<std::string>() : "";
    if (dir != "asc" && dir != "desc") {
      return Bad("a write-order field has the direction '" + dir + "'; expected asc or desc");
    }
    if (nulls != "nulls-first" && nulls != "nulls-last") {
      return Bad("a write-order field has the null-order '" + nulls +
                 "'; expected nulls-first or nulls-last");
    }
  }
  const int64_t id = fields.empty() ? 0 : 1;
  return Json{{"order-id", id}, {"fields", std::move(fields)}};
}

Result<Json> PropertiesOf(const Json& request) {
  Json props = Json::object();
  auto it = request.find("properties");
  if (it == request.end() || it->is_null()) return props;
  if (!it->is_object()) return Bad("the request's properties are not an object");
  for (auto p = it->begin(); p != it->end(); ++p) {
    if (!p.value().is_string()) return Bad("the property '" + p.key() + "' is not a string");
    props[p.key()] = p.value();
  }
  if (props.contains("format-version")) {
    const std::string v = props["format-version"].get<std::string>();
    if (v != "2") {
      return Status::NotSupported("the table property format-version is " + v +
                                  "; this catalog keeps format version 2 tables");
    }
    props.erase("format-version");
  }
  return props;
}

Result<lake::TableMetadata> FromDoc(const Json& doc) {
  auto m = lake::TableMetadata::Parse(doc.dump(), "the new table's metadata");
  if (!m.ok()) return Bad(m.status().message());
  return m;
}

// A location as one comparable form: "file:///abs/path" or "s3://bucket/key", no trailing '/'.
std::string Normalized(const std::string& location) {
  std::string scheme = lake::SchemeOf(location);
  std::string out;
  if (scheme.empty() || scheme == "file") {
    auto path = lake::LocalPath(location);
    if (!path.ok()) return "";
    out = "file://" + *path;
  } else if (scheme == "s3a") {
    out = "s3" + location.substr(3);
  } else {
    out = location;
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

Result<lake::TableMetadata> MetadataFromCreateRequest(const Json& request,
                                                      const std::string& location,
                                                      const std::string& uuid) {
  if (!request.is_object()) return Bad("the request is not a JSON object");
  SchemaIds ids;
  FERRY_ASSIGN_OR_RETURN(Json schema, SchemaOf(request, ids));
  int64_t last_partition_id = 999;
  FERRY_ASSIGN_OR_RETURN(Json spec, SpecOf(request, ids, &last_partition_id));
  FERRY_ASSIGN_OR_RETURN(Json order, SortOrderOf(request, ids));
  FERRY_ASSIGN_OR_RETURN(Json props, PropertiesOf(request));
  const int64_t order_id = order["order-id"].get<int64_t>();
  lake::NewTableParts parts;
  parts.table_uuid = uuid;
  parts.location = location;
  parts.schemas = Json::array({std::move(schema)});
  parts.last_column_id = ids.highest;
  parts.specs = Json::array({std::move(spec)});
  parts.last_partition_id = last_partition_id;
  parts.orders = Json::array({std::move(order)});
  parts.default_order_id = order_id;
  parts.properties = std::move(props);
  parts.last_updated_ms = NowMs();
  const Json doc = lake::NewTableDocument(std::move(parts));
  return FromDoc(doc);
}

Result<lake::TableMetadata> MetadataFromCreateUpdates(const Json& updates,
                                                      const std::string& default_location,
                                                      const std::string& fallback_uuid) {
  if (!updates.is_array()) return Bad("the commit's updates are not a list");
  std::string uuid = fallback_uuid;
  for (const auto& u : updates) {
    if (u.is_object() && u.value("action", Json()) == "assign-uuid" && u.contains("uuid") &&
        u["uuid"].is_string()) {
      uuid = u["uuid"].get<std::string>();
      break;
    }
  }
  // Nothing yet: the updates add the schema, spec and sort order.
  lake::NewTableParts parts;
  parts.table_uuid = uuid;
  parts.location = default_location;
  parts.current_schema_id = -1;
  parts.last_updated_ms = NowMs();
  const Json empty = lake::NewTableDocument(std::move(parts));
  FERRY_ASSIGN_OR_RETURN(lake::TableMetadata m, FromDoc(empty));
  FERRY_RETURN_IF_ERROR(lake::ApplyUpdates(m, updates));
  Json& doc = m.mutable_doc();
  if (doc["schemas"].empty()) {
    return Bad("the create transaction adds no schema (add-schema and set-current-schema)");
  }
  if (doc.value("current-schema-id", -1) < 0) {
    doc["current-schema-id"] = doc["schemas"].front().value("schema-id", 0);
  }
  if (doc["partition-specs"].empty()) {
    doc["partition-specs"].push_back(Json{{"spec-id", 0}, {"fields", Json::array()}});
    doc["default-spec-id"] = 0;
  }
  if (doc["sort-orders"].empty()) {
    doc["sort-orders"].push_back(Json{{"order-id", 0}, {"fields", Json::array()}});
    doc["default-sort-order-id"] = 0;
  }
  return m;
}

bool LocationUnder(const std::string& location, const std::string& warehouse) {
  const std::string loc = Normalized(location);
  const std::string wh = Normalized(warehouse);
  if (loc.empty() || wh.empty()) return false;
  if (loc.compare(0, wh.size() + 1, wh + "/") != 0) return false;
  // No step out of the warehouse through "." or "..".
  const std::string rest = loc.substr(wh.size() + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t slash = rest.find('/', start);
    if (slash == std::string::npos) slash = rest.size();
    const std::string seg = rest.substr(start, slash - start);
    if (seg == "." || seg == ".." || seg.empty()) return false;
    start = slash + 1;
  }
  return true;
}

}  // namespace ferry::catalog_server
