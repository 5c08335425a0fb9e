#include "ferry/lake/maintain.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ferry/base/assert.h"
#include "ferry/base/log.h"
#include "ferry/base/uuid.h"
#include "ferry/format/parquet/reader.h"
#include "ferry/lake/parquet_file.h"
#include "ferry/lake/table_scan.h"

namespace ferry::lake {
namespace {

constexpr int64_t kDefaultMaxSnapshotAgeMs = 5LL * 24 * 3600 * 1000;  // Iceberg's default
constexpr int64_t kDefaultMinSnapshotsToKeep = 1;

// ---- writing the rewritten rows ----

// Writes rows into files of up to the target size.
class RollingWriter {
 public:
  RollingWriter(Table& table, std::shared_ptr<const Schema> schema, const CompactionOptions& o)
      : table_(table), schema_(std::move(schema)), options_(o) {}
  ~RollingWriter() { Abandon(); }

  Status Write(const Batch& b) {
    if (b.num_rows() == 0) return Status::OK();
    if (!writer_) {
      uri_ = table_.NewDataFileUri("compact");
      FERRY_ASSIGN_OR_RETURN(auto out, table_.io().NewFile(uri_));
      FERRY_ASSIGN_OR_RETURN(writer_,
                             parquet::Writer::Open(std::move(out), schema_, options_.parquet));
    }
    FERRY_RETURN_IF_ERROR(writer_->Write(b));
    if (writer_->EstimatedSize() >= options_.target_file_bytes) return CloseFile();
    return Status::OK();
  }
  Status CloseFile() {
    if (!writer_) return Status::OK();
    auto m = writer_->Close();
    writer_.reset();
    if (!m.ok()) {
      (void)table_.io().Delete(uri_);
      return m.status().WithContext("closing compacted file " + uri_);
    }
    files_.push_back(DataFileOf(uri_, *m));
    return Status::OK();
  }
  // The files written so far (after CloseFile).
  std::vector<DataFile> TakeFiles() { return std::move(files_); }
  // Deletes the open file (not the closed ones).
  void Abandon() {
    if (writer_) {
      (void)writer_->Close();
      writer_.reset();
      (void)table_.io().Delete(uri_);
    }
  }

