// Sources: discover streams (tables), plan a stream's full refresh as chunks with deterministic
// ids, and read a chunk as columnar batches.
//
// Contract for implementations:
//   - Discover() names every table with its columns, source types, Iceberg types and primary key.
//     A table whose column types ferry cannot map is still listed, with the problem in `error`,
//     so that `discover` can show it; syncing it fails with that error.
//   - PlanChunks() is deterministic for the same table contents: the same bounds give the same ids.
//     The last chunk is open-ended so that rows added later are not missed on a resumed run.
//   - ReadChunk() emits batches of at most `batch_rows` rows; `emit` returns false to stop early
//     (cancellation). A value that cannot be converted losslessly is an error that names the table,
//     the column, the row and the fix: nothing is rounded or dropped silently.
//   - BeginSnapshot()/EndSnapshot() bracket a sync: sources that can read every stream at one
//     consistent point do so between them.
// Thread-safety: a Source is used by one thread at a time; snapshot readers (OpenSnapshotReader)
// let several threads read one snapshot.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/config/config.h"
#include "ferry/source/position.h"
#include "ferry/types/batch.h"

namespace ferry::source {

struct ColumnInfo {
  std::string name;
  std::string source_type;  // as declared in the source
  DataType type;            // the Iceberg type it maps to
  bool nullable = true;
  int pk_position = 0;  // 1-based position in the primary key; 0 = not a key column
  // Its place among the table's columns as the source discovered them, when a stream reads some
  // of them only (a transform's choice of columns: see TableOrdinal); -1: its own position.
  int ordinal = -1;
  // Why the column cannot be read (a type ferry cannot map, a column the user may not SELECT),
  // naming the column and the fix; a stream that leaves the column out reads the rest.
  std::string error;
};

struct StreamInfo {
  std::string ns;    // the source's schema ("main" for SQLite)
  std::string name;  // the table
  std::vector<ColumnInfo> columns;
  std::vector<std::string> primary_key;
  std::vector<std::string> cursor_candidates;
  int64_t estimated_rows = 0;
  std::string chunking;  // how full refresh splits it, e.g. "rowid ranges"
  // PostgreSQL: the table's REPLICA IDENTITY ("default", "index", "full", "nothing"); empty for
  // sources without one. CDC needs it to know what a change carries of the old row.
  std::string replica_identity;
  // The source's identity of the table as it is now (PostgreSQL: its relation OID, in decimal): a
  // table dropped and created again under the same name has another. Recorded with a stream's
  // progress, so that rows of one table are never taken for another's. Empty: the source has none.
  std::string table_id;
  std::string error;  // why the table cannot be synced, if it cannot (see also Problem())

  // Why the stream cannot be read as it is: the table's error and those of its columns (a
  // StreamInfo of some columns only has their errors only); empty when it can.
  std::string Problem() const;

