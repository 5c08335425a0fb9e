#include "ferry/engine/coordinator.h"

#include <algorithm>
#include <utility>

#include "ferry/engine/tasks.h"

namespace ferry::engine {

void Coordinator::Start(const config::CheckpointConfig& policy, bool follow,
                        int64_t follow_commit_ms) {
  policy_ = policy;
  follow_ = follow;
  if (follow) policy_.interval_ms = std::min(policy_.interval_ms, follow_commit_ms);
  last_ = Clock::now();
}

bool Coordinator::Due(const Held& held) {
  newest_commit_us_ = std::max(newest_commit_us_, held.commit_time_us);
  const auto since = Clock::now() - last_;
  const auto interval = std::chrono::milliseconds(policy_.interval_ms);
  bool due;
  if (held.quiet) {
    // Following a quiet log (or one whose changes are all filtered out): the positions still
    // move on, so that the source does not keep its log for ferry.
    due = follow_ && held.moved && since >= interval;
  } else {
    // max_bytes first: memory comes before min_pause.
    const bool paused = since >= std::chrono::milliseconds(policy_.min_pause_ms);
    due = held.bytes >= static_cast<size_t>(policy_.max_bytes) ||
          (paused && held.changes >= static_cast<size_t>(policy_.max_changes)) ||
          (paused && held.changes > 0 && since >= interval);
  }
  // A checkpoint another source waits for is taken too (its request is used up only then).
  return due || requested_.exchange(false);
}

void Coordinator::Taken() { last_ = Clock::now(); }

void Coordinator::Checkpointed(Position position) {
  std::lock_guard<std::mutex> lock(mu_);
  // A checkpoint with no transaction since the last one (a quiet log's) has commit time 0: the
  // destination then has everything the source has logged up to there.
  taken_.emplace_back(position, newest_commit_us_);
  newest_commit_us_ = 0;
  if (series_.checkpoints_read != nullptr) series_.checkpoints_read->Increment();
}

void Coordinator::Landed(Position floor) {
  if (series_.lag_seconds == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  const double now = metrics::UnixNow();
  if (landed_.none() || floor > landed_) {
    landed_ = floor;
    series_.confirmed_moved->Set(now);
  }
  std::optional<int64_t> commit_us;
  while (!taken_.empty() && taken_.front().first <= floor) {
    commit_us = taken_.front().second;
    taken_.pop_front();
  }
  if (!commit_us) return;
  const double lag = *commit_us > 0 ? std::max(0.0, now - *commit_us / 1e6) : 0.0;
  series_.lag_seconds->Set(lag);
  lag_peak_ = std::max(lag_peak_, lag);
}

double Coordinator::TakeLagPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(lag_peak_, 0.0);
}

std::optional<Position> Coordinator::Floor(const SourceRun& run, Recorder* recorder,
                                           std::optional<Position> upper) {
  std::optional<Position> floor = upper;
  const Position::Kind kind = run.src->position_kind();
  for (const auto& info : run.streams) {
    config::StreamConfig sc = StreamSettings(*run.cfg, info.name);
    if (sc.mode != config::SyncMode::kCdc && sc.mode != config::SyncMode::kCdcOnly) continue;
    // A stream without a position yet (or with one that does not read) holds the whole log.
    const std::optional<Position> at =
        ChangesNeededAfter(recorder->Get(StateNamespace(*run.cfg, info), info.name), kind);
    if (!at) return Position();
    if (!floor || *at < *floor) floor = *at;
  }
  return floor;
}

void Coordinator::Confirm(SourceRun& run, Recorder* recorder) {
  const std::optional<Position> floor = Floor(run, recorder, std::nullopt);
  if (floor && !floor->none()) {
    run.src->ConfirmSharedLog(*floor);
    run.coordinator.Landed(*floor);
  }
}

Status Coordinator::Acknowledge(SourceRun& run, Recorder* recorder) {
  for (const auto& [info, position] : run.to_acknowledge) {
    FERRY_RETURN_IF_ERROR(InSource(*run.cfg, run.src->AcknowledgeChanges(info, position)));
  }
  if (!run.read.position.none()) {
    const std::optional<Position> floor = Floor(run, recorder, run.read.position);
    if (floor && !floor->none()) {
      FERRY_RETURN_IF_ERROR(InSource(*run.cfg, run.src->AcknowledgeSharedLog(*floor)));
      run.coordinator.Landed(*floor);
    }
  }
  return Status::OK();
}

}  // namespace ferry::engine
