#include "ferry/engine/ticker.h"

#include <algorithm>
#include <cstdio>

#include "ferry/base/log.h"
#include "ferry/base/log_setup.h"

namespace ferry::engine {
namespace {

bool IsLoad(const StreamTask& t) {
  return !t.incremental() && (!t.cdc() || t.cdc_backfill) && t.progress.plan.count > 0;
}

std::string Seconds(double s) {
  char buf[32];
  if (s < 120) {
    std::snprintf(buf, sizeof buf, "%.0f s", s);
  } else if (s < 7200) {
    std::snprintf(buf, sizeof buf, "%.0f min", s / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  }
  return buf;
}

}  // namespace

std::string ProgressText(const StreamTask& t, Clock::time_point now) {
  const int64_t rows = t.rows_read.load();
  const int64_t first = t.first_rows_ns.load();
  if (rows == 0 || first == 0) return "";
  const double elapsed =
      std::chrono::duration<double>(now.time_since_epoch() - Clock::duration(first)).count();
  const double rate = elapsed > 0.05 ? static_cast<double>(rows) / elapsed : 0;
  // The rows this run still has to read: the plan's estimate less what earlier runs committed
  // (as a share of the chunks) and what this run read.
  const int64_t planned = t.progress.plan.rows;
  const int64_t chunks = t.progress.plan.count;
  const int64_t landed = t.chunks_landed.load();
  std::string out = t.label + ": " + std::to_string(rows);
  if (planned > 0) {
    const double before = static_cast<double>(planned) *
                          static_cast<double>(t.report ? t.report->chunks_skipped : 0) /
                          static_cast<double>(std::max<int64_t>(chunks, 1));
    const double done =
        std::min(1.0, (before + static_cast<double>(rows)) / static_cast<double>(planned));
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.0f%%", done * 100);
    out += " of about " + std::to_string(planned - static_cast<int64_t>(before)) + " rows (" + pct +
           ")";
    const double left = static_cast<double>(planned) - before - static_cast<double>(rows);
    if (rate > 0 && left > 0) out += ", about " + Seconds(left / rate) + " left";
  } else {
    out += " rows";
  }
  if (rate > 0) out += ", " + std::to_string(static_cast<int64_t>(rate)) + " rows/s";
  out += ", " + std::to_string(landed) + " of " + std::to_string(chunks) + " chunks committed";
  return out;
}

ProgressTicker::ProgressTicker(const std::vector<StreamTask*>& loads, const SyncOptions& opts)
    : tty_(opts.progress_tty), interval_ms_(opts.progress_interval_ms) {
  for (const StreamTask* t : loads) {
    if (IsLoad(*t)) loads_.push_back(t);
  }
  if (loads_.empty() || (!tty_ && interval_ms_ <= 0)) return;
  thread_ = std::thread([this] { Run(); });
}

ProgressTicker::~ProgressTicker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (tty_) SetStatusLine("");
}

void ProgressTicker::Run() {
  // A terminal's line is redrawn twice a second; log lines come at the configured pace.
  const auto step = std::chrono::milliseconds(tty_ ? 500 : interval_ms_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, step, [this] { return stop_; })) {
    const Clock::time_point now = Clock::now();
    std::string line;
    for (const StreamTask* t : loads_) {
      if (t->chunks_landed.load() >= t->progress.plan.count) continue;  // done
      const std::string text = ProgressText(*t, now);
      if (text.empty()) continue;
      if (tty_) {
        line += (line.empty() ? "" : " | ") + text;
      } else {
        FERRY_LOG(kInfo) << "progress: " << text;
      }
    }
    if (tty_) SetStatusLine(line);
  }
}

}  // namespace ferry::engine