 private:
  Table& table_;
  std::shared_ptr<const Schema> schema_;
  const CompactionOptions& options_;
  std::unique_ptr<parquet::Writer> writer_;
  std::string uri_;
  std::vector<DataFile> files_;
};

struct Group {
  std::vector<ManifestEntry> inputs;
  std::vector<DataFile> outputs;
  int64_t rows_read = 0;
  int64_t rows_written = 0;
  int64_t rows_dropped = 0;
};

// Reads the group's files, drops deleted rows, writes the rest.
Status RewriteGroup(Table& table, const std::shared_ptr<const Schema>& schema,
                    const DeleteIndex& deletes, const CompactionOptions& options, Group* g) {
  RollingWriter out(table, schema, options);
  Batch in(schema);
  Batch kept(schema);
  auto fail = [&](const Status& s) {
    out.Abandon();
    for (const auto& f : out.TakeFiles()) (void)table.io().Delete(f.path);
    return s;
  };
  for (const auto& e : g->inputs) {
    auto reader = OpenTableFile(table.io(), e.file, schema);
    if (!reader.ok()) return fail(reader.status().WithContext("compacting " + e.file.path));
    const DeleteIndex::FileFilter filter = deletes.ForFile(e.file, *e.sequence_number);
    int64_t row_base = 0;
    for (size_t rg = 0; rg < (*reader)->num_row_groups(); ++rg) {
      Status s = (*reader)->ReadRowGroup(rg, &in);
      if (!s.ok()) return fail(s.WithContext("compacting " + e.file.path));
      const size_t n = in.num_rows();
      const Batch* to_write = &in;
      if (!filter.empty()) {
        kept.Clear();
        for (size_t r = 0; r < n; ++r) {
          if (filter.Deleted(in, r, row_base + static_cast<int64_t>(r))) {
            ++g->rows_dropped;
            continue;
          }
          for (size_t c = 0; c < in.num_columns(); ++c) {
            parquet::AppendValue(in.column(c), r, &kept.column(c));
          }
        }
        to_write = &kept;
      }
      g->rows_read += static_cast<int64_t>(n);
      g->rows_written += static_cast<int64_t>(to_write->num_rows());
      s = out.Write(*to_write);
      if (!s.ok()) return fail(s);
      row_base += static_cast<int64_t>(n);
    }
    if (row_base != e.file.record_count) {
      return fail(Status::Corruption("data file " + e.file.path + " holds " +
                                     std::to_string(row_base) + " rows; its manifest says " +
                                     std::to_string(e.file.record_count)));
    }
  }
  Status s = out.CloseFile();
  if (!s.ok()) return fail(s);
  g->outputs = out.TakeFiles();
  // A group is one partition of one spec: its files stay there.
  for (auto& f : g->outputs) {
    f.spec_id = g->inputs.front().file.spec_id;
    f.partition = g->inputs.front().file.partition;
  }
  return Status::OK();
}

// Whether delete file `d` (of the starting snapshot) still applies to one of `live` data files.
bool StillApplies(const ManifestEntry& d, const std::vector<ManifestEntry>& live,
                  const DeleteIndex& deletes) {
  const int64_t seq = *d.sequence_number;
  if (d.file.content == FileContent::kEqualityDeletes) {
    for (const auto& e : live) {
      if (*e.sequence_number < seq) return true;
    }
    return false;
  }
  const std::set<std::string>* targets = deletes.PositionTargets(d.file.path);
  if (targets == nullptr) return true;  // not read: keep it
  for (const auto& e : live) {
    if (*e.sequence_number <= seq && targets->count(e.file.path)) return true;
  }
  return false;
}

std::string ManifestUri(const TableMetadata& meta) {
  return meta.location() + "/metadata/" + NewUuid() + "-m0.avro";
}

struct Totals {
  int64_t data_files = 0, records = 0, bytes = 0;
  int64_t delete_files = 0, eq_deletes = 0, pos_deletes = 0;
};

Totals TotalsOf(const std::vector<ManifestEntry>& data, const std::vector<ManifestEntry>& dels) {
  Totals t;
  for (const auto& e : data) {
    ++t.data_files;
    t.records += e.file.record_count;
    t.bytes += e.file.file_size_bytes;
  }
  for (const auto& e : dels) {
    ++t.delete_files;
    t.bytes += e.file.file_size_bytes;
    (e.file.content == FileContent::kEqualityDeletes ? t.eq_deletes : t.pos_deletes) +=
        e.file.record_count;
  }
  return t;
}

void DeleteQuietly(FileIO& io, const std::vector<std::string>& uris) {
  for (const auto& u : uris) {
    Status s = io.Delete(u);
    if (!s.ok() && s.code() != StatusCode::kNotFound) {
      FERRY_LOG(kWarn) << "could not delete " << u << ": " << s.message();
    }
  }
}

}  // namespace

Result<CompactionReport> CompactTable(Table& table, const CompactionOptions& options) {
  CompactionReport report;
  FERRY_RETURN_IF_ERROR(table.Refresh());
  const TableMetadata start = table.metadata();
  const std::optional<int64_t> head = start.BranchHead("main");
  if (!head) return report;  // an empty table
  const Json* head_snap = start.FindSnapshot(*head);
  if (head_snap == nullptr) {
    return Status::Corruption("table " + table.ident().ToString() + ": main points at snapshot " +
                              std::to_string(*head) + ", which the metadata does not have");
  }
  const int64_t start_seq = head_snap->value("sequence-number", int64_t{0});
  report.starting_sequence_number = start_seq;
  FERRY_ASSIGN_OR_RETURN(Schema current, start.CurrentSchema());
  auto schema = std::make_shared<const Schema>(std::move(current));
  FERRY_ASSIGN_OR_RETURN(SnapshotFiles files, ReadSnapshotFiles(table.io(), start, *head));
  const Totals before = TotalsOf(files.data, files.deletes);
  report.data_files_before = report.data_files_after = before.data_files;
  report.delete_files_before = report.delete_files_after = before.delete_files;
  report.records_before = report.records_after = before.records;
  report.bytes_before = report.bytes_after = before.bytes;

  FERRY_ASSIGN_OR_RETURN(DeleteIndex deletes,
                         DeleteIndex::Load(table.io(), *schema, files.deletes));

  // Plan: files with deletes always; small clean files when there are enough of them.
  const auto small_below = static_cast<int64_t>(static_cast<double>(options.target_file_bytes) *
                                                options.small_file_ratio);
  std::vector<ManifestEntry> dirty, small;
  for (const auto& e : files.data) {
    std::string format = e.file.format;
    std::transform(format.begin(), format.end(), format.begin(), ::toupper);
    if (format != "PARQUET") continue;  // written by another engine; left as it is
    if (deletes.AnyApplies(e.file, *e.sequence_number)) {
      dirty.push_back(e);
    } else if (e.file.file_size_bytes < small_below) {
      small.push_back(e);
    }
  }
  // Small clean files join the rewrite beside files rewritten anyway, or alone when there are
  // enough of them (one file rewritten into one file gains nothing).
  std::vector<ManifestEntry> candidates = dirty;
  if (!dirty.empty() || small.size() >= std::max<size_t>(options.min_input_files, 2)) {
    candidates.insert(candidates.end(), small.begin(), small.end());
  }
  if (candidates.empty()) return report;
  // Groups never mix partitions (nor specs): each is rewritten into files of its partition.
  auto partition_of = [](const ManifestEntry& e) {
    return std::make_pair(e.file.spec_id, PartitionKey(e.file.partition));
  };
  std::sort(candidates.begin(), candidates.end(), [&](const auto& a, const auto& b) {
    if (partition_of(a) != partition_of(b)) return partition_of(a) < partition_of(b);
    if (*a.sequence_number != *b.sequence_number) return *a.sequence_number < *b.sequence_number;
    return a.file.path < b.file.path;
  });
  std::vector<Group> groups;
  uint64_t group_bytes = 0;
  for (const auto& e : candidates) {
    const auto size = static_cast<uint64_t>(std::max<int64_t>(e.file.file_size_bytes, 0));
    if (groups.empty() || (group_bytes + size > options.max_group_bytes && group_bytes > 0) ||
        partition_of(groups.back().inputs.front()) != partition_of(e)) {
      groups.emplace_back();
      group_bytes = 0;
    }
    groups.back().inputs.push_back(e);
    group_bytes += size;
  }
  report.groups_planned = static_cast<int64_t>(groups.size());

  auto delete_outputs = [&](const std::vector<Group>& gs) {
    for (const auto& g : gs) {
      for (const auto& f : g.outputs) (void)table.io().Delete(f.path);
    }
  };
  for (size_t i = 0; i < groups.size(); ++i) {
    Status s = RewriteGroup(table, schema, deletes, options, &groups[i]);
    if (!s.ok()) {
      delete_outputs(groups);
      return s;
    }
  }
  if (options.before_commit) options.before_commit();

  // ---- commit ----
  const int64_t snapshot_id = NewPositiveId();
  std::optional<int64_t> sid = snapshot_id;
  std::vector<std::string> attempt_files;  // manifests and list of the current attempt
  std::vector<bool> committed_group;
  bool nothing_left = false;
  Totals after;
  int64_t removed_delete_files = 0;
  int64_t changed_partitions = 0;
  auto mutate = [&](TableMetadata& next, int attempt) -> Status {
    nothing_left = false;
    // An earlier attempt lost its race (or its unknown outcome was read back as not landed):
    // its manifests and list are referenced by nothing.
    DeleteQuietly(table.io(), attempt_files);
    attempt_files.clear();
    const std::optional<int64_t> now_head = next.BranchHead("main");
    SnapshotFiles fresh_storage;
    const SnapshotFiles* fresh = &files;
    if (!now_head) {
      nothing_left = true;
      return Status::Cancelled("main has no snapshot any more");
    }
    if (*now_head != *head) {
      FERRY_ASSIGN_OR_RETURN(fresh_storage, ReadSnapshotFiles(table.io(), next, *now_head));
      fresh = &fresh_storage;
    }
    std::unordered_set<std::string> live;
    for (const auto& e : fresh->data) live.insert(e.file.path);
    bool concurrent_position_deletes = false;
    for (const auto& e : fresh->deletes) {
      if (*e.sequence_number > start_seq && e.file.content == FileContent::kPositionDeletes) {
        concurrent_position_deletes = true;
      }
    }
    committed_group.assign(groups.size(), false);
    std::unordered_set<std::string> removed;
    std::vector<ManifestEntry> added;
    for (size_t i = 0; i < groups.size(); ++i) {
      bool ok = !concurrent_position_deletes;
      for (const auto& e : groups[i].inputs) ok = ok && live.count(e.file.path) > 0;
      if (!ok) continue;
      committed_group[i] = true;
      for (const auto& e : groups[i].inputs) removed.insert(e.file.path);
      for (const auto& f : groups[i].outputs) {
        ManifestEntry a;
        a.status = EntryStatus::kAdded;
        a.snapshot_id = snapshot_id;
        a.sequence_number = start_seq;  // the starting snapshot's: later deletes still apply
        a.file = f;
        added.push_back(std::move(a));
      }
    }
    if (removed.empty()) {
      nothing_left = true;
      return Status::Cancelled("every group's input files changed");
    }
    // The data files after this commit, and the delete files that still apply to one of them.
    std::vector<ManifestEntry> remaining;
    for (const auto& e : fresh->data) {
      if (!removed.count(e.file.path)) remaining.push_back(e);
    }
    remaining.insert(remaining.end(), added.begin(), added.end());
    std::vector<ManifestEntry> remaining_deletes;
    std::vector<ManifestEntry> dropped_deletes;
    for (const auto& d : fresh->deletes) {
      if (*d.sequence_number <= start_seq && !StillApplies(d, remaining, deletes)) {
        removed.insert(d.file.path);
        dropped_deletes.push_back(d);
      } else {
        remaining_deletes.push_back(d);
      }
    }
    removed_delete_files = static_cast<int64_t>(dropped_deletes.size());

    FERRY_ASSIGN_OR_RETURN(Schema table_schema, next.CurrentSchema());
    std::vector<ManifestFile> manifests;
    std::map<int32_t, std::vector<ManifestEntry>> added_by_spec;
    std::set<std::pair<int32_t, std::string>> partitions;
    for (const auto& a : added) {
      added_by_spec[a.file.spec_id].push_back(a);
      partitions.emplace(a.file.spec_id, PartitionKey(a.file.partition));
    }
    changed_partitions = static_cast<int64_t>(partitions.size());
    for (const auto& [spec_id, entries] : added_by_spec) {
      FERRY_ASSIGN_OR_RETURN(PartitionSpec spec, next.SpecById(spec_id));
      const std::string uri = ManifestUri(next);
      attempt_files.push_back(uri);
      FERRY_ASSIGN_OR_RETURN(
          ManifestFile data_manifest,
          WriteManifest(table.io(), uri, table_schema, spec, snapshot_id, 0, entries));
      data_manifest.min_sequence_number = start_seq;
      manifests.push_back(data_manifest);
    }
    int64_t kept = 0, replaced = 0, created = static_cast<int64_t>(added_by_spec.size());
    for (const auto& m : fresh->manifests) {
      auto it = fresh->entries.find(m.path);
      if (it == fresh->entries.end()) return Status::Internal("manifest entries not loaded");
      const std::vector<ManifestEntry>& entries = it->second;
      bool touched = false;
      int64_t live_entries = 0;
      for (const auto& e : entries) {
        if (e.status == EntryStatus::kDeleted) continue;
        ++live_entries;
        touched = touched || removed.count(e.file.path) > 0;
      }
      if (!touched) {
        if (live_entries > 0) {
          manifests.push_back(m);
          ++kept;
        }
        continue;
      }
      ++replaced;
      std::vector<ManifestEntry> rewritten;
      int64_t min_seq = -1;
      for (const auto& e : entries) {
        if (e.status == EntryStatus::kDeleted) continue;  // deleted by an earlier snapshot
        ManifestEntry r = e;
        if (!r.file_sequence_number) r.file_sequence_number = r.sequence_number;
        if (removed.count(e.file.path)) {
          r.status = EntryStatus::kDeleted;
          r.snapshot_id = snapshot_id;
        } else {
          r.status = EntryStatus::kExisting;
          min_seq = min_seq < 0 ? *r.sequence_number : std::min(min_seq, *r.sequence_number);
        }
        rewritten.push_back(std::move(r));
      }
      const std::string uri = ManifestUri(next);
      attempt_files.push_back(uri);
      FERRY_ASSIGN_OR_RETURN(PartitionSpec spec, next.SpecById(m.partition_spec_id));
      FERRY_ASSIGN_OR_RETURN(ManifestFile nm, WriteManifest(table.io(), uri, table_schema, spec,
                                                            snapshot_id, m.content, rewritten));
      nm.min_sequence_number = min_seq;  // -1 (none live): the commit's number
      manifests.push_back(nm);
      ++created;
    }
    const int64_t seq = next.last_sequence_number() + 1;
    const std::string list_uri = next.location() + "/metadata/snap-" + std::to_string(snapshot_id) +
                                 "-" + std::to_string(attempt) + "-" + NewUuid() + ".avro";
    attempt_files.push_back(list_uri);
    FERRY_RETURN_IF_ERROR(
        WriteManifestList(table.io(), list_uri, snapshot_id, *now_head, seq, manifests).status());

    Totals removed_totals, added_totals;
    std::vector<ManifestEntry> removed_data;
    for (const auto& e : fresh->data) {
      if (removed.count(e.file.path)) removed_data.push_back(e);
    }
    removed_totals = TotalsOf(removed_data, dropped_deletes);
    added_totals = TotalsOf(added, {});
    after = TotalsOf(remaining, remaining_deletes);
    const Totals removed_delete_only = TotalsOf({}, dropped_deletes);
    int64_t removed_eq_files = 0, removed_pos_files = 0;
    for (const auto& d : dropped_deletes) {
      ++(d.file.content == FileContent::kEqualityDeletes ? removed_eq_files : removed_pos_files);
    }
    std::map<std::string, std::string> summary = {
        {"operation", "replace"},
        {"added-data-files", std::to_string(added_totals.data_files)},
        {"deleted-data-files", std::to_string(removed_totals.data_files)},
        {"added-records", std::to_string(added_totals.records)},
        {"deleted-records", std::to_string(removed_totals.records)},
        {"added-files-size", std::to_string(added_totals.bytes)},
        {"removed-files-size", std::to_string(removed_totals.bytes)},
        {"removed-delete-files", std::to_string(removed_delete_only.delete_files)},
        {"removed-equality-delete-files", std::to_string(removed_eq_files)},
        {"removed-position-delete-files", std::to_string(removed_pos_files)},
        {"removed-equality-deletes", std::to_string(removed_delete_only.eq_deletes)},
        {"removed-position-deletes", std::to_string(removed_delete_only.pos_deletes)},
        {"changed-partition-count", std::to_string(changed_partitions)},
        {"total-data-files", std::to_string(after.data_files)},
        {"total-records", std::to_string(after.records)},
        {"total-files-size", std::to_string(after.bytes)},
        {"total-delete-files", std::to_string(after.delete_files)},
        {"total-equality-deletes", std::to_string(after.eq_deletes)},
        {"total-position-deletes", std::to_string(after.pos_deletes)},
        {"manifests-created", std::to_string(created)},
        {"manifests-kept", std::to_string(kept)},
        {"manifests-replaced", std::to_string(replaced)},
        {"engine-name", "ferry"},
        {"engine-version", "0.1.0"},
    };
    Json snap{{"snapshot-id", snapshot_id},
              {"parent-snapshot-id", *now_head},
              {"timestamp-ms", next.last_updated_ms()},
              {"manifest-list", list_uri},
              {"schema-id", next.current_schema_id()},
              {"summary", summary}};
    next.AddSnapshot(std::move(snap), "main");
    return Status::OK();
  };
  auto outcome = table.CommitUpdate(mutate, &sid);
  if (!outcome.ok()) {
    if (nothing_left) {
      FERRY_LOG(kInfo) << "compaction of " << table.ident().ToString()
                       << " gave up: its input files changed while it ran";
      DeleteQuietly(table.io(), attempt_files);
      delete_outputs(groups);
      report.groups_given_up = report.groups_planned;
      return report;
    }
    if (outcome.status().code() != StatusCode::kCommitStateUnknown) {
      DeleteQuietly(table.io(), attempt_files);
      delete_outputs(groups);
    }
    return outcome.status().WithContext("committing the compaction of " + table.ident().ToString());
  }
  report.committed = true;
  report.snapshot_id = snapshot_id;
  std::vector<Group> given_up;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!committed_group[i]) {
      ++report.groups_given_up;
      given_up.push_back(std::move(groups[i]));
      continue;
    }
    report.rewritten_data_files += static_cast<int64_t>(groups[i].inputs.size());
    report.written_data_files += static_cast<int64_t>(groups[i].outputs.size());
    report.rows_read += groups[i].rows_read;
    report.rows_written += groups[i].rows_written;
    report.rows_dropped += groups[i].rows_dropped;
  }
  delete_outputs(given_up);
  report.removed_delete_files = removed_delete_files;
  report.data_files_after = after.data_files;
  report.delete_files_after = after.delete_files;
  report.records_after = after.records;
  report.bytes_after = after.bytes;
  return report;
}