  // Schema with ids 1..n in column order; key columns become identifier fields when all are
  // NOT NULL (Iceberg requires identifier fields to be required).
  Schema ToSchema() const;
};

// Where column `i` of `stream` is among the columns the source discovered: ReadChunk,
// ReadCursorRange and ReadChanges may be given a StreamInfo with some of the table's columns only
// (in the table's order, the key's and the cursor's among them), and read just those; sources
// index their own per-column facts by this.
inline size_t TableOrdinal(const StreamInfo& stream, size_t i) {
  const int o = stream.columns[i].ordinal;
  return o >= 0 ? static_cast<size_t>(o) : i;
}

// A chunk of a full refresh: rows whose chunk key k satisfies lo <= k < hi (a missing bound is
// open). Its id is derived from the stream and the bounds only.
struct Chunk {
  std::optional<int64_t> lo;
  std::optional<int64_t> hi;
  // The bounds over a key that is not one integer column (text, uuid, numeric, several columns):
  // lo_key <= k < hi_key in the source's order, each an array of the key's values in the source's
  // text form, one string per key column; null: open.
  nlohmann::json lo_key;
  nlohmann::json hi_key;
  std::string key;  // what the bounds are of, when the plan names it (see ChunkPlan::key)
  std::string Id(const std::string& stream) const;
};

// A full refresh's chunks over the chunk key, in one of three forms:
//   - a regular grid, where the keys are dense: chunk i covers [first + i*step, first +
//   (i+1)*step);
//   - boundaries taken from the data (`bounds`, strictly increasing), where the keys are sparse or
//     skewed: chunk i covers [bounds[i-1], bounds[i]), count = bounds.size() + 1;
//   - boundaries of a key of other types or of several columns (`key_bounds`, increasing in the
//     source's order, which only the source knows): chunk i covers [key_bounds[i-1],
//     key_bounds[i]) (Chunk::lo_key, hi_key), count = key_bounds.size() + 1.
// Either way chunk 0 is open below and the last chunk open above. A table read whole has count 1
// and no first. Deterministic: the same plan gives the same chunks and ids, so it can be stored
// (state file, marker) and rebuilt after a crash; a plan of boundaries holds one number per chunk.
struct ChunkPlan {
  std::optional<int64_t> first;
  int64_t step = 0;
  int64_t count = 1;
  std::vector<int64_t> bounds;
  std::vector<nlohmann::json> key_bounds;  // each an array of strings, one per key column
  // The rows the source counted or estimated when planning (0: unknown), for progress lines.
  int64_t rows = 0;
  // What the grid is over, for sources with several ways to split a table ("ctid", or a key
  // column's name); empty for a source's only way. Stored with the plan, so a resumed load reads
  // its chunks the way they were planned.
  std::string key;
  Chunk At(int64_t i) const;
};

// Rows of an incremental window by their cursor value c: lower < c (lower <= c when
// lower_closed) and c < upper (c <= upper when upper_closed); a null bound is open. A row whose
// cursor is NULL is in no range.
struct CursorRange {
  nlohmann::json lower;
  bool lower_closed = false;
  nlohmann::json upper;
  bool upper_closed = true;
  // [v, v]: the rows whose cursor equals v.
  static CursorRange At(const nlohmann::json& v) { return {v, true, v, true}; }
};

// The grid over integer keys lo..hi when it fits the data: `rows` rows (counted or estimated)
// make at most twice the chunks of `chunk_rows` rows that they need (dense keys; a grid costs
// nothing to plan). nullopt when it does not (sparse keys, far outliers, mass deletes): the
// source then takes boundaries from the data.
std::optional<ChunkPlan> GridPlan(int64_t lo, int64_t hi, int64_t rows, int64_t chunk_rows);

// Boundaries from `keys`, a sorted sample of the chunk key in which each key stands for `weight`
// rows: one every `chunk_rows` rows, distinct and increasing. The plan (`key`, `rows` set by the
// caller) has bounds.size() + 1 chunks; fewer than 2 give a plan of one chunk.
ChunkPlan BoundariesPlan(const std::vector<int64_t>& keys, double weight, int64_t chunk_rows);

// In a sorted sample of keys each standing for `weight` rows, every how many keys one starts a
// chunk (at least 1): the keys at positions n, 2n, ... (1-based) make chunks of about
// `chunk_rows` rows. BoundariesPlan's rule, for a source that picks the boundaries of a key only
// it can compare (in its own query, so that only the boundaries are sent).
int64_t BoundaryEvery(double weight, int64_t chunk_rows);

class Source {
 public:
  virtual ~Source() = default;
  virtual Result<std::vector<StreamInfo>> Discover() = 0;
  virtual Status BeginSnapshot() = 0;
  virtual Status EndSnapshot() = 0;
  // Parallel reads of one snapshot. Called between BeginSnapshot and EndSnapshot: another
  // reader, on a connection of its own, whose ReadChunk sees exactly the rows this source's
  // ReadChunk sees (PostgreSQL: it imports the exported snapshot). It is used by one other
  // thread and closed before EndSnapshot. nullptr when the source cannot share its snapshot
  // (SQLite; a PostgreSQL standby): chunks are then read one after another.
  virtual Result<std::unique_ptr<Source>> OpenSnapshotReader();
  virtual Result<ChunkPlan> PlanChunks(const StreamInfo& stream, int64_t chunk_rows) = 0;
  // Why a load planned earlier (`plan`, from the state file or a marker) can no longer be read as
  // planned (the table was reorganised: partitions added or removed, its key changed), or empty
  // when it can. Such a load starts over instead of resuming.
  virtual Result<std::string> StalePlan(const StreamInfo& stream, const ChunkPlan& plan);
  // Why the rows of the table `held` (a StreamInfo::table_id recorded with what the destination
  // holds) are not the stream's table's rows now, as a sentence (dropped and created again; for
  // PostgreSQL, partitions detached, dropped, or attached holding rows), or empty when they are.
  // The default: any other id is a table dropped and created again.
  virtual Result<std::string> TableChanged(const StreamInfo& stream, const std::string& held);
  // Batches are built on `schema`: the stream's columns in order, with the destination's field
  // ids (see StreamInfo::ToSchema for the layout).
  virtual Status ReadChunk(const StreamInfo& stream, const Chunk& chunk,
                           std::shared_ptr<const Schema> schema, size_t batch_rows,
                           const std::function<bool(Batch&)>& emit) = 0;
  // Incremental mode (see engine/window.h for how a window uses these). The largest value of the
  // cursor column above `above` (every value when `above` is null), as a JSON number or string,
  // or null when no row's cursor is above it: "above" as the window's reads compare (the column's
  // own order and collation). Sources without incremental support say so.
  virtual Result<nlohmann::json> MaxCursor(const StreamInfo& stream, const std::string& cursor,
                                           const nlohmann::json& above);
  // The rows whose cursor value lies in `range`, as batches on `schema`.
  virtual Status ReadCursorRange(const StreamInfo& stream, const std::string& cursor,
                                 const CursorRange& range, std::shared_ptr<const Schema> schema,
                                 size_t batch_rows, const std::function<bool(Batch&)>& emit);
  // The kind of position of this source's change log (position.h): how the engine reads the
  // positions its records hold. kNone: the source has no change log.
  virtual Position::Kind position_kind() const { return Position::Kind::kNone; }

