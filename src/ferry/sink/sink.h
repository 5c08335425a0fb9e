// What the engine asks of a destination. Every sink stores, with each commit of data, the
// pipeline's progress marker for that table IN THE SAME ATOMIC STEP (an Iceberg catalog commit, a
// database transaction, a Redis MULTI/EXEC), so data and marker never disagree; the engine
// compares markers with the state file on restart (DESIGN.md section 1).
//
// A stream's commits come in two shapes:
//   - a load (full refresh, a CDC backfill): Write() rows, Commit() them to the load named by its
//     run id after each chunk, and Publish() the load, which replaces the table's rows at once;
//   - changes (incremental windows, CDC): WriteUpserts() and WriteDeleteKeys() by primary key,
//     Commit() with an empty load to apply them to the live table. Applying a change the table
//     already holds leaves it unchanged (upserts), which the snapshot handoff relies on.
//
// Thread-safety: a Sink may be shared by stream writers on several threads; each SinkStream is
// used by one thread (except Interrupt, which any thread may call).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/config/config.h"
#include "ferry/types/batch.h"

namespace ferry::sink {

using Json = nlohmann::json;

// Whether a commit already landed, decided from the marker the destination holds now (null when
// none). Asked when a commit's outcome is unknown (the connection died during it) and before a
// retry, so a commit is never applied twice.
using MarkerCheck = std::function<bool(const Json& marker)>;

struct CommitResult {
  bool already_landed = false;  // nothing was written: the marker showed the work was there
};

// A row scan of a destination table, for `ferry verify`.
class TableReader {
 public:
  virtual ~TableReader() = default;
  // The table's columns as the destination holds them.
  virtual const std::shared_ptr<const Schema>& schema() const = 0;
  // A short name of what was read ("snapshot 123"), for reports; may be empty.
  virtual std::string Version() const = 0;
  // Every row, in batches; may be called more than once (each call reads the same rows).
  virtual Status Read(const std::function<Status(const Batch&)>& each) = 0;
};

class SinkStream {
 public:
  virtual ~SinkStream() = default;
  // The schema batches must have: the source's columns, as the destination names them.
  virtual const std::shared_ptr<const Schema>& schema() const = 0;
  // The pipeline's marker for this table when the stream was opened (null when none).
  virtual Json Marker() const = 0;

  // Called before the first Write of a load (new or resumed) with its run id: the sink may set up
  // where the load's rows go and drop what older runs left.
  virtual Status StartLoad(const std::string& run) = 0;
  // A load's rows.
  virtual Status Write(const Batch& batch) = 0;
  // Rows replacing any row with the same key. A key appears at most once per commit.
  // kInvalidArgument when the table has no primary key.
  virtual Status WriteUpserts(const Batch& batch) = 0;
  // Deletes by key: only the key columns of `batch` are read.
  virtual Status WriteDeleteKeys(const Batch& batch) = 0;
  // Rows written since the last commit.
  virtual uint64_t pending_rows() const = 0;
  virtual bool HasPending() const = 0;
  // Loads: whether a commit now would leave files of the size readers want. A commit closes the
  // files written since the last one, so destinations that write files say no while their open
  // file is small: the engine then commits a load's chunks together (unless the stream's
  // chunk_rows is set). Destinations without files: always (every chunk commits on its own).
  virtual bool LoadCommitDue() const { return true; }
  // Whether a commit of the marker alone is cheap (a row update, not a new table version): then
  // the marker follows every checkpoint even for a table without changes in it, and a lost state
  // file is rebuilt from markers that are all current.
  virtual bool CheapMarkerCommits() const { return false; }

