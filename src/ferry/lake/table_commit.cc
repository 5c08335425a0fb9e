#include "ferry/lake/table_commit.h"

#include <algorithm>
#include <map>
#include <set>

namespace ferry::lake {
namespace {

const Json kEmptyArray = Json::array();
const Json kEmptyObject = Json::object();

const Json& ArrayOf(const Json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_array() ? *it : kEmptyArray;
}

const Json& ObjectOf(const Json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_object() ? *it : kEmptyObject;
}

// The value of an integer field, or `fallback` when missing, null or not an integer.
int64_t IntOf(const Json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::string StringOf(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Entries of an array of objects keyed by an integer id field.
std::map<int64_t, const Json*> ById(const Json& array, const char* id_key) {
  std::map<int64_t, const Json*> out;
  for (const auto& e : array) {
    if (e.is_object()) out[IntOf(e, id_key, -1)] = &e;
  }
  return out;
}

// The highest field id anywhere in a schema's fields (nested structs, lists and maps included).
int64_t HighestId(const Json& type) {
  int64_t best = 0;
  if (type.is_object()) {
    for (const char* key : {"id", "element-id", "key-id", "value-id"}) {
      best = std::max(best, IntOf(type, key, 0));
    }
    for (const char* key : {"type", "element", "key", "value"}) {
      auto it = type.find(key);
      if (it != type.end() && it->is_object()) best = std::max(best, HighestId(*it));
    }
    for (const auto& f : ArrayOf(type, "fields")) best = std::max(best, HighestId(f));
  }
  return best;
}

// A schema, spec or sort order without its id: what makes two of them the same.
Json WithoutKey(Json j, const char* key) {
  if (j.is_object()) j.erase(key);
  return j;
}

Json SpecLayout(const Json& spec) {
  Json out = Json::array();
  for (const auto& f : ArrayOf(spec, "fields")) {
    out.push_back(
        Json{{"source-id", IntOf(f, "source-id", -1)}, {"transform", StringOf(f, "transform")}});
  }
  return out;
}

Status Malformed(const Json& update, const std::string& why) {
  return Status::InvalidArgument("the update " + update.dump() + " " + why);
}

Result<int64_t> RequiredInt(const Json& u, const char* key) {
  auto it = u.find(key);
  if (it == u.end() || !it->is_number_integer()) {
    return Malformed(u, std::string("lacks the integer '") + key + "'");
  }
  return it->get<int64_t>();
}

Result<const Json*> RequiredObject(const Json& u, const char* key) {
  auto it = u.find(key);
  if (it == u.end() || !it->is_object()) {
    return Malformed(u, std::string("lacks the object '") + key + "'");
  }
  return &*it;
}

struct ApplyState {
  int64_t last_added_schema = -1;
  int64_t last_added_spec = -1;
  int64_t last_added_order = -1;
  std::set<int64_t> added_snapshots;
};

Status AddSchema(Json& doc, const Json& u, ApplyState& st) {
  FERRY_ASSIGN_OR_RETURN(const Json* schema, RequiredObject(u, "schema"));
  if (!schema->contains("fields") || !(*schema)["fields"].is_array()) {
    return Malformed(u, "has a schema without fields");
  }
  Json& schemas = doc["schemas"];
  if (!schemas.is_array()) schemas = Json::array();
  const Json shape = WithoutKey(*schema, "schema-id");
  int64_t max_id = -1;
  for (const auto& s : schemas) {
    max_id = std::max(max_id, IntOf(s, "schema-id", -1));
    if (WithoutKey(s, "schema-id") == shape) {
      st.last_added_schema = IntOf(s, "schema-id", -1);
      return Status::OK();
    }
  }
  Json added = *schema;
  added["schema-id"] = max_id + 1;
  const int64_t last = std::max(
      {IntOf(doc, "last-column-id", 0), HighestId(*schema), IntOf(u, "last-column-id", 0)});
  schemas.push_back(std::move(added));
  doc["last-column-id"] = last;
  st.last_added_schema = max_id + 1;
  return Status::OK();
}

Status AddSpec(Json& doc, const Json& u, ApplyState& st) {
  FERRY_ASSIGN_OR_RETURN(const Json* spec, RequiredObject(u, "spec"));
  Json& specs = doc["partition-specs"];
  if (!specs.is_array()) specs = Json::array();
  const Json layout = SpecLayout(*spec);
  int64_t max_id = -1;
  int64_t last_field = IntOf(doc, "last-partition-id", 999);
  for (const auto& s : specs) {
    max_id = std::max(max_id, IntOf(s, "spec-id", -1));
    if (SpecLayout(s) == layout) {
      st.last_added_spec = IntOf(s, "spec-id", -1);
      return Status::OK();
    }
    for (const auto& f : ArrayOf(s, "fields")) {
      last_field = std::max(last_field, IntOf(f, "field-id", 0));
    }
  }
  Json added = *spec;
  added["spec-id"] = max_id + 1;
  if (!added.contains("fields") || !added["fields"].is_array()) added["fields"] = Json::array();
  for (auto& f : added["fields"]) {
    // A field without an id gets the next one; ids a writer chose are kept (its manifests use
    // them), and move last-partition-id past them.
    if (IntOf(f, "field-id", -1) < 0) f["field-id"] = ++last_field;
    last_field = std::max(last_field, IntOf(f, "field-id", 0));
  }
  specs.push_back(std::move(added));
  doc["last-partition-id"] = last_field;
  st.last_added_spec = max_id + 1;
  return Status::OK();
}

Status AddSortOrder(Json& doc, const Json& u, ApplyState& st) {
  FERRY_ASSIGN_OR_RETURN(const Json* order, RequiredObject(u, "sort-order"));
  Json& orders = doc["sort-orders"];
  if (!orders.is_array()) orders = Json::array();
  const Json shape = WithoutKey(*order, "order-id");
  int64_t max_id = 0;  // order id 0 is reserved for "unsorted"
  for (const auto& o : orders) {
    max_id = std::max(max_id, IntOf(o, "order-id", 0));
    if (WithoutKey(o, "order-id") == shape) {
      st.last_added_order = IntOf(o, "order-id", 0);
      return Status::OK();
    }
  }
  Json added = *order;
  const bool unsorted = ArrayOf(*order, "fields").empty();
  added["order-id"] = unsorted ? 0 : max_id + 1;
  orders.push_back(std::move(added));
  st.last_added_order = unsorted ? 0 : max_id + 1;
  return Status::OK();
}

// Points `name` at `ref` (an object with type, snapshot-id and optional retention settings).
Status SetRef(Json& doc, const std::string& name, Json ref, const ApplyState& st,
              const Json& update) {
  const int64_t id = IntOf(ref, "snapshot-id", -1);
  const Json* snap = nullptr;
  for (const auto& s : ArrayOf(doc, "snapshots")) {
    if (IntOf(s, "snapshot-id", -2) == id) snap = &s;
  }
  if (snap == nullptr) {
    return Malformed(
        update, "points at snapshot " + std::to_string(id) + ", which the table does not have");
  }
  const std::string type = StringOf(ref, "type");
  if (type != "branch" && type != "tag")
    return Malformed(update, "has a type other than branch or tag");
  if (name == "main" && type != "branch") return Malformed(update, "makes main a tag");
  Json& refs = doc["refs"];
  if (!refs.is_object()) refs = Json::object();
  const bool moved = !refs.contains(name) || IntOf(refs[name], "snapshot-id", -1) != id;
  refs[name] = std::move(ref);
  if (name == "main" && moved) {
    doc["current-snapshot-id"] = id;
    // A snapshot added by this commit enters the log at its own time; an older one made current
    // (a published branch, a rollback) at the commit's.
    const int64_t ts = st.added_snapshots.count(id) ? IntOf(*snap, "timestamp-ms", 0)
                                                    : IntOf(doc, "last-updated-ms", 0);
    if (!doc.contains("snapshot-log") || !doc["snapshot-log"].is_array()) {
      doc["snapshot-log"] = Json::array();
    }
    doc["snapshot-log"].push_back(Json{{"timestamp-ms", ts}, {"snapshot-id", id}});
  }
  return Status::OK();
}

Status RemoveSnapshots(Json& doc, const Json& u) {
  auto it = u.find("snapshot-ids");
  if (it == u.end() || !it->is_array()) return Malformed(u, "lacks the array 'snapshot-ids'");
  std::set<int64_t> gone;
  for (const auto& id : *it) {
    if (!id.is_number_integer()) return Malformed(u, "has a snapshot id that is not an integer");
    gone.insert(id.get<int64_t>());
  }
  Json kept = Json::array();
  for (auto& s : doc["snapshots"]) {
    if (!gone.count(IntOf(s, "snapshot-id", -1))) kept.push_back(std::move(s));
  }
  doc["snapshots"] = std::move(kept);
  // Refs to a removed snapshot go with it.
  Json& refs = doc["refs"];
  if (refs.is_object()) {
    std::vector<std::string> dropped;
    for (auto r = refs.begin(); r != refs.end(); ++r) {
      if (gone.count(IntOf(r.value(), "snapshot-id", -1))) dropped.push_back(r.key());
    }
    for (const auto& name : dropped) {
      refs.erase(name);
      if (name == "main") doc["current-snapshot-id"] = -1;
    }
  }
  // snapshot-log: an entry of a removed snapshot removes the history before it too, so that what
  // is left is a valid history.
  Json log = Json::array();
  for (const auto& entry : ArrayOf(doc, "snapshot-log")) {
    if (gone.count(IntOf(entry, "snapshot-id", -1))) {
      log = Json::array();
    } else {
      log.push_back(entry);
    }
  }
  doc["snapshot-log"] = std::move(log);
  for (const char* key : {"statistics", "partition-statistics"}) {
    if (!doc.contains(key) || !doc[key].is_array()) continue;
    Json left = Json::array();
    for (const auto& s : doc[key]) {
      if (!gone.count(IntOf(s, "snapshot-id", -1))) left.push_back(s);
    }
    doc[key] = std::move(left);
  }
  return Status::OK();
}

// Replaces the entry of `list` (statistics, partition-statistics) for the snapshot of `entry`.
void SetStatistics(Json& doc, const char* list, Json entry) {
  Json& arr = doc[list];
  if (!arr.is_array()) arr = Json::array();
  const int64_t id = IntOf(entry, "snapshot-id", -1);
  Json left = Json::array();
  for (auto& e : arr) {
    if (IntOf(e, "snapshot-id", -2) != id) left.push_back(std::move(e));
  }
  left.push_back(std::move(entry));
  arr = std::move(left);
}

void RemoveStatistics(Json& doc, const char* list, int64_t snapshot_id) {
  if (!doc.contains(list) || !doc[list].is_array()) return;
  Json left = Json::array();
  for (auto& e : doc[list]) {
    if (IntOf(e, "snapshot-id", -2) != snapshot_id) left.push_back(std::move(e));
  }
  doc[list] = std::move(left);
}

// Removes the entries of `list` whose `id_key` is among `ids`, except the one in use.
Status RemoveByIds(Json& doc, const Json& u, const char* ids_key, const char* list,
                   const char* id_key, int64_t in_use) {
  auto it = u.find(ids_key);
  if (it == u.end() || !it->is_array()) {
    return Malformed(u, std::string("lacks the array '") + ids_key + "'");
  }
  std::set<int64_t> gone;
  for (const auto& id : *it) {
    if (!id.is_number_integer()) return Malformed(u, "has an id that is not an integer");
    if (id.get<int64_t>() == in_use) return Malformed(u, "removes the one in use");
    gone.insert(id.get<int64_t>());
  }
  Json left = Json::array();
  for (auto& e : doc[list]) {
    if (!gone.count(IntOf(e, id_key, -1))) left.push_back(std::move(e));
  }
  doc[list] = std::move(left);
  return Status::OK();
}

Status ApplyOne(Json& doc, const Json& u, ApplyState& st) {
  if (!u.is_object()) return Status::InvalidArgument("an update is not a JSON object: " + u.dump());
  const std::string action = StringOf(u, "action");
  if (action == "assign-uuid") {
    const std::string uuid = StringOf(u, "uuid");
    if (uuid.empty()) return Malformed(u, "lacks 'uuid'");
    if (uuid != StringOf(doc, "table-uuid")) {
      return Malformed(u, "would change the uuid of an existing table");
    }
    return Status::OK();
  }
  if (action == "upgrade-format-version") {
    FERRY_ASSIGN_OR_RETURN(int64_t v, RequiredInt(u, "format-version"));
    if (v == IntOf(doc, "format-version", 0)) return Status::OK();
    return Status::NotSupported("format-version " + std::to_string(v) +
                                " is not served here: this catalog keeps format version 2 tables");
  }
  if (action == "add-schema") return AddSchema(doc, u, st);
  if (action == "set-current-schema") {
    FERRY_ASSIGN_OR_RETURN(int64_t id, RequiredInt(u, "schema-id"));
    if (id == -1) {
      if (st.last_added_schema < 0)
        return Malformed(u, "says -1 (the last added) after no add-schema");
      id = st.last_added_schema;
    }
    if (!ById(ArrayOf(doc, "schemas"), "schema-id").count(id)) {
      return Malformed(u, "names a schema the table does not have");
    }
    doc["current-schema-id"] = id;
    return Status::OK();
  }
  if (action == "add-spec") return AddSpec(doc, u, st);
  if (action == "set-default-spec") {
    FERRY_ASSIGN_OR_RETURN(int64_t id, RequiredInt(u, "spec-id"));
    if (id == -1) {
      if (st.last_added_spec < 0) return Malformed(u, "says -1 (the last added) after no add-spec");
      id = st.last_added_spec;
    }
    if (!ById(ArrayOf(doc, "partition-specs"), "spec-id").count(id)) {
      return Malformed(u, "names a partition spec the table does not have");
    }
    doc["default-spec-id"] = id;
    return Status::OK();
  }
  if (action == "add-sort-order") return AddSortOrder(doc, u, st);
  if (action == "set-default-sort-order") {
    FERRY_ASSIGN_OR_RETURN(int64_t id, RequiredInt(u, "sort-order-id"));
    if (id == -1) {
      if (st.last_added_order < 0) {
        return Malformed(u, "says -1 (the last added) after no add-sort-order");
      }
      id = st.last_added_order;
    }
    if (!ById(ArrayOf(doc, "sort-orders"), "order-id").count(id)) {
      return Malformed(u, "names a sort order the table does not have");
    }
    doc["default-sort-order-id"] = id;
    return Status::OK();
  }
  if (action == "add-snapshot") {
    FERRY_ASSIGN_OR_RETURN(const Json* snapshot, RequiredObject(u, "snapshot"));
    Json snap = *snapshot;
    for (const char* key : {"snapshot-id", "timestamp-ms"}) {
      if (!snap.contains(key) || !snap[key].is_number_integer()) {
        return Malformed(u, std::string("has a snapshot without '") + key + "'");
      }
    }
    if (!snap.contains("manifest-list") || !snap["manifest-list"].is_string()) {
      return Malformed(u, "has a snapshot without 'manifest-list'");
    }
    const int64_t id = snap["snapshot-id"].get<int64_t>();
    if (ById(ArrayOf(doc, "snapshots"), "snapshot-id").count(id)) {
      return Malformed(u, "adds snapshot " + std::to_string(id) + ", which the table has already");
    }
    const int64_t last = IntOf(doc, "last-sequence-number", 0);
    int64_t seq = IntOf(snap, "sequence-number", -1);
    if (seq < 0) {
      seq = last + 1;
      snap["sequence-number"] = seq;
    } else if (seq <= last) {
      return Status::CommitFailed("snapshot " + std::to_string(id) + " has sequence number " +
                                  std::to_string(seq) + ", not above the table's last (" +
                                  std::to_string(last) +
                                  "): another writer committed first; write it again");
    }
    doc["last-sequence-number"] = seq;
    if (!doc.contains("snapshots") || !doc["snapshots"].is_array())
      doc["snapshots"] = Json::array();
    doc["snapshots"].push_back(std::move(snap));
    st.added_snapshots.insert(id);
    return Status::OK();
  }
  if (action == "set-snapshot-ref") {
    const std::string name = StringOf(u, "ref-name");
    if (name.empty()) return Malformed(u, "lacks 'ref-name'");
    if (!u.contains("snapshot-id") || !u["snapshot-id"].is_number_integer()) {
      return Malformed(u, "lacks the integer 'snapshot-id'");
    }
    Json ref = u;
    ref.erase("action");
    ref.erase("ref-name");
    return SetRef(doc, name, std::move(ref), st, u);
  }
  if (action == "remove-snapshot-ref") {
    const std::string name = StringOf(u, "ref-name");
    if (name.empty()) return Malformed(u, "lacks 'ref-name'");
    if (doc.contains("refs") && doc["refs"].is_object()) doc["refs"].erase(name);
    if (name == "main") doc["current-snapshot-id"] = -1;
    return Status::OK();
  }
  if (action == "remove-snapshots") return RemoveSnapshots(doc, u);
  if (action == "set-location") {
    const std::string loc = StringOf(u, "location");
    if (loc.empty()) return Malformed(u, "lacks 'location'");
    doc["location"] = loc;
    return Status::OK();
  }
  if (action == "set-properties") {
    FERRY_ASSIGN_OR_RETURN(const Json* updates, RequiredObject(u, "updates"));
    Json& props = doc["properties"];
    if (!props.is_object()) props = Json::object();
    for (auto it = updates->begin(); it != updates->end(); ++it) {
      if (!it.value().is_string()) return Malformed(u, "sets '" + it.key() + "' to a non-string");
      props[it.key()] = it.value();
    }
    return Status::OK();
  }
  if (action == "remove-properties") {
    auto it = u.find("removals");
    if (it == u.end() || !it->is_array()) return Malformed(u, "lacks the array 'removals'");
    for (const auto& k : *it) {
      if (!k.is_string()) return Malformed(u, "has a key that is not a string");
      if (doc.contains("properties") && doc["properties"].is_object()) {
        doc["properties"].erase(k.get<std::string>());
      }
    }
    return Status::OK();
  }
  if (action == "set-statistics") {
    FERRY_ASSIGN_OR_RETURN(const Json* stats, RequiredObject(u, "statistics"));
    SetStatistics(doc, "statistics", *stats);
    return Status::OK();
  }
  if (action == "remove-statistics" || action == "remove-partition-statistics") {
    FERRY_ASSIGN_OR_RETURN(int64_t id, RequiredInt(u, "snapshot-id"));
    RemoveStatistics(doc, action == "remove-statistics" ? "statistics" : "partition-statistics",
                     id);
    return Status::OK();
  }
  if (action == "set-partition-statistics") {
    FERRY_ASSIGN_OR_RETURN(const Json* stats, RequiredObject(u, "partition-statistics"));
    SetStatistics(doc, "partition-statistics", *stats);
    return Status::OK();
  }
  if (action == "remove-partition-specs") {
    return RemoveByIds(doc, u, "spec-ids", "partition-specs", "spec-id",
                       IntOf(doc, "default-spec-id", 0));
  }
  if (action == "remove-schemas") {
    return RemoveByIds(doc, u, "schema-ids", "schemas", "schema-id",
                       IntOf(doc, "current-schema-id", 0));
  }
  if (action == "add-encryption-key" || action == "remove-encryption-key") {
    return Status::NotSupported("the update " + action +
                                " is not served here: this catalog keeps no encryption keys");
  }
  if (action.empty()) return Malformed(u, "has no 'action'");
  return Status::InvalidArgument("the update action '" + action + "' is unknown");
}

// The fields a commit may change and the protocol can express: compared after applying a
// described commit to its base.
constexpr const char* kComparedFields[] = {"format-version",
                                           "table-uuid",
                                           "location",
                                           "last-sequence-number",
                                           "last-column-id",
                                           "schemas",
                                           "current-schema-id",
                                           "partition-specs",
                                           "default-spec-id",
                                           "last-partition-id",
                                           "sort-orders",
                                           "default-sort-order-id",
                                           "properties",
                                           "current-snapshot-id",
                                           "refs",
                                           "snapshots",
                                           "statistics",
                                           "partition-statistics"};

Json Field(const Json& doc, const char* key) {
  auto it = doc.find(key);
  return it == doc.end() ? Json() : *it;
}

}  // namespace

std::string DescribeRequirement(const Json& r) {
  std::string type = StringOf(r, "type");
  if (type == "assert-ref-snapshot-id") return type + " " + StringOf(r, "ref");
  return type;
}

Status CheckRequirements(const Json& requirements, const TableMetadata* current) {
  if (!requirements.is_array()) return Status::InvalidArgument("requirements are not a list");
  for (const auto& r : requirements) {
    if (!r.is_object()) return Status::InvalidArgument("a requirement is not an object");
    const std::string type = StringOf(r, "type");
    if (type == "assert-create") {
      if (current != nullptr)
        return Status::CommitFailed("the table exists already (assert-create)");
      continue;
    }
    if (current == nullptr) {
      return Status::CommitFailed("the table does not exist (" + DescribeRequirement(r) + ")");
    }
    const Json& doc = current->doc();
    auto expect_int = [&](const char* req_key, const char* doc_key, int64_t fallback) -> Status {
      auto it = r.find(req_key);
      if (it == r.end() || !it->is_number_integer()) {
        return Status::InvalidArgument("the requirement " + r.dump() + " lacks the integer '" +
                                       req_key + "'");
      }
      const int64_t have = IntOf(doc, doc_key, fallback);
      if (have != it->get<int64_t>()) {
        return Status::CommitFailed("requirement " + type + " failed: the table's " + doc_key +
                                    " is " + std::to_string(have) + ", not " +
                                    std::to_string(it->get<int64_t>()));
      }
      return Status::OK();
    };
    if (type == "assert-table-uuid") {
      const std::string want = StringOf(r, "uuid");
      if (want != current->uuid()) {
        return Status::CommitFailed("requirement assert-table-uuid failed: the table's uuid is " +
                                    current->uuid() + ", not " + want +
                                    " (the table was dropped and created again)");
      }
    } else if (type == "assert-ref-snapshot-id") {
      const std::string ref = StringOf(r, "ref");
      if (ref.empty()) return Status::InvalidArgument("assert-ref-snapshot-id without 'ref'");
      auto it = r.find("snapshot-id");
      if (it == r.end() || !(it->is_null() || it->is_number_integer())) {
        return Status::InvalidArgument("assert-ref-snapshot-id without 'snapshot-id'");
      }
      const Json& refs = ObjectOf(doc, "refs");
      std::optional<int64_t> have;
      if (refs.contains(ref)) have = IntOf(refs[ref], "snapshot-id", -1);
      if (it->is_null()) {
        if (have) {
          return Status::CommitFailed("requirement assert-ref-snapshot-id failed: branch or tag " +
                                      ref + " was created by another writer (snapshot " +
                                      std::to_string(*have) + ")");
        }
      } else if (!have || *have != it->get<int64_t>()) {
        return Status::CommitFailed(
            "requirement assert-ref-snapshot-id failed: " + ref + " is at " +
            (have ? "snapshot " + std::to_string(*have) : std::string("no snapshot")) + ", not " +
            std::to_string(it->get<int64_t>()) + " (another writer committed first)");
      }
    } else if (type == "assert-last-assigned-field-id") {
      FERRY_RETURN_IF_ERROR(expect_int("last-assigned-field-id", "last-column-id", 0));
    } else if (type == "assert-current-schema-id") {
      FERRY_RETURN_IF_ERROR(expect_int("current-schema-id", "current-schema-id", 0));
    } else if (type == "assert-last-assigned-partition-id") {
      FERRY_RETURN_IF_ERROR(expect_int("last-assigned-partition-id", "last-partition-id", 999));
    } else if (type == "assert-default-spec-id") {
      FERRY_RETURN_IF_ERROR(expect_int("default-spec-id", "default-spec-id", 0));
    } else if (type == "assert-default-sort-order-id") {
      FERRY_RETURN_IF_ERROR(expect_int("default-sort-order-id", "default-sort-order-id", 0));
    } else {
      return Status::InvalidArgument("the requirement type '" + type + "' is unknown");
    }
  }
  return Status::OK();
}

Status ApplyUpdates(TableMetadata& metadata, const Json& updates) {
  if (!updates.is_array()) return Status::InvalidArgument("updates are not a list");
  ApplyState st;
  Json& doc = metadata.mutable_doc();
  for (const auto& u : updates) FERRY_RETURN_IF_ERROR(ApplyOne(doc, u, st));
  return Status::OK();
}

Result<TableCommit> DescribeCommit(const TableIdent& ident, const TableMetadata& base,
                                   const TableMetadata& next) {
  const Json& b = base.doc();
  const Json& n = next.doc();
  TableCommit c;
  c.ident = ident;
  Json& req = c.requirements;
  Json& up = c.updates;
  req.push_back(Json{{"type", "assert-table-uuid"}, {"uuid", base.uuid()}});
  if (IntOf(b, "format-version", 0) != IntOf(n, "format-version", 0)) {
    up.push_back(Json{{"action", "upgrade-format-version"},
                      {"format-version", IntOf(n, "format-version", 0)}});
  }

  // Schemas, specs and sort orders: the new ones, the one made current last so that "-1" (the
  // last added) names it.
  auto add_new = [&](const char* list, const char* id_key, const char* current_key,
                     const char* action, const char* payload) -> std::vector<int64_t> {
    const auto old_ids = ById(ArrayOf(b, list), id_key);
    const int64_t current = IntOf(n, current_key, -1);
    std::vector<int64_t> added;
    const Json* current_new = nullptr;
    for (const auto& e : ArrayOf(n, list)) {
      const int64_t id = IntOf(e, id_key, -1);
      if (old_ids.count(id)) continue;
      if (id == current) {
        current_new = &e;
        continue;
      }
      up.push_back(Json{{"action", action}, {payload, e}});
      added.push_back(id);
    }
    if (current_new != nullptr) {
      up.push_back(Json{{"action", action}, {payload, *current_new}});
      added.push_back(current);
    }
    return added;
  };
  auto set_current = [&](const std::vector<int64_t>& added, const char* current_key,
                         const char* action, const char* payload_key) {
    const int64_t now = IntOf(n, current_key, -1);
    if (now == IntOf(b, current_key, -1)) return;
    const bool is_new = !added.empty() && added.back() == now;
    up.push_back(Json{{"action", action}, {payload_key, is_new ? -1 : now}});
  };
  const auto schemas = add_new("schemas", "schema-id", "current-schema-id", "add-schema", "schema");
  if (!schemas.empty()) {
    req.push_back(Json{{"type", "assert-last-assigned-field-id"},
                       {"last-assigned-field-id", IntOf(b, "last-column-id", 0)}});
  }
  if (IntOf(n, "current-schema-id", -1) != IntOf(b, "current-schema-id", -1)) {
    req.push_back(Json{{"type", "assert-current-schema-id"},
                       {"current-schema-id", IntOf(b, "current-schema-id", 0)}});
  }
  set_current(schemas, "current-schema-id", "set-current-schema", "schema-id");
  const auto specs = add_new("partition-specs", "spec-id", "default-spec-id", "add-spec", "spec");
  if (!specs.empty()) {
    req.push_back(Json{{"type", "assert-last-assigned-partition-id"},
                       {"last-assigned-partition-id", IntOf(b, "last-partition-id", 999)}});
  }
  if (IntOf(n, "default-spec-id", -1) != IntOf(b, "default-spec-id", -1)) {
    req.push_back(Json{{"type", "assert-default-spec-id"},
                       {"default-spec-id", IntOf(b, "default-spec-id", 0)}});
  }
  set_current(specs, "default-spec-id", "set-default-spec", "spec-id");
  const auto orders =
      add_new("sort-orders", "order-id", "default-sort-order-id", "add-sort-order", "sort-order");
  if (IntOf(n, "default-sort-order-id", -1) != IntOf(b, "default-sort-order-id", -1)) {
    req.push_back(Json{{"type", "assert-default-sort-order-id"},
                       {"default-sort-order-id", IntOf(b, "default-sort-order-id", 0)}});
  }
  set_current(orders, "default-sort-order-id", "set-default-sort-order", "sort-order-id");

  // Snapshots added, refs moved or removed, snapshots removed.
  const auto old_snaps = ById(ArrayOf(b, "snapshots"), "snapshot-id");
  const auto new_snaps = ById(ArrayOf(n, "snapshots"), "snapshot-id");
  for (const auto& s : ArrayOf(n, "snapshots")) {
    if (!old_snaps.count(IntOf(s, "snapshot-id", -1))) {
      up.push_back(Json{{"action", "add-snapshot"}, {"snapshot", s}});
    }
  }
  const Json& old_refs = ObjectOf(b, "refs");
  const Json& new_refs = ObjectOf(n, "refs");
  std::set<std::string> asserted;
  auto assert_ref = [&](const std::string& name) {
    if (!asserted.insert(name).second) return;
    Json r{{"type", "assert-ref-snapshot-id"}, {"ref", name}, {"snapshot-id", nullptr}};
    if (old_refs.contains(name)) r["snapshot-id"] = IntOf(old_refs[name], "snapshot-id", -1);
    req.push_back(std::move(r));
  };
  // Every ref as the base had it: the commit was built on that state (a marker was checked
  // against it), as the SQL catalog's compare-and-swap of the whole metadata file demands.
  assert_ref("main");
  for (auto it = old_refs.begin(); it != old_refs.end(); ++it) assert_ref(it.key());
  std::set<int64_t> removed_snaps;
  for (const auto& [id, s] : old_snaps) {
    if (!new_snaps.count(id)) removed_snaps.insert(id);
  }
  for (auto it = old_refs.begin(); it != old_refs.end(); ++it) {
    // A ref to a removed snapshot goes with it (remove-snapshots); others are removed by name.
    if (!new_refs.contains(it.key()) &&
        !removed_snaps.count(IntOf(it.value(), "snapshot-id", -1))) {
      up.push_back(Json{{"action", "remove-snapshot-ref"}, {"ref-name", it.key()}});
    }
  }
  for (auto it = new_refs.begin(); it != new_refs.end(); ++it) {
    if (old_refs.contains(it.key()) && old_refs[it.key()] == it.value()) continue;
    assert_ref(it.key());
    Json u = it.value();
    u["action"] = "set-snapshot-ref";
    u["ref-name"] = it.key();
    up.push_back(std::move(u));
  }
  if (!removed_snaps.empty()) {
    up.push_back(Json{
        {"action", "remove-snapshots"},
        {"snapshot-ids", Json(std::vector<int64_t>(removed_snaps.begin(), removed_snaps.end()))}});
  }

  // Properties and location.
  const Json& old_props = ObjectOf(b, "properties");
  const Json& new_props = ObjectOf(n, "properties");
  Json set = Json::object();
  Json removed = Json::array();
  for (auto it = new_props.begin(); it != new_props.end(); ++it) {
    if (!old_props.contains(it.key()) || old_props[it.key()] != it.value()) {
      set[it.key()] = it.value();
    }
  }
  for (auto it = old_props.begin(); it != old_props.end(); ++it) {
    if (!new_props.contains(it.key())) removed.push_back(it.key());
  }
  if (!set.empty()) up.push_back(Json{{"action", "set-properties"}, {"updates", set}});
  if (!removed.empty()) up.push_back(Json{{"action", "remove-properties"}, {"removals", removed}});
  if (StringOf(b, "location") != StringOf(n, "location")) {
    up.push_back(Json{{"action", "set-location"}, {"location", StringOf(n, "location")}});
  }

  // The commit, applied to the base, must give `next`.
  TableMetadata check = base;
  check.mutable_doc()["last-updated-ms"] = next.last_updated_ms();
  Status applied = ApplyUpdates(check, up);
  if (!applied.ok()) {
    return Status::Internal(
        "the commit to " + ident.ToString() +
        " does not apply to the metadata it was built from: " + applied.message());
  }
  for (const char* key : kComparedFields) {
    if (Field(check.doc(), key) != Field(n, key)) {
      return Status::Internal("the commit to " + ident.ToString() + " changes '" + key +
                              "' in a way the catalog protocol cannot express");
    }
  }
  return c;
}

bool UpdatesVisible(const TableMetadata& current, const Json& updates) {
  const Json& doc = current.doc();
  const auto snaps = ById(ArrayOf(doc, "snapshots"), "snapshot-id");
  const Json& refs = ObjectOf(doc, "refs");
  const Json& props = ObjectOf(doc, "properties");
  // A snapshot id is the commit's own (random, 63 bits): present means applied, whatever other
  // writers have done to the refs and properties since.
  bool adds = false;
  for (const auto& u : updates) {
    if (StringOf(u, "action") != "add-snapshot") continue;
    adds = true;
    if (!snaps.count(IntOf(u["snapshot"], "snapshot-id", -1))) return false;
  }
  if (adds) return true;
  for (const auto& u : updates) {
    const std::string action = StringOf(u, "action");
    if (action == "set-snapshot-ref") {
      const std::string name = StringOf(u, "ref-name");
      if (!refs.contains(name) ||
          IntOf(refs[name], "snapshot-id", -1) != IntOf(u, "snapshot-id", -2)) {
        return false;
      }
    } else if (action == "remove-snapshot-ref") {
      if (refs.contains(StringOf(u, "ref-name"))) return false;
    } else if (action == "remove-snapshots") {
      for (const auto& id : ArrayOf(u, "snapshot-ids")) {
        if (id.is_number_integer() && snaps.count(id.get<int64_t>())) return false;
      }
    } else if (action == "set-properties") {
      const Json& set = ObjectOf(u, "updates");
      for (auto it = set.begin(); it != set.end(); ++it) {
        if (!props.contains(it.key()) || props[it.key()] != it.value()) return false;
      }
    } else if (action == "remove-properties") {
      for (const auto& k : ArrayOf(u, "removals")) {
        if (k.is_string() && props.contains(k.get<std::string>())) return false;
      }
    }
  }
  return true;
}

}  // namespace ferry::lake
