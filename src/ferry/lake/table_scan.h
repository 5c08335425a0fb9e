// Reading a table's rows as a reader of the table sees them: the live data files of one snapshot,
// minus the rows its delete files remove. Compaction (maintain.cc) and `ferry verify` read tables
// through it, so both apply deletes with the same semantics:
//
//   - an equality delete removes a row of a data file whose data sequence number is STRICTLY LOWER
//     than the delete file's, when the row's values of the delete's equality fields equal one of
//     its keys (NULL equals NULL);
//   - a position delete removes row `pos` of the data file `file_path` when that file's data
//     sequence number is LOWER THAN OR EQUAL TO the delete file's.
//
// Memory: a DeleteIndex holds every key of the equality deletes it loaded (with the highest
// sequence number deleting each) and every position of the position deletes; a TableScan holds
// that index, the snapshot's manifest entries, and one row group of one data file at a time.
// The size of the table itself does not count.
//
// Errors: a data or delete file the Parquet reader cannot read (kCorruption, kNotSupported, naming
// the file); a data file in another format than Parquet (kNotSupported); an equality delete on a
// field the current schema no longer has (kNotSupported); a data file whose row count differs from
// its manifest entry (kCorruption).
// Thread-safety: a TableScan is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/format/parquet/reader.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/manifest.h"
#include "ferry/lake/metadata.h"
#include "ferry/types/batch.h"

namespace ferry::lake {

// The live files of a snapshot.
struct SnapshotFiles {
  std::vector<ManifestFile> manifests;
  std::map<std::string, std::vector<ManifestEntry>> entries;  // by manifest path, every status
  std::vector<ManifestEntry> data;                            // live (ADDED or EXISTING) data files
  std::vector<ManifestEntry> deletes;                         // live delete files
};

// Reads the manifest list and manifests of `snapshot_id`. Every live entry has its data sequence
// number (kCorruption otherwise).
Result<SnapshotFiles> ReadSnapshotFiles(FileIO& io, const TableMetadata& meta, int64_t snapshot_id);

// Opens a Parquet file of the table (a data or delete file, as its manifest entry lists it) through
// `io` for reading `schema`'s fields.
Result<std::unique_ptr<parquet::Reader>> OpenTableFile(FileIO& io, const DataFile& file,
                                                       std::shared_ptr<const Schema> schema);

// The partition a file is in, as equality deletes are scoped: "" for a file of an unpartitioned
// spec (its deletes are global), else its spec and partition tuple.
std::string DeleteScope(const DataFile& file);

// The delete files of a snapshot, loaded for applying them to data files: position deletes to the
// files they name, equality deletes of an unpartitioned spec to every data file, those of a
// partitioned spec to the data files of the same spec and partition (the table spec's rule).
class DeleteIndex {
 private:
  // The equality deletes on one list of fields, in one scope: every partition (a delete file of
  // an unpartitioned spec: global) or one partition of one spec.
  struct EqualitySet {
    std::vector<int32_t> ids;
    std::string scope;                 // "" (global) or DeleteScope of the delete files
    std::vector<size_t> data_columns;  // positions of the ids in the table schema
    std::unordered_map<std::string, int64_t> max_seq;  // key -> highest sequence deleting it
    int64_t highest_seq = 0;
  };

 public:
  // Loads `delete_files` (equality and position deletes, read through `io`) against the table
  // schema `schema`.
  static Result<DeleteIndex> Load(FileIO& io, const Schema& schema,
                                  const std::vector<ManifestEntry>& delete_files);

  // Whether any delete applies to data file `file` with data sequence number `seq`.
  bool AnyApplies(const DataFile& file, int64_t seq) const;

  // The data files a position delete file names (only for position delete files loaded).
  const std::set<std::string>* PositionTargets(const std::string& delete_file) const;

  // The deletes that apply to one data file. Valid while the index lives.
  class FileFilter {
   public:
    // Nothing to check: no delete applies to the file.
    bool empty() const { return equality_.empty() && positions_ == nullptr; }
    // Whether row `row` of `batch` (on the table schema the index was loaded with), at position
    // `pos` in its file, is deleted.
    bool Deleted(const Batch& batch, size_t row, int64_t pos) const;

   private:
    friend class DeleteIndex;
    int64_t seq_ = 0;
    std::vector<const EqualitySet*> equality_;
    const std::unordered_map<int64_t, int64_t>* positions_ = nullptr;
    mutable std::string key_;  // scratch
  };
  FileFilter ForFile(const DataFile& file, int64_t seq) const;

 private:
  std::vector<std::unique_ptr<EqualitySet>> equality_;
  // data file path -> position -> highest sequence number of a position delete naming it.
  std::unordered_map<std::string, std::unordered_map<int64_t, int64_t>> positions_;
  // delete file path -> the data files it names.
  std::map<std::string, std::set<std::string>> position_targets_;
};

// A read of one snapshot of a table (main's head unless told otherwise), with its current schema.
// The files and deletes are read once at Open; Read may be called several times and reads the
// same rows each time.
class TableScan {
 public:
  // `snapshot_id`: nullopt for main's head. A table whose main has no snapshot scans as empty.
  // The scan reads its files through `io`, which must outlive it.
  static Result<std::unique_ptr<TableScan>> Open(FileIO& io, const TableMetadata& meta,
                                                 std::optional<int64_t> snapshot_id = std::nullopt);

  const std::shared_ptr<const Schema>& schema() const { return schema_; }
  // The snapshot read; nullopt when main has none.
  std::optional<int64_t> snapshot_id() const { return snapshot_id_; }
  const SnapshotFiles& files() const { return files_; }
  const DeleteIndex& deletes() const { return deletes_; }

  // Calls `emit` once per row group of every live data file with the row group's rows that no
  // delete removes (a batch on schema(); possibly empty). An error from `emit` stops the read and
  // is returned as it is.
  Status Read(const std::function<Status(const Batch&)>& emit);

 private:
  explicit TableScan(FileIO* io) : io_(io) {}
  FileIO* io_;
  std::shared_ptr<const Schema> schema_;
  std::optional<int64_t> snapshot_id_;
  SnapshotFiles files_;
  DeleteIndex deletes_;
};

}  // namespace ferry::lake
