// The engine's side of a source's checkpoints: when a change-log read takes one (the pipeline's
// `checkpoint:` policy, or another source of a merged table waiting at its barrier), and what the
// source may forget once checkpoints are recorded. One per source of a sync; every change-log
// source asks it through source::Source::CheckpointTrigger, so all checkpoint alike.
//
// The order it keeps (graph/graph.h): a source emits a barrier at a consistent point; each sink
// commits what it holds with its marker; the sink node records the progress in the state file;
// only then does the coordinator let the source forget the changes up to the lowest position every
// stream of the source has recorded (a backfill in flight counts with its cdc_start).
//
// Thread-safety: Due and Taken come from the source's reading thread; Request from any thread
// (an aligning node); Confirm from sink threads (callers serialise it); Acknowledge after the
// graphs have run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "ferry/base/status.h"
#include "ferry/config/config.h"
#include "ferry/metrics/metrics.h"
#include "ferry/source/source.h"

namespace ferry::engine {

struct SourceRun;
class Recorder;

class Coordinator final : public source::Source::CheckpointTrigger {
 public:
  Coordinator() = default;

  // The policy of the change-log read about to start; following the log, checkpoints come at
  // least every `follow_commit_ms` and move a quiet log's position on.
  void Start(const config::CheckpointConfig& policy, bool follow, int64_t follow_commit_ms);

  bool Due(const Held& held) override;
  void Taken() override;

  // A checkpoint is wanted at the source's next transaction boundary, whatever the policy says.
  void Request() { requested_.store(true); }
  // Forgets requests (those made while the source's loads ran).
  void ClearRequests() { requested_.store(false); }

  // Metrics: the source's series (ferry_replication_lag_seconds and its kin).
  void SetSeries(const metrics::SourceSeries& series) { series_ = series; }
  // The read took a checkpoint ending at `position` (the source's thread, after Due): it is
  // remembered with the commit time of the newest transaction in it, for the lag once it lands.
  void Checkpointed(source::Position position);
  // Every stream of the source holds `floor` in its table and in the state file (any thread):
  // the lag is that of the newest checkpoint at or below it.
  void Landed(source::Position floor);
  // The highest lag a landing showed since the last call (0 when none landed): a checkpoint that
  // lands late and is followed at once by quiet ones still raises the lag alarm.
  double TakeLagPeak();

  // How far `run`'s shared change log may be forgotten: up to what EVERY cdc stream of the source
  // has in its table and in the state file, including backfills still in flight (their changes
  // start at cdc_start), and at most `upper`: none while a stream has no position yet; nullopt
  // when no stream and no upper bound limit it.
  static std::optional<source::Position> Floor(const SourceRun& run, Recorder* recorder,
                                               std::optional<source::Position> upper);

  // After a checkpoint is in the state file: the source's log may forget what every stream holds
  // (during the read).
  static void Confirm(SourceRun& run, Recorder* recorder);

  // After the sync: every change up to what the state file holds may be forgotten — each stream's
  // own change log, and the shared log up to the floor of the read's end.
  static Status Acknowledge(SourceRun& run, Recorder* recorder);

 private:
  using Clock = std::chrono::steady_clock;
  config::CheckpointConfig policy_;
  bool follow_ = false;
  Clock::time_point last_ = Clock::now();
  std::atomic<bool> requested_{false};
  metrics::SourceSeries series_;
  int64_t newest_commit_us_ = 0;  // the source's thread: since the last checkpoint
  std::mutex mu_;
  std::deque<std::pair<source::Position, int64_t>> taken_;  // guarded by mu_
  source::Position landed_;                                 // guarded by mu_
  double lag_peak_ = 0;                                     // guarded by mu_
};

}  // namespace ferry::engine