// ---- snapshot expiry ----

namespace {

Result<int64_t> PropertyLong(const TableMetadata& meta, const std::string& key, int64_t def) {
  auto v = meta.Property(key);
  if (!v) return def;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0' || errno != 0 || n < 0) {
    return Status::InvalidArgument("table property " + key + " is '" + *v +
                                   "', not a whole number >= 0; fix or remove the property");
  }
  return static_cast<int64_t>(n);
}

int64_t RefLong(const Json& ref, const char* key, int64_t def) {
  if (ref.contains(key) && ref[key].is_number_integer()) return ref[key].get<int64_t>();
  return def;
}

// The snapshots to keep: every ref's head; for a branch, its newest ancestors up to
// min-snapshots-to-keep, and older ones while they are younger than the maximum age; snapshots
// no ref reaches while they are younger than the maximum age.
Result<std::set<int64_t>> SnapshotsToKeep(const TableMetadata& meta, const ExpireOptions& o,
                                          int64_t now_ms) {
  FERRY_ASSIGN_OR_RETURN(int64_t table_age, PropertyLong(meta, "history.expire.max-snapshot-age-ms",
                                                         kDefaultMaxSnapshotAgeMs));
  FERRY_ASSIGN_OR_RETURN(
      int64_t table_min,
      PropertyLong(meta, "history.expire.min-snapshots-to-keep", kDefaultMinSnapshotsToKeep));
  std::map<int64_t, const Json*> by_id;
  for (const auto& s : meta.doc()["snapshots"]) by_id[s["snapshot-id"].get<int64_t>()] = &s;
  auto ts = [&](int64_t id) { return (*by_id.at(id)).value("timestamp-ms", int64_t{0}); };
  std::set<int64_t> keep;
  std::set<int64_t> reachable;
  const Json& refs = meta.doc()["refs"];
  std::vector<std::pair<int64_t, const Json*>> heads;
  for (auto it = refs.begin(); it != refs.end(); ++it) {
    heads.emplace_back(it.value()["snapshot-id"].get<int64_t>(), &it.value());
  }
  if (auto main = meta.BranchHead("main"); main && !refs.contains("main")) {
    static const Json kMainRef = Json{{"type", "branch"}};
    heads.emplace_back(*main, &kMainRef);
  }
  for (const auto& [head, ref] : heads) {
    if (!by_id.count(head)) continue;
    keep.insert(head);
    const bool branch = ref->value("type", std::string("branch")) == "branch";
    const int64_t age =
        o.max_snapshot_age_ms.value_or(RefLong(*ref, "max-snapshot-age-ms", table_age));
    const int64_t min_keep =
        o.min_snapshots_to_keep.value_or(RefLong(*ref, "min-snapshots-to-keep", table_min));
    int64_t count = 0;
    bool retaining = branch;
    // Walk the ancestry (bounded by the number of snapshots: no cycle can loop forever).
    std::optional<int64_t> id = head;
    for (size_t steps = 0; id && by_id.count(*id) && steps <= by_id.size(); ++steps) {
      reachable.insert(*id);
      if (retaining && (count < min_keep || ts(*id) >= now_ms - age)) {
        keep.insert(*id);
        ++count;
      } else {
        retaining = false;
      }
      const Json& s = *by_id.at(*id);
      id = s.contains("parent-snapshot-id") && s["parent-snapshot-id"].is_number_integer()
               ? std::optional<int64_t>(s["parent-snapshot-id"].get<int64_t>())
               : std::nullopt;
    }
  }
  const int64_t age = o.max_snapshot_age_ms.value_or(table_age);
  for (const auto& [id, s] : by_id) {
    if (!reachable.count(id) && ts(id) >= now_ms - age) keep.insert(id);
  }
  return keep;
}

