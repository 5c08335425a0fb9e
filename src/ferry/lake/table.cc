#include "ferry/lake/table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <thread>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/base/uuid.h"
#include "ferry/lake/table_commit.h"
#include "ferry/types/type_change.h"

namespace ferry::lake {
namespace {

int64_t SummaryLong(const Json* snapshot, const char* key) {
  if (snapshot == nullptr || !(*snapshot).contains("summary")) return 0;
  const Json& s = (*snapshot)["summary"];
  if (!s.contains(key) || !s[key].is_string()) return 0;
  return std::strtoll(s[key].get<std::string>().c_str(), nullptr, 10);
}

}  // namespace

Result<std::unique_ptr<Table>> Table::Load(Catalog* catalog, std::shared_ptr<FileIO> io,
                                           const TableIdent& ident) {
  std::unique_ptr<Table> t(new Table(catalog, std::move(io), ident));
  FERRY_RETURN_IF_ERROR(t->Refresh());
  return t;
}

Result<std::unique_ptr<Table>> Table::LoadOrCreate(
    Catalog* catalog, std::shared_ptr<FileIO> io, const TableIdent& ident,
    const std::string& location, const Schema& schema,
    const std::map<std::string, std::string>& properties) {
  FERRY_ASSIGN_OR_RETURN(auto existing, catalog->LoadTable(ident));
  std::unique_ptr<Table> t(new Table(catalog, std::move(io), ident));
  if (existing) {
    t->Adopt(std::move(*existing));
    return t;
  }
  FERRY_RETURN_IF_ERROR(catalog->CreateNamespace(ident.ns));
  auto created =
      catalog->CreateTable(ident, TableMetadata::NewTable(NewUuid(), location, schema, properties));
  if (created.ok()) {
    t->Adopt(std::move(*created));
    return t;
  }
  // Another writer created it first: use theirs.
  if (created.status().code() != StatusCode::kAlreadyExists) return created.status();
  FERRY_RETURN_IF_ERROR(t->Refresh());
  return t;
}

void Table::Adopt(LoadedTable loaded) {
  meta_ = std::move(loaded.metadata);
  location_ = std::move(loaded.metadata_location);
  config_ = std::move(loaded.config);
}

Status Table::Refresh() {
  FERRY_ASSIGN_OR_RETURN(auto loaded, catalog_->LoadTable(ident_));
  if (!loaded) {
    return Status::NotFound("table " + ident_.ToString() + " does not exist in " +
                            catalog_->Describe());
  }
  Adopt(std::move(*loaded));
  return Status::OK();
}

Result<Schema> Table::AssignFieldIds(const Schema& source, bool replacing) const {
  Schema out = source;
  auto current = meta_.CurrentSchema();
  const bool has_data = meta_.BranchHead("main").has_value();
  int32_t next_id = meta_.last_column_id();
  std::vector<int32_t> key_ids;
  std::vector<std::string> key_names;
  for (int32_t id : source.identifier_field_ids) {
    if (const Field* f = source.FindById(id)) key_names.push_back(f->name);
  }
  for (auto& f : out.fields) {
    const Field* old = current.ok() ? current->FindByName(f.name) : nullptr;
    if (old != nullptr && f.type.is_list() && old->type.is_list() &&
        (old->type.list().type == f.type.list().type ||
         IsWidening(old->type.list().type, f.type.list().type))) {
      // A list keeps its field id and its element's; the element widens as a column does.
      f.id = old->id;
      if (!replacing && !old->required) f.required = false;
      bool element_required = f.type.list().required;
      if (!replacing && !old->type.list().required) element_required = false;
      f.type = DataType::List(f.type.list().type, element_required, old->type.list().id);
    } else if (old != nullptr && !f.type.is_list() && !old->type.is_list() &&
               (old->type == f.type || IsWidening(old->type, f.type))) {
      f.id = old->id;
      // A column that was optional stays optional: older rows may hold NULLs.
      if (!replacing && !old->required) f.required = false;
    } else if (old != nullptr && !replacing && has_data) {
      return Status::InvalidArgument(
          "column " + f.name + " of table " + ident_.ToString() + " is " + old->type.ToIceberg() +
          " in the table and " + f.type.ToIceberg() +
          " in the source; Iceberg can only widen int to long, float to double and a decimal's "
          "precision (also as a list's element). Run a full refresh of the stream to rebuild the "
          "table with the new type");
    } else {
      f.id = ++next_id;
      if (f.type.is_list()) f.type = f.type.WithElementId(++next_id);
      if (!replacing && has_data) f.required = false;  // older rows have no value
    }
  }
  if (!replacing && has_data && current.ok()) {
    for (const auto& old : current->fields) {
      if (out.FindByName(old.name) == nullptr) {
        return Status::InvalidArgument(
            "column " + old.name + " of table " + ident_.ToString() +
            " is no longer in the source; ferry does not drop columns from a table it updates. "
            "Run a full refresh of the stream to rebuild the table without it");
      }
    }
  }
  for (const auto& name : key_names) key_ids.push_back(out.FindByName(name)->id);
  out.identifier_field_ids = key_ids;
  out.schema_id = 0;
  return out;
}

std::string Table::NewDataFileUri(const std::string& prefix) const {
  return meta_.location() + "/data/" + prefix + "-" + NewUuid() + ".parquet";
}

Result<CommitOutcome> Table::Commit(
    const LandedCheck& already_landed,
    const std::function<Status(TableMetadata&, int attempt)>& mutate,
    std::optional<int64_t>* snapshot_id) {
  CommitOutcome out;
  int64_t backoff = retry_.min_backoff_ms;
  std::minstd_rand jitter(static_cast<uint32_t>(NewPositiveId()));
  // Every commit sent. One whose outcome never came back may still land (the update may be in
  // flight on the catalog's server); even one refused may have been applied by a copy of the
  // request a proxy or HTTP library sent again. So every later read of the table first looks
  // for their effects: files a landed commit references must never be taken for another's.
  std::vector<Json> sent;
  auto landed_earlier = [&]() -> bool {
    for (const auto& updates : sent) {
      if (UpdatesVisible(meta_, updates)) {
        FERRY_LOG(kInfo) << "commit to " << ident_.ToString()
                         << " with an unknown outcome did land (" << location_ << ")";
        out.metadata_location = location_;
        out.snapshot_id = *snapshot_id;
        return true;
      }
    }
    return false;
  };
  for (int attempt = 1;; ++attempt) {
    out.attempts = attempt;
    FERRY_RETURN_IF_ERROR(Refresh());
    if (landed_earlier()) return out;
    if (already_landed && already_landed(meta_)) {
      out.already_landed = true;
      out.metadata_location = location_;
      return out;
    }
    TableMetadata next = meta_;
    next.StartUpdate(location_, NowMs());
    FERRY_RETURN_IF_ERROR(mutate(next, attempt));
    FERRY_ASSIGN_OR_RETURN(TableCommit commit, DescribeCommit(ident_, meta_, next));
    auto committed = catalog_->CommitTable(commit);
    if (committed.ok()) {
      Adopt(std::move(*committed));
      out.metadata_location = location_;
      out.snapshot_id = *snapshot_id;
      return out;
    }
    const Status& s = committed.status();
    if (s.code() == StatusCode::kCommitStateUnknown) {
      // Never retry blindly: re-read the table; the commit's effects (its snapshot, its refs) or
      // the marker say whether the update landed.
      ++out.unknown_outcomes;
      sent.push_back(commit.updates);
      FERRY_LOG(kWarn) << "commit to " << ident_.ToString()
                       << " has an unknown outcome; re-reading the table: " << s.message();
      Status r = Refresh();
      if (!r.ok()) {
        return s.WithContext("committing to table " + ident_.ToString() +
                             " (re-reading the table failed too: " + r.message() +
                             "); the next run decides from the marker");
      }
      if (landed_earlier()) return out;
      if (already_landed && already_landed(meta_)) {
        out.already_landed = true;
        out.metadata_location = location_;
        return out;
      }
      // Not landed (yet). Another attempt is safe: its requirements hold only for the metadata
      // just read, so at most one of it and the lost update can ever apply, and a lost update
      // that applies first makes this attempt fail and the next read find it.
      if (attempt >= retry_.max_attempts) {
        return s.WithContext("committing to table " + ident_.ToString() + " after " +
                             std::to_string(attempt) + " attempt(s)");
      }
      continue;
    }
    if (s.code() != StatusCode::kCommitFailed || attempt >= retry_.max_attempts) {
      return s.WithContext("committing to table " + ident_.ToString() + " after " +
                           std::to_string(attempt) + " attempt(s)");
    }
    sent.push_back(commit.updates);
    ++out.lost_races;
    FERRY_LOG(kDebug) << "commit conflict on " << ident_.ToString() << ", retrying in " << backoff
                      << " ms: " << s.message();
    // Jitter keeps writers that collided from colliding again in step.
    std::uniform_int_distribution<int64_t> pause(backoff / 2, backoff);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause(jitter)));
    backoff = std::min(backoff * 2, retry_.max_backoff_ms);
  }
}

