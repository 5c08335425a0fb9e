// What a running ferry says about itself in numbers: the process's series in the Prometheus
// registry (prometheus-cpp's core: counters, gauges, histograms) and their exposition text. Every
// series is named `ferry_...` in base units (`_total`, `_seconds`, `_bytes`) with the labels
// `pipeline`, and where they apply `source`, `stream`, `table`; never a secret. The list, with
// what each series means, is docs/operations.md.
//
// One registry per process (`Metrics::Get()`); it always counts, whether or not a server exports
// it (metrics/server.h): an update is an atomic add on a series resolved once per stream, table
// or source of a sync (the `...Series` handles), never a lookup by labels per batch.
//
// Thread-safe: the handles may be updated from any thread; `Text()` may run at the same time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace ferry::metrics {

// Seconds since the Unix epoch, now (for the *_timestamp_seconds gauges).
double UnixNow();

// Per stream (a source's table): what was read and committed, and a load's plan.
struct StreamSeries {
  prometheus::Counter* rows_read = nullptr;            // ferry_rows_read_total
  prometheus::Counter* bytes_read = nullptr;           // ferry_read_bytes_total
  prometheus::Counter* rows_committed = nullptr;       // ferry_rows_committed_total
  prometheus::Gauge* load_chunks_planned = nullptr;    // ferry_load_chunks_planned
  prometheus::Gauge* load_chunks_committed = nullptr;  // ferry_load_chunks_committed
  prometheus::Gauge* load_rows_planned = nullptr;      // ferry_load_rows_planned
};

// How a checkpoint of a table ended.
enum class Checkpoint { kStarted = 0, kCompleted, kAbandoned, kFailed };

// Per destination table: its commits and checkpoints.
struct TableSeries {
  prometheus::Counter* bytes_committed = nullptr;     // ferry_committed_bytes_total
  prometheus::Histogram* commit_seconds = nullptr;    // ferry_commit_duration_seconds
  std::array<prometheus::Counter*, 4> checkpoints{};  // ferry_checkpoints_total{outcome}
  prometheus::Gauge* last_checkpoint = nullptr;       // ferry_last_checkpoint_timestamp_seconds
  void Count(Checkpoint outcome) const { checkpoints[static_cast<size_t>(outcome)]->Increment(); }
};

// Per source of the pipeline: how far behind its change log the destination is.
struct SourceSeries {
  prometheus::Gauge* lag_seconds = nullptr;         // ferry_replication_lag_seconds
  prometheus::Gauge* log_lag_bytes = nullptr;       // ferry_log_lag_bytes
  prometheus::Gauge* retained_bytes = nullptr;      // ferry_log_retained_bytes
  prometheus::Gauge* confirmed_moved = nullptr;     // ferry_log_confirmed_timestamp_seconds
  prometheus::Counter* checkpoints_read = nullptr;  // ferry_log_checkpoints_total
};

// The alarms of docs/operations.md, one gauge each per source (1 while it fires).
enum class Alert { kRetainedWal = 0, kStall, kLag };
inline constexpr std::array<const char*, 3> kAlertNames = {"retained_wal", "stall", "lag"};

class Metrics {
 public:
  static Metrics& Get();

  StreamSeries Stream(const std::string& pipeline, const std::string& source,
                      const std::string& stream, const std::string& table);
  TableSeries Table(const std::string& pipeline, const std::string& table);
  SourceSeries Source(const std::string& pipeline, const std::string& source);
  prometheus::Gauge& AlertGauge(const std::string& pipeline, const std::string& source, Alert a);
  // ferry_retries_total: rounds that failed retryably and were tried again.
  prometheus::Counter& Retries(const std::string& pipeline);
  // ferry_syncs_total{outcome="succeeded"|"failed"|"stopped"}: sync rounds run.
  prometheus::Counter& Syncs(const std::string& pipeline, const std::string& outcome);
  // ferry_last_sync_timestamp_seconds: when the last round ended successfully.
  prometheus::Gauge& LastSync(const std::string& pipeline);

  // When any table's checkpoint last completed in this process (Unix time; 0: none yet), for
  // readiness.
  void NoteCheckpoint() { last_checkpoint_any_.store(UnixNow()); }
  double LastCheckpoint() const { return last_checkpoint_any_.load(); }

  // Every series in the Prometheus text format (version 0.0.4), with the process's own
  // (process_resident_memory_bytes, process_cpu_seconds_total, process_start_time_seconds,
  // process_open_fds) read from /proc at the call.
  std::string Text();

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

 private:
  Metrics();

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* rows_read_;
  prometheus::Family<prometheus::Counter>* bytes_read_;
  prometheus::Family<prometheus::Counter>* rows_committed_;
  prometheus::Family<prometheus::Gauge>* chunks_planned_;
  prometheus::Family<prometheus::Gauge>* chunks_committed_;
  prometheus::Family<prometheus::Gauge>* rows_planned_;
  prometheus::Family<prometheus::Counter>* bytes_committed_;
  prometheus::Family<prometheus::Histogram>* commit_seconds_;
  prometheus::Family<prometheus::Counter>* checkpoints_;
  prometheus::Family<prometheus::Gauge>* last_checkpoint_;
  prometheus::Family<prometheus::Gauge>* lag_seconds_;
  prometheus::Family<prometheus::Gauge>* log_lag_bytes_;
  prometheus::Family<prometheus::Gauge>* retained_bytes_;
  prometheus::Family<prometheus::Gauge>* confirmed_moved_;
  prometheus::Family<prometheus::Counter>* log_checkpoints_;
  prometheus::Family<prometheus::Gauge>* alerts_;
  prometheus::Family<prometheus::Counter>* retries_;
  prometheus::Family<prometheus::Counter>* syncs_;
  prometheus::Family<prometheus::Gauge>* last_sync_;
  double start_time_ = 0;
  std::atomic<double> last_checkpoint_any_{0};
};

}  // namespace ferry::metrics
