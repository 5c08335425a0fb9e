// Running a pipeline: open the source and the destination, compare every stream's state with
// its marker, and run the dataflow graph that moves the rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/source/position.h"

#include "ferry/base/status.h"
#include "ferry/config/config.h"
#include "ferry/graph/graph.h"
#include "ferry/source/source.h"

namespace ferry::engine {

struct StreamReport {
  std::string stream;
  std::string table;  // namespace.table in the destination
  std::string action;
  uint64_t rows = 0;  // rows written by this run
  uint64_t files = 0;
  uint64_t bytes = 0;
  int64_t chunks_total = 0;
  int64_t chunks_skipped = 0;  // already committed before this run
  double seconds = 0;
};

struct SyncReport {
  std::vector<StreamReport> streams;
  double seconds = 0;
  // Non-empty when the sync stopped early at a consistent point and must run again at once
  // (e.g. a table's columns changed in the change log: the next run rediscovers it).
  std::string rerun;
  // Every source and the destination were reached (whatever failed later): a failure after this
  // is a connection lost mid-run, not a server that was never there.
  bool connected = false;
};

struct SyncOptions {
  graph::StopFlag* stop = nullptr;  // set by a signal handler to stop early
  size_t batch_rows = 65536;
  size_t edge_capacity = 4;     // batches buffered between source and each sink
  size_t parallel_streams = 2;  // sinks running at once
  bool print_progress = true;
  // CDC from a shared change log (PostgreSQL): keep reading past the log's end, on one
  // replication session, until `stop` is requested, committing at least every
  // `follow_commit_ms` while changes flow. Otherwise the read ends at the log's end as of the
  // start of the sync.
  bool follow = false;
  int64_t follow_commit_ms = 5000;
  // Progress of loads (full refreshes, backfills) while they run: a live line on a terminal
  // (`progress_tty`: stderr is one), else a log line per load every `progress_interval_ms`
  // (0: none).
  bool progress_tty = false;
  int64_t progress_interval_ms = 10000;
  // Set by RunSync from the pipeline (memory_limit, temp_dir): what a change-log read may hold
  // in memory before it spills, and where.
  int64_t memory_limit = 0;
  std::string spill_dir;
};

Status RunSync(config::PipelineConfig& cfg, const SyncOptions& opts, SyncReport* report);

// What `check` prints: the streams that would sync and the delivery guarantee.
struct CheckReport {
  std::string source;
  std::string destination;
  std::string guarantee;
  std::vector<source::StreamInfo> streams;
  std::vector<std::string> tables;        // destination table per stream
  std::vector<std::string> modes;         // sync mode per stream
  std::vector<std::string> partitioning;  // per stream: its table's partitions ("" for none)
  // Per stream: what its transforms do ("" for none), and, for a table several sources feed, how
  // their rows of equal keys meet.
  std::vector<std::string> transforms;
  std::vector<std::string> merged;
};
Status RunCheck(config::PipelineConfig& cfg, CheckReport* report);

// What `discover` prints: the sources' tables, and how the partition_by set for each would lay
// out its destination table ("" when none is set; the error text when a term does not fit).
struct DiscoverReport {
  std::vector<source::StreamInfo> streams;
  std::vector<std::string> partitioning;
  // Per stream: the destination table's name its settings give (`table`, `route:`,
  // `table_name`), and what its transforms do ("" for none).
  std::vector<std::string> destinations;
  std::vector<std::string> transforms;
};
Result<DiscoverReport> RunDiscover(config::PipelineConfig& cfg);

// What `ferry state` prints: per stream, the state file's entry, the table's marker, and what
// the next sync would do with them. Reads the source's table list and the destination's
// metadata only; writes nothing.
struct StreamStateReport {
  std::string stream;
  std::string table;
  std::string mode;
  nlohmann::json state;   // null when absent
  nlohmann::json marker;  // null when absent
  std::string restart;    // the decision, in words
  bool state_behind = false;
  // The kind of the source's change-log positions, to print them as the logs do (LSNs as
  // 0/16D8A38).
  source::Position::Kind position_kind = source::Position::Kind::kNone;
};
Status RunStateReport(config::PipelineConfig& cfg, std::vector<StreamStateReport>* out);

}  // namespace ferry::engine
