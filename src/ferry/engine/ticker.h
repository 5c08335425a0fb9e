// Progress of the loads a graph runs, while it runs: how many rows each full refresh or backfill
// has read of about how many, at what rate, its chunks committed of planned, and about how long
// is left. On a terminal a live status line (base/log_setup.h: SetStatusLine) that log lines
// scroll above and that piped output never sees; elsewhere one log line per load at a fixed
// pace. Internal to the engine.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ferry/engine/tasks.h"

namespace ferry::engine {

// "orders: 1200000 of about 5000000 rows (24%), 310000 rows/s, 3 of 10 chunks committed, about
// 12 s left" ("" while the load has read nothing this run).
std::string ProgressText(const StreamTask& t, Clock::time_point now);

class ProgressTicker {
 public:
  // `loads`: the tasks of the graph about to run; those that are loads are followed.
  ProgressTicker(const std::vector<StreamTask*>& loads, const SyncOptions& opts);
  ~ProgressTicker();  // stops, and takes the status line away
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  void Run();

  std::vector<const StreamTask*> loads_;
  bool tty_;
  int64_t interval_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ferry::engine
