// The work of one sync, shared by its planning, its graph nodes and its commands: the sources
// open for it, each stream's task and each destination table's, and the state file's recorder.
// Internal to the engine.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ferry/base/fault.h"
#include "ferry/engine/coordinator.h"
#include "ferry/engine/progress.h"
#include "ferry/engine/streams.h"
#include "ferry/engine/sync.h"
#include "ferry/engine/window.h"
#include "ferry/graph/graph.h"
#include "ferry/metrics/metrics.h"
#include "ferry/sink/sink.h"
#include "ferry/source/source.h"
#include "ferry/state/state.h"

namespace ferry::engine {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Records acknowledged progress in the state file, one writer at a time.
class Recorder {
 public:
  Recorder(state::StateStore* store, state::PipelineState st)
      : store_(store), state_(std::move(st)) {}
  struct Entry {
    std::string ns;
    std::string stream;
    Json progress;
  };
  Status Record(const std::string& ns, const std::string& stream, const Json& progress) {
    return RecordAll({{ns, stream, progress}});
  }
  // Several streams' progress in one write (the parts of a merged table commit together).
  Status RecordAll(const std::vector<Entry>& entries) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& e : entries) state_.SetStream(e.ns, e.stream, e.progress);
    FERRY_RETURN_IF_ERROR(store_->Save(state_).WithContext("writing the state file"));
    FaultPoint("state.after_write");
    return Status::OK();
  }
  Json Get(const std::string& ns, const std::string& stream) {
    std::lock_guard<std::mutex> lock(mu_);
    return state_.Stream(ns, stream);
  }

 private:
  std::mutex mu_;
  state::StateStore* store_;
  state::PipelineState state_;  // guarded by mu_
};

// One source of the pipeline, open for this sync.
struct SourceRun {
  const config::SourceConfig* cfg = nullptr;
  std::unique_ptr<source::Source> src;
  std::vector<source::StreamInfo> streams;
  // Each stream's transforms (nullptr: none), and its destination table's name (DestinationName).
  std::vector<std::shared_ptr<transform::Transform>> transforms;
  std::vector<std::string> destinations;
  // Per-stream change logs read this sync: acknowledged once the sync succeeded.
  std::vector<std::pair<source::StreamInfo, source::Position>> to_acknowledge;
  source::Source::SharedRead read;  // the shared change log's read, if any
  // When its change log checkpoints, and what it may forget (a merged table's checkpoint that
  // waits for this source's barrier asks it for one at the next transaction boundary).
  Coordinator coordinator;
  std::string label;  // its `source` label in metrics: its name, else its type
};

// One stream's work in this sync: a source's table, or its part of a merged destination table.
struct StreamTask {
  source::StreamInfo info;
  config::StreamConfig settings;
  SourceRun* source = nullptr;
  std::string label;     // for messages: the stream, prefixed by its source's name when named
  std::string state_ns;  // the namespace its state file entry is keyed by
  std::shared_ptr<sink::SinkStream> out;  // shared by the parts of a merged table
  // Its transforms (nullptr: rows pass as read). Loads, windows and per-stream change logs read
  // `read_info()`'s columns into batches on `read_schema()`; a shared change log decodes every
  // column into batches on `change_schema()`. Transformed() turns them into the sink's batches.
  std::shared_ptr<transform::Transform> transform;
  const source::StreamInfo& read_info() const { return transform ? transform->read_info() : info; }
  std::shared_ptr<const Schema> read_schema() const {
    return transform ? transform->read_schema() : out->schema();
  }
  std::shared_ptr<const Schema> change_schema() const {
    return transform ? transform->table_schema() : out->schema();
  }
  std::string destination;       // the destination's name of its table (the sink's `stream`)
  Json marker;                   // its marker as the table holds it (its part, in a merged table's)
  std::string marker_part;       // the name of its part in a merged table's marker (MarkerPart)
  FullRefreshProgress progress;  // full refresh
  IncrementalProgress window;    // incremental: the window this sync reads (its id and start)
  WindowBounds bounds;           // incremental: what it reads (engine/window.h)
  CdcProgress changes;           // cdc after the backfill: the changes this sync applies
  bool cdc_backfill = false;     // cdc stream whose full refresh is new or in flight
  bool shared_log = false;       // cdc stream read from the source's shared change log
  source::Position report_from;  // shared log: the position this sync started from
  int64_t commits = 0;           // cdc: commits of changes made by this sync
  bool incremental() const { return settings.mode == config::SyncMode::kIncremental; }
  bool cdc() const {
    return settings.mode == config::SyncMode::kCdc || settings.mode == config::SyncMode::kCdcOnly;
  }
  // Streams whose commits are upserts and deletes by key rather than appends of a load.
  bool keyed() const { return incremental() || (cdc() && !cdc_backfill); }
  std::shared_ptr<graph::Edge> edge;
  StreamReport* report = nullptr;
  Clock::time_point start;
  // Live, for progress lines (engine/ticker.h): rows handed to the sink by this run, when the
  // first of them came (steady clock, ns; 0: none yet), chunks of the load committed (this run's
  // and earlier runs').
  std::atomic<int64_t> rows_read{0};
  std::atomic<int64_t> first_rows_ns{0};
  std::atomic<int64_t> chunks_landed{0};
  metrics::StreamSeries series;  // its metrics
};

