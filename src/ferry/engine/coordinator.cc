#include "ferry/engine/coordinator.h"

#include <algorithm>
#include <limits>

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

int64_t Coordinator::Floor(const SourceRun& run, Recorder* recorder, int64_t upper) {
  int64_t floor = upper;
  for (const auto& info : run.streams) {
    config::StreamConfig sc = StreamSettings(*run.cfg, info.name);
    if (sc.mode != config::SyncMode::kCdc && sc.mode != config::SyncMode::kCdcOnly) continue;
    Json st = recorder->Get(StateNamespace(*run.cfg, info), info.name);
    if (st.is_object() && st.value("mode", "") == "cdc") {
      floor = std::min(floor, st.value("position", int64_t{0}));
    } else if (st.is_object() && st.contains("cdc_start")) {
      floor = std::min(floor, st.value("cdc_start", int64_t{0}));
    } else {
      return 0;
    }
  }
  return floor;
}

void Coordinator::Confirm(const SourceRun& run, Recorder* recorder) {
  const int64_t floor = Floor(run, recorder, std::numeric_limits<int64_t>::max());
  if (floor > 0 && floor < std::numeric_limits<int64_t>::max()) {
    run.src->ConfirmSharedLog(floor);
  }
}

Status Coordinator::Acknowledge(SourceRun& run, Recorder* recorder) {
  for (const auto& [info, position] : run.to_acknowledge) {
    FERRY_RETURN_IF_ERROR(InSource(*run.cfg, run.src->AcknowledgeChanges(info, position)));
  }
  if (run.read.position > 0) {
    const int64_t floor = Floor(run, recorder, run.read.position);
    if (floor > 0) FERRY_RETURN_IF_ERROR(InSource(*run.cfg, run.src->AcknowledgeSharedLog(floor)));
  }
  return Status::OK();
}

}  // namespace ferry::engine