  // CDC with one change log per stream (SQLite: change tables filled by triggers ferry installs).
  // Positions are per stream, increasing. Sources without such logs say so.
  //
  // Installs what capturing changes needs (idempotent). Called before BeginSnapshot, so that no
  // change made after the snapshot point is missed.
  virtual Status PrepareChangeCapture(const StreamInfo& stream);
  // The position of the stream's newest change (none when none), as seen by the snapshot.
  virtual Result<Position> ChangeLogEnd(const StreamInfo& stream);
  // The last change of every key with from < position <= to: upserts as full rows, deletes as
  // the rows deleted (every column as it was; key columns only where the log has no more: see
  // CheckDeleteImages). `emit(batch, deletes)`.
  virtual Status ReadChanges(const StreamInfo& stream, Position from, Position to,
                             std::shared_ptr<const Schema> schema, size_t batch_rows,
                             const std::function<bool(Batch&, bool deletes)>& emit);
  // Every change at or below `position` has landed in every sink and in the state file: the
  // source may forget it. Called outside the snapshot.
  virtual Status AcknowledgeChanges(const StreamInfo& stream, Position position);
  // Checks, before anything is installed or read, that the stream's changes can be captured
  // (server settings, privileges, keys); the error names the fix. Default: nothing to check.
  virtual Status CheckChangeCapture(const StreamInfo& stream);
  // Checks that the stream's change log carries every column's value of a deleted row (needed by
  // `deletes: soft`, which keeps the row as it was); the error names the fix. Default: it does
  // (ReadChanges' deletes then have every column set).
  virtual Status CheckDeleteImages(const StreamInfo& stream);
  // Checks (for `ferry check`) that the changes after `position`, where the stream's state
  // entry stands, can still be read: a log the server has already purged is an error naming the
  // fix. Default: nothing to check (the source keeps its changes until they are acknowledged).
  virtual Status CheckChangesRetained(const StreamInfo& stream, Position position);

