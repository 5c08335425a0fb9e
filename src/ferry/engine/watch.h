// Looks at every source's shared change log while a sync runs, from a connection of its own
// (Source::OpenLogWatch), every `alerts.check_interval`: how far the log's end is past what every
// stream has committed and what the server keeps for ferry (metrics ferry_log_lag_bytes and
// ferry_log_retained_bytes), the alarms of the pipeline's `alerts:` section, and the source's
// heartbeat statement every `alerts.heartbeat_interval`. Internal to the engine.
//
// Alarms (docs/operations.md): retained_wal (the server keeps more than max_retained_wal for
// ferry; MySQL: the binary log past ferry's position), stall (the committed position has not
// moved for stall_after while the log has), lag (ferry_replication_lag_seconds above max_lag).
// Each fires once, with a warning naming the fix, and clears with a line saying so;
// ferry_alert_active is 1 while it fires. `on_retained_wal: stop` also stops the sync: its error
// is `error()`.
//
// A look that fails (the server is away) is logged at debug level and tried at the next tick:
// the sync's own connections say what is wrong.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ferry/engine/tasks.h"

namespace ferry::engine {

class LogWatcher {
 public:
  // `runs`: the sources whose shared change logs feed cdc streams. `stop` is requested when an
  // alarm stops the sync.
  LogWatcher(const config::PipelineConfig& cfg, const std::vector<SourceRun*>& runs,
             Recorder* recorder, graph::StopFlag* stop);
  ~LogWatcher();  // stops looking
  LogWatcher(const LogWatcher&) = delete;
  LogWatcher& operator=(const LogWatcher&) = delete;

  // The alarm that stopped the sync, or OK.
  Status error();

 private:
  using Clock = std::chrono::steady_clock;
  struct Watched {
    SourceRun* run = nullptr;
    std::unique_ptr<source::Source::LogWatch> watch;
    metrics::SourceSeries series;
    std::array<prometheus::Gauge*, 3> alerts{};
    std::array<bool, 3> firing{};
    std::optional<source::Position> floor;  // as last looked at
    Clock::time_point floor_since = Clock::now();
    std::optional<uint64_t> behind_then;  // behind_bytes when the floor last moved
    Clock::time_point heartbeat_at = Clock::now();
  };
  void Run();
  void Look(Watched& w);
  // Fires or clears alarm `a` of `w`; `message` says why and what to do.
  void Set(Watched& w, metrics::Alert a, bool on, const std::string& message);

  const config::AlertsConfig alerts_;
  const std::string pipeline_;
  Recorder* recorder_;
  graph::StopFlag* stop_;
  std::vector<Watched> watched_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  Status error_;       // guarded by mu_
  std::thread thread_;
};

}  // namespace ferry::engine