// Manifests and live files referenced by `snapshots`, reading each manifest once.
struct References {
  std::set<std::string> lists;
  std::set<std::string> manifests;
  std::set<std::string> files;  // live data and delete files
};

}  // namespace

Result<ExpireReport> ExpireSnapshots(Table& table, const ExpireOptions& options) {
  ExpireReport report;
  const int64_t now_ms = options.now_ms > 0 ? options.now_ms : NowMs();
  std::vector<Json> expired;
  bool nothing = false;
  auto mutate = [&](TableMetadata& next, int) -> Status {
    expired.clear();
    report.snapshots_before = static_cast<int64_t>(next.doc()["snapshots"].size());
    FERRY_ASSIGN_OR_RETURN(std::set<int64_t> keep, SnapshotsToKeep(next, options, now_ms));
    Json& snaps = next.mutable_doc()["snapshots"];
    Json kept = Json::array();
    std::set<int64_t> gone;
    for (auto& s : snaps) {
      const int64_t id = s["snapshot-id"].get<int64_t>();
      if (keep.count(id)) {
        kept.push_back(std::move(s));
      } else {
        gone.insert(id);
        expired.push_back(std::move(s));
      }
    }
    if (gone.empty()) {
      nothing = true;
      return Status::Cancelled("no snapshot to expire");
    }
    snaps = std::move(kept);
    // snapshot-log: an entry of a removed snapshot removes the history before it too, so that
    // what is left is a valid history.
    Json log = Json::array();
    for (const auto& entry : next.doc()["snapshot-log"]) {
      if (gone.count(entry.value("snapshot-id", int64_t{-1}))) {
        log = Json::array();
      } else {
        log.push_back(entry);
      }
    }
    next.mutable_doc()["snapshot-log"] = std::move(log);
    for (const char* key : {"statistics", "partition-statistics"}) {
      if (!next.doc().contains(key) || !next.doc()[key].is_array()) continue;
      Json left = Json::array();
      for (const auto& st : next.doc()[key]) {
        if (!gone.count(st.value("snapshot-id", int64_t{-1}))) left.push_back(st);
      }
      next.mutable_doc()[key] = std::move(left);
    }
    return Status::OK();
  };
  std::optional<int64_t> no_snapshot;
  auto outcome = table.CommitUpdate(mutate, &no_snapshot);
  if (!outcome.ok()) {
    if (nothing) return report;
    return outcome.status().WithContext("expiring snapshots of " + table.ident().ToString());
  }
  report.committed = true;
  report.snapshots_expired = static_cast<int64_t>(expired.size());

  // What the remaining snapshots reference, read from the metadata just committed.
  FileIO& io = table.io();
  const TableMetadata& meta = table.metadata();
  References keep;
  const std::string after_commit =
      "the snapshots were expired, but the files they referenced were not deleted: reading what "
      "the remaining snapshots reference";
  for (const auto& s : meta.doc()["snapshots"]) {
    const std::string list = s.value("manifest-list", "");
    if (list.empty()) continue;
    keep.lists.insert(list);
    auto manifests = ReadManifestList(io, list);
    if (!manifests.ok()) return manifests.status().WithContext(after_commit);
    for (const auto& m : *manifests) {
      if (!keep.manifests.insert(m.path).second) continue;
      auto entries = ReadManifest(io, m);
      if (!entries.ok()) return entries.status().WithContext(after_commit);
      for (const auto& e : *entries) {
        if (e.status != EntryStatus::kDeleted) keep.files.insert(e.file.path);
      }
    }
  }
  // What only the expired ones reference.
  std::vector<std::string> lists, manifests;
  std::map<std::string, ManifestEntry> files;
  std::set<std::string> seen_manifests;
  for (const auto& s : expired) {
    const std::string list = s.value("manifest-list", "");
    if (list.empty() || keep.lists.count(list)) continue;
    auto ms = ReadManifestList(io, list);
    if (!ms.ok()) {
      if (io.Exists(list)) return ms.status().WithContext(after_commit);
      continue;  // removed by an earlier, interrupted expiry
    }
    lists.push_back(list);
    for (const auto& m : *ms) {
      if (keep.manifests.count(m.path) || !seen_manifests.insert(m.path).second) continue;
      auto entries = ReadManifest(io, m);
      if (!entries.ok()) {
        if (io.Exists(m.path)) return entries.status().WithContext(after_commit);
        continue;
      }
      manifests.push_back(m.path);
      for (const auto& e : *entries) {
        if (!keep.files.count(e.file.path)) files.emplace(e.file.path, e);
      }
    }
  }
  auto remove = [&](const std::string& uri, int64_t* counter) {
    FERRY_CHECK(!keep.files.count(uri) && !keep.manifests.count(uri) && !keep.lists.count(uri));
    Status s = io.Delete(uri);
    if (s.ok()) {
      ++*counter;
      return true;
    }
    if (s.code() != StatusCode::kNotFound) {
      FERRY_LOG(kWarn) << "could not delete " << uri << ": " << s.message();
      ++report.files_not_deleted;
    }
    return false;
  };
  for (const auto& [path, e] : files) {
    const bool data = e.file.content == FileContent::kData;
    if (remove(path, data ? &report.data_files_deleted : &report.delete_files_deleted)) {
      report.bytes_deleted += e.file.file_size_bytes;
    }
  }
  for (const auto& m : manifests) remove(m, &report.manifests_deleted);
  for (const auto& l : lists) remove(l, &report.manifest_lists_deleted);
  return report;
}