  // CDC on ONE log shared by every stream (PostgreSQL logical replication): positions are log
  // positions (LSNs), and one pass over the log feeds every stream.
  virtual bool SharedChangeLog() const { return false; }
  // Whether ReadSharedChanges may be given SharedStream::info of some of the table's columns
  // only (see TableOrdinal), and then decodes just those; otherwise it is given every column.
  virtual bool SharedLogSelectsColumns() const { return false; }
  struct SharedStream {
    const StreamInfo* info = nullptr;
    std::shared_ptr<const Schema> schema;  // batches are built on it
    Position position;                     // the stream's changes up to here are in its table
    // The table whose changes are in it (a StreamInfo::table_id of when they were read); empty:
    // not known, taken to be info->table_id.
    std::string table_id;
    // Where the table's rows were read from the table `table_id` (a backfill's snapshot, as
    // SnapshotLogPosition gave it): changes committed before it of another table of the same
    // name are of an older one, not a replacement. None: nothing is known of older tables.
    Position table_since;
  };
  struct SharedRead {
    // Every change up to this position was emitted (none: no checkpoint was reached).
    Position position;
    // Why the read ended before the log's end: the pass must be run again after a
    // rediscovery (a table's columns changed), or empty.
    std::string restart;
  };
  // When a change-log read takes a checkpoint before its end. The source asks at every
  // transaction boundary, and between transactions while the log is quiet (`quiet`: a keepalive,
  // nothing held but the position), telling what it holds since the last checkpoint; the engine
  // answers (engine/coordinator.h: the pipeline's `checkpoint:` policy, and the requests of
  // merged tables' other sources), so every change-log source checkpoints alike.
  class CheckpointTrigger {
   public:
    struct Held {
      size_t changes = 0;  // distinct keys held
      size_t bytes = 0;    // what they take
      bool moved = false;  // the position moved on since the last checkpoint
      bool quiet = false;  // asked between transactions (a keepalive), not at a commit
      // At a commit: when the source committed that transaction (Unix microseconds; 0: not
      // known). The engine's replication lag is measured from it.
      int64_t commit_time_us = 0;
    };
    virtual ~CheckpointTrigger() = default;
    virtual bool Due(const Held& held) = 0;
    // A checkpoint was taken (whether Due asked for it or the read reached its end).
    virtual void Taken() = 0;
  };
  struct SharedReadOptions {
    size_t batch_rows = 65536;
    // Changes held past this many bytes (a large transaction's, or a checkpoint's) go to spill
    // files in `spill_dir` (source/change_spill.h); 0: all in memory.
    size_t memory_limit = 0;
    std::string spill_dir;
    // When to take a checkpoint before the end; none: only at the end.
    CheckpointTrigger* trigger = nullptr;
    // Follow the log past its end as of the call, until `stopping()` says true at a transaction
    // boundary: then the read ends with kCancelled, the changes since the last checkpoint not
    // taken (they are read again next time). Checkpoints come by the trigger (which, following,
    // moves every position on while no change comes). Otherwise the read ends at the log's end
    // as of the call.
    bool follow = false;
    std::function<bool()> stopping;
  };
  // Reads the log from the lowest stream position. Each stream receives the last change of every
  // key since the previous checkpoint (`emit(stream index, batch, deletes)`: upserts as full
  // rows, deletes with the key columns set), then `checkpoint(position, table_ids)` at a
  // transaction boundary: every change up to `position` has been emitted, and table_ids[i] is the
  // table whose changes stream i holds up to there (as SharedStream::table_id). A stream's changes
  // at or below its own position are skipped. Callbacks return false to stop.
  //
  // A stream's table that is not the table its changes came from (dropped and created again
  // under its name) stops the read once the old table's changes are emitted and checkpointed, with
  // an error naming the fix, unless the source is told to go on (PostgreSQL: truncate: ignore).
  virtual Result<SharedRead> ReadSharedChanges(
      const std::vector<SharedStream>& streams, const SharedReadOptions& options,
      const std::function<bool(size_t stream, Batch&, bool deletes)>& emit,
      const std::function<bool(Position position, const std::vector<std::string>& table_ids)>&
          checkpoint);
  // Every stream's changes up to `position` are in its table and in the state file: the log may
  // forget them (PostgreSQL: the slot's confirmed position advances).
  virtual Status AcknowledgeSharedLog(Position position);
  // The same, told while ReadSharedChanges runs, from any thread, after each checkpoint: the log
  // learns it without waiting for the end of the read (PostgreSQL: the slot's confirmed and
  // restart positions move on during a long read, so the server keeps less WAL and a later read
  // decodes less of it again). By default nothing is done until AcknowledgeSharedLog.
  virtual void ConfirmSharedLog(Position position);
  // For verify: whether the shared log holds changes of `stream`'s table committed after
  // `position` (what its destination table holds), which a sync would still apply. Read without
  // consuming anything; it may take a while when much of the log is unread. kNone only when
  // certain: nothing of the table's after `position` (or nothing at all) is in the log.
  struct PendingChanges {
    enum class Kind { kNone, kSome, kUnknown };
    Kind kind = Kind::kUnknown;
    Position log_end;    // how far the log reaches, as looked at
    std::string detail;  // what was looked at, or why it is not known
  };
  virtual Result<PendingChanges> SharedLogPending(const StreamInfo& stream, Position position);