Status Table::AddSnapshotOnBranch(TableMetadata& next, const std::string& branch,
                                  int64_t snapshot_id, int attempt, int32_t schema_id,
                                  const SnapshotChange& change) {
  std::optional<int64_t> parent = next.BranchHead(branch);
  const Json* parent_snap = parent ? next.FindSnapshot(*parent) : nullptr;
  std::vector<ManifestFile> manifests = change.new_manifests;
  if (parent_snap != nullptr && change.keep_parent_manifests) {
    FERRY_ASSIGN_OR_RETURN(auto old, ReadManifestList(*io_, (*parent_snap)["manifest-list"]));
    manifests.insert(manifests.end(), old.begin(), old.end());
  }
  int64_t seq = next.last_sequence_number() + 1;
  std::string list_uri = next.location() + "/metadata/snap-" + std::to_string(snapshot_id) + "-" +
                         std::to_string(attempt) + "-" + NewUuid() + ".avro";
  FERRY_RETURN_IF_ERROR(
      WriteManifestList(*io_, list_uri, snapshot_id, parent, seq, manifests).status());

  // Totals continue the parent's, or restart from zero when the snapshot replaces everything.
  const Json* base = change.keep_parent_manifests ? parent_snap : nullptr;
  auto total = [&](const char* key, int64_t added) {
    return std::to_string(SummaryLong(base, key) + added);
  };
  std::map<std::string, std::string> summary = change.summary;
  summary["added-data-files"] = std::to_string(change.added_files);
  summary["added-records"] = std::to_string(change.added_records);
  summary["added-files-size"] = std::to_string(change.added_bytes);
  summary["changed-partition-count"] = std::to_string(change.changed_partitions);
  summary["total-data-files"] = total("total-data-files", change.added_files);
  summary["total-records"] = total("total-records", change.added_records);
  summary["total-files-size"] = total("total-files-size", change.added_bytes);
  const int64_t delete_files =
      change.added_equality_delete_files + change.added_position_delete_files;
  if (delete_files > 0) {
    summary["added-delete-files"] = std::to_string(delete_files);
    summary["added-equality-delete-files"] = std::to_string(change.added_equality_delete_files);
    summary["added-position-delete-files"] = std::to_string(change.added_position_delete_files);
    summary["added-equality-deletes"] = std::to_string(change.added_equality_deletes);
    summary["added-position-deletes"] = std::to_string(change.added_position_deletes);
  }
  summary["total-delete-files"] = total("total-delete-files", delete_files);
  summary["total-position-deletes"] =
      total("total-position-deletes", change.added_position_deletes);
  summary["total-equality-deletes"] =
      total("total-equality-deletes", change.added_equality_deletes);
  summary["manifests-created"] = std::to_string(change.new_manifests.size());
  summary["manifests-kept"] = std::to_string(manifests.size() - change.new_manifests.size());
  summary["engine-name"] = "ferry";
  summary["engine-version"] = "0.1.0";
  if (!change.keep_parent_manifests && parent_snap != nullptr) {
    summary["deleted-data-files"] = std::to_string(SummaryLong(parent_snap, "total-data-files"));
    summary["deleted-records"] = std::to_string(SummaryLong(parent_snap, "total-records"));
    summary["removed-files-size"] = std::to_string(SummaryLong(parent_snap, "total-files-size"));
    if (!summary.count("operation")) summary["operation"] = "delete";
  }
  if (!summary.count("operation")) {
    // As Java's RowDelta names them: data only -> append, deletes only -> delete, both ->
    // overwrite.
    summary["operation"] = delete_files == 0         ? "append"
                           : change.added_files == 0 ? "delete"
                                                     : "overwrite";
  }

  Json snap{{"snapshot-id", snapshot_id},
            {"timestamp-ms", next.last_updated_ms()},
            {"manifest-list", list_uri},
            {"schema-id", schema_id},
            {"summary", summary}};
  if (parent) snap["parent-snapshot-id"] = *parent;
  next.AddSnapshot(std::move(snap), branch);
  return Status::OK();
}