Result<OrphanReport> RemoveOrphanFiles(Table& table, const OrphanOptions& options) {
  OrphanReport report;
  FERRY_RETURN_IF_ERROR(table.Refresh());
  FileIO& io = table.io();
  const TableMetadata& meta = table.metadata();
  const int64_t now_ms = options.now_ms != 0 ? options.now_ms : NowMs();
  const int64_t before_ms = now_ms - options.older_than_ms;
  const std::string what = "looking for orphan files of " + table.ident().ToString();

  // Everything the metadata references. A manifest list or manifest that cannot be read stops
  // the pass: without it, live files would look like orphans.
  std::set<std::string> referenced = {table.metadata_location()};
  for (const auto& e : meta.doc().value("metadata-log", Json::array())) {
    referenced.insert(e.value("metadata-file", ""));
  }
  for (const char* key : {"statistics", "partition-statistics"}) {
    for (const auto& e : meta.doc().value(key, Json::array())) {
      referenced.insert(e.value("statistics-path", ""));
    }
  }
  std::set<std::string> manifests;
  for (const auto& s : meta.doc().value("snapshots", Json::array())) {
    const std::string list = s.value("manifest-list", "");
    if (list.empty()) continue;
    referenced.insert(list);
    auto ms = ReadManifestList(io, list);
    if (!ms.ok()) return ms.status().WithContext(what);
    for (const auto& m : *ms) {
      if (!manifests.insert(m.path).second) continue;
      referenced.insert(m.path);
      auto entries = ReadManifest(io, m);
      if (!entries.ok()) return entries.status().WithContext(what);
      for (const auto& e : *entries) referenced.insert(e.file.path);
    }
  }
  report.files_referenced = static_cast<int64_t>(referenced.size());

  std::string location = meta.location();
  while (!location.empty() && location.back() == '/') location.pop_back();
  auto listed = io.List(location + "/");
  if (!listed.ok()) return listed.status().WithContext(what);
  report.files_listed = static_cast<int64_t>(listed->size());
  // Metadata may name a file by another spelling of the same location (file:/x for file:///x).
  auto is_referenced = [&](const std::string& uri) {
    if (referenced.count(uri)) return true;
    auto local = LocalPath(uri);
    return local.ok() && (referenced.count(*local) || referenced.count("file:" + *local));
  };
  for (const auto& f : *listed) {
    if (is_referenced(f.location)) continue;
    if (f.modified_ms == 0 || f.modified_ms >= before_ms) {
      ++report.orphans_too_young;
      continue;
    }
    if (options.dry_run) {
      ++report.orphans_deleted;
      report.bytes_deleted += static_cast<int64_t>(f.size_bytes);
      continue;
    }
    Status s = io.Delete(f.location);
    if (!s.ok()) {
      FERRY_LOG(kWarn) << "could not delete the orphan file " << f.location << ": " << s.message();
      ++report.files_not_deleted;
      continue;
    }
    ++report.orphans_deleted;
    report.bytes_deleted += static_cast<int64_t>(f.size_bytes);
  }
  if (!options.dry_run) {
    auto aborted = io.AbortUploadsBegunBefore(location + "/", before_ms);
    if (!aborted.ok()) return aborted.status().WithContext(what);
    report.uploads_aborted = *aborted;
  }
  return report;
}

}  // namespace ferry::lake