  // A look at a shared change log from a connection of its own, while a read runs on the
  // source's: for the metrics (ferry_log_lag_bytes, ferry_log_retained_bytes) and the alarms of
  // the pipeline's alerts: section. Its own settings, connection and thread; the source may be
  // closed before it.
  struct LogStatus {
    // Bytes of log between `confirmed` (what every stream has committed) and the log's end.
    std::optional<uint64_t> behind_bytes;
    // Bytes the server keeps for ferry (PostgreSQL: WAL from the slot's restart_lsn on); none
    // where the server keeps its log by its own retention (MySQL).
    std::optional<uint64_t> retained_bytes;
    std::string retained_by;  // what keeps it, for messages ("replication slot ferry_shop")
  };
  class LogWatch {
   public:
    virtual ~LogWatch() = default;
    // `confirmed`: none when no stream has a position yet.
    virtual Result<LogStatus> Look(Position confirmed) = 0;
    // Writes the source's heartbeat (heartbeat_statement), so that a server where nothing else
    // writes still moves the log's end on; false when the source has none.
    virtual Result<bool> Heartbeat() { return false; }
    // What frees what the server keeps, for the retained_wal alarm's message.
    virtual std::string RetainedFix() const { return ""; }
  };
  // nullptr: the source has no shared log to look at.
  virtual Result<std::unique_ptr<LogWatch>> OpenLogWatch() { return std::unique_ptr<LogWatch>(); }

  // CDC on a shared log: where in the log the snapshot of BeginSnapshot stands (every
  // transaction it sees committed before it); none when not known.
  virtual Position SnapshotLogPosition() const { return {}; }

  // The guarantee this source can give for a full refresh, for `check`.
  virtual std::string Describe() const = 0;
};

// A kind of source, by its `type:` in the pipeline file. The list is in connectors.cc: a new
// source adds its folder and one line there.
struct SourceType {
  const char* name;
  Result<std::unique_ptr<Source>> (*open)(config::SourceConfig& cfg);
};
const std::vector<SourceType>& SourceTypes();

// Opens the source named by `cfg.type` and validates its type-specific keys.
Result<std::unique_ptr<Source>> OpenSource(config::SourceConfig& cfg);

}  // namespace ferry::source