Result<CommitOutcome> Table::Append(const AppendRequest& req) {
  if (req.schema == nullptr) return Status::Internal("Append without a schema");
  int64_t snapshot_id = NewPositiveId();
  std::vector<ManifestEntry> entries;
  int64_t records = 0, bytes = 0;
  for (const auto& f : req.data_files) {
    ManifestEntry e;
    e.status = EntryStatus::kAdded;
    e.snapshot_id = snapshot_id;
    e.file = f;
    records += f.record_count;
    bytes += f.file_size_bytes;
    entries.push_back(std::move(e));
  }
  // One manifest per content and partition spec (a manifest holds the files of one spec).
  std::vector<ManifestFile> new_manifests;
  auto write_manifests = [&](const std::vector<ManifestEntry>& all, int32_t content) -> Status {
    std::map<int32_t, std::vector<ManifestEntry>> by_spec;
    for (const auto& e : all) by_spec[e.file.spec_id].push_back(e);
    for (const auto& [spec_id, group] : by_spec) {
      FERRY_ASSIGN_OR_RETURN(PartitionSpec spec, meta_.SpecById(spec_id));
      std::string uri =
          meta_.location() + "/metadata/" + NewUuid() + "-m" + std::to_string(content) + ".avro";
      FERRY_ASSIGN_OR_RETURN(ManifestFile mf, WriteManifest(*io_, uri, *req.schema, spec,
                                                            snapshot_id, content, group));
      new_manifests.push_back(std::move(mf));
    }
    return Status::OK();
  };
  FERRY_RETURN_IF_ERROR(write_manifests(entries, 0));
  SnapshotChange base_change;
  std::set<std::pair<int32_t, std::string>> partitions;
  for (const auto* files : {&req.data_files, &req.delete_files}) {
    for (const auto& f : *files) partitions.emplace(f.spec_id, PartitionKey(f.partition));
  }
  base_change.changed_partitions = static_cast<int64_t>(partitions.size());
  if (!req.delete_files.empty()) {
    std::vector<ManifestEntry> deletes;
    for (const auto& f : req.delete_files) {
      if (f.content == FileContent::kData)
        return Status::Internal("a data file among delete files");
      ManifestEntry e;
      e.status = EntryStatus::kAdded;
      e.snapshot_id = snapshot_id;
      e.file = f;
      deletes.push_back(std::move(e));
      if (f.content == FileContent::kEqualityDeletes) {
        ++base_change.added_equality_delete_files;
        base_change.added_equality_deletes += f.record_count;
      } else {
        ++base_change.added_position_delete_files;
        base_change.added_position_deletes += f.record_count;
      }
      bytes += f.file_size_bytes;
    }
    FERRY_RETURN_IF_ERROR(write_manifests(deletes, 1));
  }
  std::optional<int64_t> sid = snapshot_id;
  return Commit(
      req.already_landed,
      [&](TableMetadata& next, int attempt) -> Status {
        int32_t schema_id = next.AddSchema(*req.schema);
        // Rows committed to main with an evolved schema make it the table's schema.
        if (req.branch == "main") next.SetCurrentSchema(schema_id);
        for (const auto& [k, v] : req.set_properties) next.SetProperty(k, v);
        SnapshotChange change = base_change;
        change.new_manifests = new_manifests;
        change.added_files = static_cast<int64_t>(req.data_files.size());
        change.added_records = records;
        change.added_bytes = bytes;
        change.summary = req.summary;
        return AddSnapshotOnBranch(next, req.branch, snapshot_id, attempt, schema_id, change);
      },
      &sid);
}

