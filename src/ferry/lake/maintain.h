// Table maintenance (`ferry maintain`): compaction of main's data files and expiry of old
// snapshots. Neither changes what a reader of the table sees: the rows of main stay the same, the
// schema and the properties (ferry's markers `ferry.marker.*` included) are not touched, and
// every branch and tag keeps its head.
//
// Compaction (CompactTable): plans groups of data files of main's head — files below
// small_file_ratio x target_file_bytes, and files that delete files apply to — reads them with
// the Parquet reader, drops the rows their equality deletes (data sequence number strictly lower
// than the delete file's) and position deletes (data sequence number <= the delete file's, same
// file_path and pos) remove, writes the rest into new files of up to target_file_bytes, and
// commits ONE snapshot with operation "replace" that marks the rewritten data files DELETED, drops
// the delete files that no longer apply to any live data file, and adds the new files with their
// data sequence number set to the sequence number of the snapshot the compaction started from.
// So equality deletes committed by a sync while the compaction ran (higher sequence numbers)
// still apply to the rewritten rows. The commit is the table's optimistic commit: on every attempt
// the fresh head is read, and a group whose input files are no longer all live (a concurrent full
// refresh or compaction removed one), or that a concurrent position delete may reference, is given
// up (its new files are deleted); the others commit.
//
// Expiry (ExpireSnapshots): removes, in one commit, the snapshots older than the maximum age that
// are not among the newest min-snapshots-to-keep of a branch, not a branch or tag head, and then
// deletes the manifest lists, manifests, data and delete files that only the removed snapshots
// referenced — never a file a remaining snapshot references. `snapshot-log` loses the entries of
// removed snapshots (and the history before them, as Java does).
//
// Memory: compaction holds one input row group and one output row group at a time, plus every
// key of the equality deletes and every position of the position deletes it applies.
// Errors: a data file that cannot be read (kCorruption, kNotSupported from the reader, naming the
// file), commit errors as Table's; kCommitStateUnknown leaves every written file in place.
// Thread-safety: one call at a time per Table object.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "ferry/base/status.h"
#include "ferry/format/parquet/writer.h"
#include "ferry/lake/table.h"

namespace ferry::lake {

struct CompactionOptions {
  // New files are closed at this size; files below small_file_ratio of it are "small".
  uint64_t target_file_bytes = 512ull << 20;
  double small_file_ratio = 0.75;
  // Small files with no deletes are rewritten only when there are at least this many of them
  // (rewriting one clean small file into one file gains nothing).
  size_t min_input_files = 2;
  // Input bytes per group: the unit that commits or is given up together.
  uint64_t max_group_bytes = 8ull << 30;
  parquet::WriterOptions parquet;
  // Test hook: runs after the new files are written, before the commit.
  std::function<void()> before_commit;
};

struct CompactionReport {
  bool committed = false;
  std::optional<int64_t> snapshot_id;
  int64_t starting_sequence_number = 0;
  // Main's live files before and after (after == before when nothing was committed).
  int64_t data_files_before = 0;
  int64_t delete_files_before = 0;
  int64_t data_files_after = 0;
  int64_t delete_files_after = 0;
  int64_t records_before = 0;  // records in main's data files (before deletes)
  int64_t records_after = 0;
  int64_t bytes_before = 0;  // data and delete files
  int64_t bytes_after = 0;
  // What the committed groups did.
  int64_t rewritten_data_files = 0;
  int64_t written_data_files = 0;
  int64_t removed_delete_files = 0;
  int64_t rows_read = 0;
  int64_t rows_written = 0;
  int64_t rows_dropped = 0;  // removed by the deletes applied
  int64_t groups_planned = 0;
  int64_t groups_given_up = 0;  // their inputs changed concurrently
};

Result<CompactionReport> CompactTable(Table& table, const CompactionOptions& options);

struct ExpireOptions {
  // Defaults: the table properties history.expire.max-snapshot-age-ms (5 days) and
  // history.expire.min-snapshots-to-keep (1); a branch's own settings in its ref come next; these
  // fields, when set, override both.
  std::optional<int64_t> max_snapshot_age_ms;
  std::optional<int64_t> min_snapshots_to_keep;
  int64_t now_ms = 0;  // 0: the clock
};

struct ExpireReport {
  bool committed = false;
  int64_t snapshots_before = 0;
  int64_t snapshots_expired = 0;
  int64_t manifest_lists_deleted = 0;
  int64_t manifests_deleted = 0;
  int64_t data_files_deleted = 0;
  int64_t delete_files_deleted = 0;
  int64_t bytes_deleted = 0;      // of data and delete files
  int64_t files_not_deleted = 0;  // deletions that failed (logged; left as orphans)
};

Result<ExpireReport> ExpireSnapshots(Table& table, const ExpireOptions& options);

// Orphan removal (RemoveOrphanFiles): deletes the files under the table's location that its
// metadata does not reference — neither the current metadata file nor one in its metadata-log,
// nor a manifest list, manifest, data or delete file of any snapshot (of any branch or tag), nor
// a statistics file — and that were last written before `older_than_ms` ago: files of crashed
// or failed writers (a local writer's temporary files included). The safety age keeps the files
// of a writer still running (written, not yet committed) out of reach: it must exceed the
// longest sync. On an object store it also aborts the multipart uploads under the table's
// location begun before that age (a killed writer's parts). A file whose deletion fails is
// counted and logged, and the rest go on.
struct OrphanOptions {
  int64_t older_than_ms = 3LL * 24 * 3600 * 1000;  // Iceberg's default: 3 days
  int64_t now_ms = 0;                              // 0: the clock
  bool dry_run = false;                            // report, delete nothing
};

struct OrphanReport {
  int64_t files_listed = 0;
  int64_t files_referenced = 0;
  int64_t orphans_too_young = 0;  // unreferenced, but newer than the safety age: kept
  int64_t orphans_deleted = 0;    // (found, in a dry run)
  int64_t bytes_deleted = 0;
  int64_t files_not_deleted = 0;
  int64_t uploads_aborted = 0;
};

Result<OrphanReport> RemoveOrphanFiles(Table& table, const OrphanOptions& options);

}  // namespace ferry::lake