  // Commits what was written with `marker`, atomically. `load` is the run id of a load in flight
  // (its rows stay invisible until Publish), or empty for changes to the live table. `summary`:
  // short facts about the commit for sinks that keep them (Iceberg's snapshot summary).
  virtual Result<CommitResult> Commit(const std::string& load, const Json& marker,
                                      const std::map<std::string, std::string>& summary,
                                      const MarkerCheck& already_landed) = 0;
  // Makes the load's rows the table's rows, with `marker`, atomically.
  virtual Result<CommitResult> Publish(const std::string& load, const Json& marker,
                                       const MarkerCheck& already_landed) = 0;
  // Drops what was written but not committed (after a failure or a cancelled chunk).
  virtual void DiscardPending() = 0;
  // Called from another thread when a Commit or Publish runs past the pipeline's
  // checkpoint.timeout (e.g. blocked on a lock another session holds): asks the destination to
  // stop the statement in flight, so that the blocked call returns with an error. The engine then
  // abandons the checkpoint, and the stream is not used again. Sinks whose commits cannot block
  // (local files) do nothing.
  virtual void Interrupt() {}

  struct Totals {
    uint64_t rows = 0;
    uint64_t bytes = 0;  // bytes written, where the sink knows them
    uint64_t files = 0;  // files written (file-based sinks)
  };
  virtual Totals totals() const = 0;
};

class Sink {
 public:
  virtual ~Sink() = default;
  // A destination without partitions given partition_by terms.
  static Status NoPartitions(const std::string& stream, const std::string& destination) {
    return Status::InvalidArgument("stream " + stream +
                                   ": partition_by applies to Iceberg destinations; " +
                                   destination + " has no partitions. Remove partition_by");
  }
  // Opens the destination `cfg` describes (its type picks the sink) for `pipeline`; every key of
  // cfg.options is consumed, and an unknown key is an error naming it.
  // For `discover`, which does not open the destination: how `terms` (a stream's partition_by,
  // nullopt when none is set) would lay out its table over `source_schema` ("day(created_at),
  // bucket[16](id)"; "" when nothing is set); the error the sync would stop with otherwise.
  static Result<std::string> DescribePartitionTerms(
      const config::DestinationConfig& cfg, const std::string& stream,
      const std::optional<std::vector<std::string>>& terms, const Schema& source_schema);
  static Result<std::unique_ptr<Sink>> Open(config::DestinationConfig& cfg,
                                            const std::string& pipeline);

  // Where the data goes, without secrets.
  virtual std::string Describe() const = 0;
  // The delivery guarantee, in words, for `check`.
  virtual std::string Guarantee() const = 0;
  // The destination's name of a stream's table, qualified as users would write it.
  virtual std::string TableName(const std::string& stream) const = 0;

  // The partition terms of `stream`'s table ("day(created_at)", "bucket(16, id)"), told before
  // OpenStream; nullopt keeps the table's own layout. A destination without partitions refuses
  // terms (kInvalidArgument naming the fix); an empty list is accepted everywhere.
  virtual Status SetPartitioning(const std::string& stream,
                                 const std::optional<std::vector<std::string>>& terms) {
    if (!terms || terms->empty()) return Status::OK();
    return NoPartitions(stream, Describe());
  }
  // For `check`: how `stream`'s table is or would be partitioned for `source_schema` ("day(
  // created_at), bucket[16](id)"; "" when the destination has no partitions). Errors are those
  // the sync would stop with (a term that does not fit the columns).
  virtual Result<std::string> DescribePartitioning(const std::string& stream,
                                                   const Schema& source_schema) {
    (void)stream;
    (void)source_schema;
    return std::string();
  }
  // Opens (creating when missing) the table of `stream` for `source_schema`. `replacing`: the
  // stream's loads replace the table (full refresh), so any schema change is allowed; otherwise
  // only safe evolutions are (added columns, widened types), and anything else is an error.
  virtual Result<std::unique_ptr<SinkStream>> OpenStream(const std::string& stream,
                                                         const Schema& source_schema,
                                                         bool replacing) = 0;
  // The pipeline's marker for `stream`'s table, or null when the table or marker is missing.
  virtual Result<Json> ReadMarker(const std::string& stream) = 0;
  // A reader of the table's rows, or null when the table does not exist.
  virtual Result<std::unique_ptr<TableReader>> OpenReader(const std::string& stream) = 0;
  // For `check`: proves that the destination's storage takes what a sync does to it, beyond what
  // opening it proved (an object store: list, put, get and delete a probe object). Its error
  // names the missing permission or thing.
  virtual Status ProbeStorage() { return Status::OK(); }
};

}  // namespace ferry::sink
