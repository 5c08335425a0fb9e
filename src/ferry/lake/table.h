// An Iceberg table ferry writes to: optimistic commits through the catalog's compare-and-swap,
// each commit carrying the writer's progress marker in the same metadata update.
//
// Commit protocol (one attempt): refresh the metadata; ask the caller whether its work already
// landed (the marker check: a retry after an unknown outcome must never write twice); build the
// new metadata (new snapshot, refs, properties); describe the change as a TableCommit
// (table_commit.h: requirements on the metadata it was built from, updates) and hand it to the
// catalog, which applies it only if the requirements still hold. A lost race (kCommitFailed)
// retries with backoff; an unknown outcome (kCommitStateUnknown: the connection failed after the
// commit was sent) re-reads the table and decides by what it finds: the commit's effects (its
// snapshot, the refs it set) or the marker. Only when neither shows it is another attempt made,
// again with requirements on the metadata just read, so the lost update and the new attempt can
// never both apply. Data files and manifests are written once, outside the retry loop.
//
// Thread-safety: not thread-safe; one Table object per writer thread. Several processes may
// commit to the same table at once: the catalog serializes them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/catalog.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/manifest.h"
#include "ferry/lake/metadata.h"

namespace ferry::lake {

// Returns true when the change a commit would make is already in the table (its marker says so).
using LandedCheck = std::function<bool(const TableMetadata&)>;

// One snapshot adding data files and, optionally, delete files (a "row delta"): equality deletes
// written in the same commit apply to older data only, so upserted rows survive while their
// previous versions disappear; position deletes apply to data of this commit too.
struct AppendRequest {
  std::string branch = "main";
  const Schema* schema = nullptr;  // the schema the files were written with (ids from the table)
  std::vector<DataFile> data_files;
  std::vector<DataFile> delete_files;  // content kEqualityDeletes or kPositionDeletes
  std::map<std::string, std::string> set_properties;
  std::map<std::string, std::string> summary;  // extra snapshot summary keys
  LandedCheck already_landed;
};

struct PublishRequest {
  std::string branch;              // its head becomes main's; the branch is removed
  const Schema* schema = nullptr;  // becomes the current schema
  std::map<std::string, std::string> set_properties;
  std::map<std::string, std::string>
      summary;  // for the empty snapshot made when the branch has none
  // Other branches to drop in the same commit (e.g. left behind by abandoned loads).
  std::string remove_branches_with_prefix;
  LandedCheck already_landed;
};

struct CommitOutcome {
  bool already_landed = false;  // nothing was written: the marker showed the work was there
  std::optional<int64_t> snapshot_id;
  std::string metadata_location;
  int attempts = 0;          // 1 + the retries after lost races or unknown outcomes
  int lost_races = 0;        // swaps refused because another writer had committed first
  int unknown_outcomes = 0;  // swaps whose outcome was unknown and was read back
};

struct CommitRetryPolicy {
  int max_attempts = 8;
  int64_t min_backoff_ms = 50;
  int64_t max_backoff_ms = 5000;
};

class Table {
 public:
  // Loads the table; kNotFound when the catalog does not have it.
  static Result<std::unique_ptr<Table>> Load(Catalog* catalog, std::shared_ptr<FileIO> io,
                                             const TableIdent& ident);
  // Creates the table (and namespace) if missing, else loads it.
  static Result<std::unique_ptr<Table>> LoadOrCreate(
      Catalog* catalog, std::shared_ptr<FileIO> io, const TableIdent& ident,
      const std::string& location, const Schema& schema,
      const std::map<std::string, std::string>& properties);

  const TableIdent& ident() const { return ident_; }
  const TableMetadata& metadata() const { return meta_; }
  const std::string& metadata_location() const { return location_; }
  // The settings the catalog gave for the table's files (LoadedTable::config).
  const std::map<std::string, std::string>& config() const { return config_; }
  FileIO& io() { return *io_; }
  // Replaces the FileIO of the table's files (one built from the credentials the catalog vends
  // for it), before the table is used.
  void SetIO(std::shared_ptr<FileIO> io) { io_ = std::move(io); }

  Status Refresh();

  // Gives `source` the table's field ids. A column with the same name keeps its id when its type
  // is the same or a widening Iceberg allows (int -> long, float -> double, decimal(P,S) ->
  // decimal(P',S) with P' > P); a new column gets a new id above last-column-id and is optional
  // (rows already in the table have no value for it). Keys map to identifier-field-ids.
  //
  // `replacing`: the commit replaces every row (a full refresh), so any change is allowed and a
  // column whose type changed otherwise gets a new id. Otherwise (appends, upserts, deletes)
  // anything else — a narrowed or changed type, a column the source no longer has — is refused
  // with kInvalidArgument naming the column and both types.
  Result<Schema> AssignFieldIds(const Schema& source, bool replacing) const;

  // A new, unique location for a data file: <table>/data/<prefix>-<uuid>.parquet
  std::string NewDataFileUri(const std::string& prefix) const;

  Result<CommitOutcome> Append(const AppendRequest& req);
  Result<CommitOutcome> Publish(const PublishRequest& req);

  // The same optimistic commit for other changes (maintenance: rewrites, snapshot expiry):
  // `mutate` turns a copy of the freshly read metadata into the next one, on every attempt;
  // an error from it ends the commit with that error and nothing committed. A snapshot it adds is
  // reported through *snapshot_id (which may be null). Errors are those of Append.
  Result<CommitOutcome> CommitUpdate(
      const std::function<Status(TableMetadata&, int attempt)>& mutate,
      std::optional<int64_t>* snapshot_id);

  void set_retry_policy(CommitRetryPolicy p) { retry_ = p; }

 private:
  Table(Catalog* c, std::shared_ptr<FileIO> io, TableIdent ident)
      : catalog_(c), io_(std::move(io)), ident_(std::move(ident)) {}

  // The generic optimistic commit: `mutate` turns a copy of the fresh metadata into the next one.
  Result<CommitOutcome> Commit(const LandedCheck& already_landed,
                               const std::function<Status(TableMetadata&, int attempt)>& mutate,
                               std::optional<int64_t>* snapshot_id);
  // What a new snapshot changes relative to its branch's head.
  struct SnapshotChange {
    std::vector<ManifestFile> new_manifests;
    bool keep_parent_manifests = true;  // false: the snapshot replaces everything (empty load)
    int64_t added_files = 0;
    int64_t added_records = 0;
    int64_t added_bytes = 0;
    int64_t added_equality_delete_files = 0;
    int64_t added_equality_deletes = 0;
    int64_t added_position_delete_files = 0;
    int64_t added_position_deletes = 0;
    int64_t changed_partitions = 0;
    std::map<std::string, std::string> summary;
  };
  // Adds a snapshot on `branch` (main: also the current snapshot) with its manifest list.
  Status AddSnapshotOnBranch(TableMetadata& next, const std::string& branch, int64_t snapshot_id,
                             int attempt, int32_t schema_id, const SnapshotChange& change);

  // Takes what the catalog loaded or committed as the table's state.
  void Adopt(LoadedTable loaded);

  Catalog* catalog_;
  std::shared_ptr<FileIO> io_;
  TableIdent ident_;
  TableMetadata meta_;
  std::string location_;
  std::map<std::string, std::string> config_;
  CommitRetryPolicy retry_;
};

}  // namespace ferry::lake
