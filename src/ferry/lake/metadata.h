// Iceberg table metadata (format v2), kept as the JSON document it is, so that fields ferry does
// not model (written by other engines) survive every rewrite. Typed accessors cover what ferry
// reads and changes. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/lake/partition.h"
#include "ferry/types/data_type.h"

namespace ferry::lake {

using Json = nlohmann::json;

Json SchemaToJson(const Schema& schema);
// A field's type in Iceberg's JSON: a string for primitives, for lists
// {"type": "list", "element-id": N, "element": "<type>", "element-required": bool}.
Json TypeToJson(const DataType& t);
Result<DataType> TypeFromJson(const Json& j, const std::string& column);
Result<Schema> SchemaFromJson(const Json& j);

// What a new table's metadata document holds (format version 2, no snapshot yet), from its
// parts as JSON whose ids the caller assigned: `schemas` (current: current_schema_id), `specs`
// (default: spec 0 when there is one), `orders` (default: default_order_id).
struct NewTableParts {
  std::string table_uuid;
  std::string location;
  Json schemas = Json::array();
  int64_t current_schema_id = 0;
  int64_t last_column_id = 0;
  Json specs = Json::array();
  int64_t last_partition_id = 999;
  Json orders = Json::array();
  int64_t default_order_id = 0;
  Json properties = Json::object();
  int64_t last_updated_ms = 0;
};
Json NewTableDocument(NewTableParts parts);

class TableMetadata {
 public:
  static Result<TableMetadata> Parse(const std::string& text, const std::string& location);
  // The same checks on a document already parsed (a REST catalog's answer); `location` names it
  // in messages.
  static Result<TableMetadata> FromJson(Json doc, const std::string& location);
  static TableMetadata NewTable(const std::string& table_uuid, const std::string& location,
                                const Schema& schema,
                                const std::map<std::string, std::string>& properties);

  std::string ToJsonText() const { return doc_.dump(2); }
  const Json& doc() const { return doc_; }
  Json& mutable_doc() { return doc_; }

  std::string location() const { return doc_.value("location", ""); }
  std::string uuid() const { return doc_.value("table-uuid", ""); }
  int64_t last_sequence_number() const { return doc_.value("last-sequence-number", int64_t{0}); }
  int64_t last_updated_ms() const { return doc_.value("last-updated-ms", int64_t{0}); }
  int32_t last_column_id() const { return doc_.value("last-column-id", 0); }
  int32_t current_schema_id() const { return doc_.value("current-schema-id", 0); }

  Result<Schema> CurrentSchema() const;
  Result<Schema> SchemaById(int32_t id) const;
  // Adds `schema` (its schema_id is assigned here) unless an equal one exists; returns its id.
  int32_t AddSchema(Schema schema);
  void SetCurrentSchema(int32_t id) { doc_["current-schema-id"] = id; }

  int32_t default_spec_id() const { return doc_.value("default-spec-id", 0); }
  Result<PartitionSpec> SpecById(int32_t id) const;
  Result<PartitionSpec> DefaultSpec() const { return SpecById(default_spec_id()); }
  // Adds `spec` unless a spec of the same layout exists; returns the id. A new spec's fields keep
  // the field ids earlier specs gave the same column and transform, others get ids above
  // last-partition-id (the spec's own ids are ignored).
  int32_t AddSpec(PartitionSpec spec);
  void SetDefaultSpec(int32_t id) { doc_["default-spec-id"] = id; }

  // The snapshot a branch points to; nullopt if the branch does not exist (or main is empty).
  std::optional<int64_t> BranchHead(const std::string& branch) const;
  const Json* FindSnapshot(int64_t snapshot_id) const;
  // Adds a snapshot (with sequence number = last + 1, assigned here) and points `branch` at it.
  void AddSnapshot(Json snapshot, const std::string& branch);
  // Points `branch` at an existing snapshot (main also updates current-snapshot-id and the log).
  void SetBranch(const std::string& branch, int64_t snapshot_id, int64_t now_ms);
  void RemoveBranch(const std::string& branch);
  std::vector<std::string> Branches() const;

  std::optional<std::string> Property(const std::string& key) const;
  void SetProperty(const std::string& key, const std::string& value);
  void RemoveProperty(const std::string& key);

  // Records the previous metadata file in metadata-log and bumps last-updated-ms (monotonic).
  void StartUpdate(const std::string& previous_location, int64_t now_ms);

 private:
  Json doc_;
};

// "<location>/metadata/00012-<uuid>.metadata.json" -> 12; -1 if the name has no version.
int64_t MetadataVersion(const std::string& metadata_location);

}  // namespace ferry::lake