Result<CommitOutcome> Table::CommitUpdate(
    const std::function<Status(TableMetadata&, int attempt)>& mutate,
    std::optional<int64_t>* snapshot_id) {
  std::optional<int64_t> none;
  return Commit(nullptr, mutate, snapshot_id != nullptr ? snapshot_id : &none);
}

Result<CommitOutcome> Table::Publish(const PublishRequest& req) {
  if (req.schema == nullptr) return Status::Internal("Publish without a schema");
  std::optional<int64_t> sid;
  return Commit(
      req.already_landed,
      [&](TableMetadata& next, int attempt) -> Status {
        int32_t schema_id = next.AddSchema(*req.schema);
        next.SetCurrentSchema(schema_id);
        for (const auto& [k, v] : req.set_properties) next.SetProperty(k, v);
        if (!req.remove_branches_with_prefix.empty()) {
          for (const auto& b : next.Branches()) {
            if (b != req.branch && b != "main" &&
                b.rfind(req.remove_branches_with_prefix, 0) == 0) {
              next.RemoveBranch(b);
            }
          }
        }
        std::optional<int64_t> head = next.BranchHead(req.branch);
        if (head) {
          next.SetBranch("main", *head, next.last_updated_ms());
          next.RemoveBranch(req.branch);
          sid = head;
          return Status::OK();
        }
        // Nothing was loaded: main becomes an empty snapshot that deletes what it had.
        int64_t id = NewPositiveId();
        SnapshotChange change;
        change.keep_parent_manifests = false;
        change.summary = req.summary;
        FERRY_RETURN_IF_ERROR(AddSnapshotOnBranch(next, "main", id, attempt, schema_id, change));
        if (next.doc()["refs"].contains(req.branch)) next.RemoveBranch(req.branch);
        sid = id;
        return Status::OK();
      },
      &sid);
}

}  // namespace ferry::lake