// A destination table and the streams that feed it: one, or several (merged: one per source, or
// several tables of one source routed into it). The parts
// of a merged table commit together, each checkpoint with every part's progress in one marker.
struct TableTask {
  std::string table;
  std::vector<StreamTask*> parts;
  std::shared_ptr<graph::Edge> edge;  // what its sink receives (merged: aligned)
  bool merged = false;  // several sources, or several streams of one source: a marker per part
  bool active = true;   // something to do this sync
  metrics::TableSeries series;  // its metrics
};

// Counts a batch handed to a stream's sink, for progress lines and metrics.
inline void CountRows(StreamTask* t, const Batch& b) {
  const size_t rows = b.num_rows();
  if (t->series.rows_read != nullptr) {
    t->series.rows_read->Increment(static_cast<double>(rows));
    t->series.bytes_read->Increment(static_cast<double>(b.DataBytes()));
  }
  if (t->rows_read.fetch_add(static_cast<int64_t>(rows)) == 0) {
    int64_t none = 0;
    t->first_rows_ns.compare_exchange_strong(none, Clock::now().time_since_epoch().count());
  }
}

// A batch the stream's source read (`in`, left empty) through its transforms, on the sink's
// schema. `removed` (keyed writes only, else nullptr) gets the rows its filter rejects, to delete.
Result<std::unique_ptr<Batch>> Transformed(const StreamTask& t, Batch& in, bool deletes,
                                           Batch* removed);

// Hands a batch to a stream's sink (the batch's contents move; `b` is left empty), through the
// stream's transforms: rows a keyed stream's filter rejects go as deletes. A transform's error
// (a computed value that does not fit its column) is kept in `*error` and stops the stream.
bool Forward(StreamTask* t, Batch& b, bool deletes, const SyncOptions& opts, Status* error);

// The state file keys a stream by namespace and name; a named source's streams are kept apart.
std::string StateNamespace(const config::SourceConfig& sc, const source::StreamInfo& info);

// kInvalidArgument when the destination tables `a` and `b` (a stream's destination names) differ
// but the destination `where` names both `table` (Kafka's topic names): they would merge.
Status CheckDistinctTables(const std::string& table, const std::string& a, const std::string& b,
                           const std::string& where);

// Two streams that map to one destination table must come from different sources (several
// sources merged into it) and have the same mode, columns and key.
Status CheckSameTable(const std::string& table, const config::SourceConfig& sa,
                      const source::StreamInfo& a, const Schema& schema_a,
                      const config::SourceConfig& sb, const source::StreamInfo& b,
                      const Schema& schema_b);

// Opens every source of the pipeline and selects the streams it syncs (key overrides applied).
// `prepare_capture`: change capture is installed for cdc streams (before any snapshot point, so
// that no later change is missed).
Result<std::vector<std::unique_ptr<SourceRun>>> OpenSources(config::PipelineConfig& cfg,
                                                            bool prepare_capture);

}  // namespace ferry::engine
