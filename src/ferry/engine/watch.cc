#include "ferry/engine/watch.h"

#include <algorithm>
#include <cstdio>

#include "ferry/base/log.h"

namespace ferry::engine {
namespace {

std::string Bytes(uint64_t n) {
  char buf[32];
  const double d = static_cast<double>(n);
  if (n >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", d / (1 << 30));
  } else if (n >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", d / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
  }
  return buf;
}

std::string Duration(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(ms) / 1000.0);
  return buf;
}

}  // namespace

LogWatcher::LogWatcher(const config::PipelineConfig& cfg, const std::vector<SourceRun*>& runs,
                       Recorder* recorder, graph::StopFlag* stop)
    : alerts_(cfg.alerts), pipeline_(cfg.name), recorder_(recorder), stop_(stop) {
  for (SourceRun* run : runs) {
    auto watch = run->src->OpenLogWatch();
    if (!watch.ok()) {
      FERRY_LOG(kWarn) << (run->cfg->name.empty() ? "the source" : "source " + run->cfg->name)
                       << ": its change log cannot be looked at from another connection ("
                       << watch.status().ToString()
                       << "); ferry_log_lag_bytes and the alerts: alarms are not kept for it";
      continue;
    }
    if (!*watch) continue;
    Watched w;
    w.run = run;
    w.watch = std::move(*watch);
    w.series = metrics::Metrics::Get().Source(pipeline_, run->label);
    for (size_t a = 0; a < w.alerts.size(); ++a) {
      w.alerts[a] = &metrics::Metrics::Get().AlertGauge(pipeline_, run->label,
                                                        static_cast<metrics::Alert>(a));
    }
    watched_.push_back(std::move(w));
  }
  if (!watched_.empty()) thread_ = std::thread([this] { Run(); });
}

LogWatcher::~LogWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status LogWatcher::error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void LogWatcher::Run() {
  const auto step =
      std::chrono::milliseconds(std::min(alerts_.check_interval_ms, alerts_.heartbeat_interval_ms));
  std::unique_lock<std::mutex> lock(mu_);
  // The first look at once: a sync that starts with a log far behind says so at its start.
  do {
    lock.unlock();
    for (Watched& w : watched_) Look(w);
    lock.lock();
  } while (!cv_.wait_for(lock, step, [this] { return done_; }));
}

void LogWatcher::Look(Watched& w) {
  const auto now = Clock::now();
  if (now - w.heartbeat_at >= std::chrono::milliseconds(alerts_.heartbeat_interval_ms)) {
    w.heartbeat_at = now;
    auto beat = w.watch->Heartbeat();
    if (!beat.ok()) {
      FERRY_LOG(kWarn) << beat.status().ToString();
    }
  }
  const std::optional<source::Position> floor = Coordinator::Floor(*w.run, recorder_, std::nullopt);
  const bool moved = floor != w.floor;
  if (moved) {
    w.floor = floor;
    w.floor_since = now;
  }
  auto looked = w.watch->Look(floor.value_or(source::Position()));
  if (!looked.ok()) {
    FERRY_LOG(kDebug) << "looking at the change log: " << looked.status().ToString();
    return;
  }
  const source::Source::LogStatus& st = *looked;
  // How far behind the log was when the position last moved: a log that grew since, while the
  // position stood, is a stall; a quiet server's log that did not grow is none.
  if (moved || !w.behind_then) w.behind_then = st.behind_bytes;
  if (st.behind_bytes) w.series.log_lag_bytes->Set(static_cast<double>(*st.behind_bytes));
  // The lag as the last landings showed it, before a caught-up log sets it to none below: changes
  // that landed late count even when all has landed by the time of this look.
  const double lag = std::max(w.run->coordinator.TakeLagPeak(), w.series.lag_seconds->Value());
  // Every change the source has logged is committed: nothing waits, the lag is none.
  if (st.behind_bytes && *st.behind_bytes == 0 && floor && !floor->none()) {
    w.series.lag_seconds->Set(0);
  }
  if (st.retained_bytes) w.series.retained_bytes->Set(static_cast<double>(*st.retained_bytes));
  const std::string who =
      w.run->cfg->name.empty() ? std::string("the source") : "source " + w.run->cfg->name;

  // retained_wal: what the server keeps for ferry (MySQL, which keeps nothing for it: the log
  // past ferry's position).
  const std::optional<uint64_t> kept = st.retained_bytes ? st.retained_bytes : st.behind_bytes;
  if (alerts_.max_retained_wal > 0 && kept) {
    const bool on = *kept > static_cast<uint64_t>(alerts_.max_retained_wal);
    std::string fix = w.watch->RetainedFix();
    Set(w, metrics::Alert::kRetainedWal, on,
        who + ": " +
            (st.retained_by.empty() ? "its change log past ferry's position"
                                    : st.retained_by + " keeps") +
            " " + Bytes(*kept) + ", above alerts.max_retained_wal (" +
            Bytes(static_cast<uint64_t>(alerts_.max_retained_wal)) + ")" +
            (fix.empty() ? std::string() : "; " + fix));
    if (on && alerts_.stop_on_retained_wal) {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) {
        error_ = Status::InvalidArgument(
            who + ": " +
            (st.retained_by.empty() ? "the change log past ferry's position is "
                                    : st.retained_by + " keeps ") +
            Bytes(*kept) + ", above alerts.max_retained_wal (" +
            Bytes(static_cast<uint64_t>(alerts_.max_retained_wal)) +
            "), and alerts.on_retained_wal is stop: the sync stopped" +
            (fix.empty() ? std::string() : "; " + fix) +
            ". Raise max_retained_wal, or set on_retained_wal: warn, to let it catch up");
        stop_->Request();
      }
    }
  }
  // stall: the committed position has not moved while the log has.
  if (alerts_.stall_after_ms > 0) {
    const auto still = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.floor_since);
    const bool on = st.behind_bytes && w.behind_then && *st.behind_bytes > *w.behind_then &&
                    still.count() >= alerts_.stall_after_ms;
    Set(w, metrics::Alert::kStall, on,
        who + ": the position every stream has committed (" +
            (w.floor ? w.floor->ToString() : std::string("none")) + ") has not moved for " +
            Duration(still.count()) + " (alerts.stall_after " + Duration(alerts_.stall_after_ms) +
            ") while the log grew by " +
            Bytes(st.behind_bytes.value_or(0) - w.behind_then.value_or(0)) +
            ": look for a commit that does not finish (a lock in the destination, a store that "
            "does not answer) or a read that cannot go on");
  }
  // lag: the replication lag of the newest checkpoint every stream committed.
  if (alerts_.max_lag_ms > 0) {
    const bool on = lag * 1000 > static_cast<double>(alerts_.max_lag_ms);
    Set(w, metrics::Alert::kLag, on,
        who + ": changes reach the destination " + Duration(static_cast<int64_t>(lag * 1000)) +
            " after their commit, above alerts.max_lag (" + Duration(alerts_.max_lag_ms) +
            "): the destination's commits or the source's log reading cannot keep up");
  }
}

void LogWatcher::Set(Watched& w, metrics::Alert a, bool on, const std::string& message) {
  const size_t i = static_cast<size_t>(a);
  w.alerts[i]->Set(on ? 1 : 0);
  if (on == w.firing[i]) return;
  w.firing[i] = on;
  if (on) {
    FERRY_LOG(kWarn) << "alert " << metrics::kAlertNames[i] << ": " << message;
  } else {
    FERRY_LOG(kInfo) << "alert " << metrics::kAlertNames[i] << " cleared";
  }
}

}  // namespace ferry::engine
