#include "ferry/graph/align.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"

namespace ferry::graph {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

AlignNode::AlignNode(std::string name, std::vector<std::shared_ptr<Edge>> inputs,
                     std::shared_ptr<Edge> output, AlignOptions options)
    : name_(std::move(name)),
      inputs_(std::move(inputs)),
      output_(std::move(output)),
      options_(std::move(options)),
      arrivals_(inputs_.size() + 1) {}

void GroupEdges(const std::vector<std::shared_ptr<Edge>>& edges) {
  auto counter = std::make_shared<std::atomic<uint64_t>>(0);
  for (const auto& e : edges) {
    e->SetStamp([counter](Message& m) { m.seq = counter->fetch_add(1) + 1; });
  }
}

bool AlignNode::Ordered(size_t i) const {
  const size_t g = GroupOf(i);
  for (size_t j = 0; j < inputs_.size(); ++j) {
    if (j != i && GroupOf(j) == g) return true;
  }
  return false;
}

std::string AlignNode::InputName(size_t i) const {
  if (i < options_.input_names.size()) return options_.input_names[i];
  return "input " + std::to_string(i);
}

void AlignNode::Pump(size_t i) {
  const size_t g = GroupOf(i);
  const bool ordered = Ordered(i);
  while (true) {
    std::optional<Message> m = inputs_[i]->Receive();
    if (!m) {
      arrivals_.Send(Arrival{i, std::nullopt});
      return;
    }
    const bool end = m->kind == Message::Kind::kEnd;
    if (options_.exactly_once) {
      // Nothing the reader sent after a barrier passes until the checkpoint aligns (or is
      // abandoned): of a numbered group, what it sent before the barrier still does.
      std::unique_lock<std::mutex> lock(gate_mu_);
      gate_cv_.wait(lock,
                    [&] { return stopping_ || !held_[g] || (ordered && m->seq < held_seq_[g]); });
      if (stopping_) return;
      if (m->kind == Message::Kind::kBarrier) {
        held_seq_[g] = held_[g] ? std::min(held_seq_[g], m->seq) : m->seq;
        held_[g] = true;
      }
    }
    if (!arrivals_.Send(Arrival{i, std::move(m)})) return;
    if (end) return;
  }
}

void AlignNode::Release() {
  std::lock_guard<std::mutex> lock(gate_mu_);
  held_.assign(held_.size(), false);
  gate_cv_.notify_all();
}

bool AlignNode::Emit(bool final_checkpoint) {
  if (!final_checkpoint && !options_.keyed &&
      in_flight_.load(std::memory_order_acquire) >= std::max(1, options_.max_concurrent)) {
    // The sink is still busy with earlier checkpoints: this one is folded into the next.
    ++subsumed_total_;
    FERRY_LOG(kDebug) << name_ << ": checkpoint subsumed by the next (max_concurrent "
                      << options_.max_concurrent << " still in progress)";
    return true;
  }
  Json inputs = Json::array();
  for (auto& p : pending_) {
    inputs.push_back(Json(std::move(p)));
    p.clear();
  }
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  Barrier b{CheckpointId(++seq_), "aligned", Json{{"inputs", std::move(inputs)}}};
  return output_->Send(Message::MakeBarrier(std::move(b)));
}

Status AlignNode::Run() {
  const size_t n = inputs_.size();
  size_t groups = n;
  for (size_t i = 0; i < n; ++i) groups = std::max(groups, GroupOf(i) + 1);
  held_.assign(groups, false);
  held_seq_.assign(groups, 0);
  // A numbered group's messages, taken in the order its reader sent them.
  std::vector<uint64_t> next_seq(groups, 1);
  std::vector<std::map<uint64_t, Arrival>> early(groups);
  std::vector<bool> ordered(n);
  for (size_t i = 0; i < n; ++i) ordered[i] = Ordered(i);
  pending_.assign(n, {});
  ended_.assign(n, false);
  std::vector<bool> waiting(n, false);  // Run's view of held_
  std::vector<std::thread> pumps;
  pumps.reserve(n);
  for (size_t i = 0; i < n; ++i) pumps.emplace_back([this, i] { Pump(i); });
  auto finish = [&](Status s) {
    {
      std::lock_guard<std::mutex> lock(gate_mu_);
      stopping_ = true;
      gate_cv_.notify_all();
    }
    if (!s.ok()) {
      for (auto& in : inputs_) in->Close();
    }
    arrivals_.Close();
    for (auto& t : pumps) t.join();
    return s;
  };

  std::optional<Clock::time_point> aligning_since;
  int consecutive_abandons = 0;
  size_t live = n;
  auto release = [&] {
    waiting.assign(n, false);
    aligning_since.reset();
    Release();
  };
  // Per group: every input ended, or one has reached a barrier.
  auto reached = [&](size_t g) {
    bool all_ended = true;
    for (size_t i = 0; i < n; ++i) {
      if (GroupOf(i) != g || ended_[i]) continue;
      all_ended = false;
      if (options_.exactly_once ? waiting[i] : !pending_[i].empty() || options_.keyed) {
        return true;
      }
    }
    return all_ended;
  };
  auto complete = [&] {
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
      if (!pending_[i].empty()) any = true;
      if (!reached(GroupOf(i))) return false;
    }
    return any;
  };
  auto request_others = [&] {
    if (!options_.request) return;
    for (size_t j = 0; j < n; ++j) {
      if (!ended_[j] && !reached(GroupOf(j))) options_.request(j);
    }
  };

  // One message, in its input's order (and its group's): nullopt to go on, else how Run ends.
  auto handle = [&](Arrival& x) -> std::optional<Status> {
    const size_t i = x.input;
    Message& m = *x.message;
    switch (m.kind) {
      case Message::Kind::kBatch:
        m.origin = static_cast<uint32_t>(i);
        if (!output_->Send(std::move(m))) return Status::Cancelled(name_ + ": stopped");
        break;
      case Message::Kind::kBarrier: {
        pending_[i].push_back(std::move(m.barrier.position));
        if (options_.exactly_once) {
          waiting[i] = true;
          if (!aligning_since) aligning_since = Clock::now();
        }
        if (complete()) {
          if (!Emit(/*final_checkpoint=*/false)) {
            return Status::Cancelled(name_ + ": stopped");
          }
          consecutive_abandons = 0;
          release();
        } else {
          request_others();
          FaultPoint("graph.aligning");
        }
        break;
      }
      case Message::Kind::kEnd:
        ended_[i] = true;
        --live;
        if (live > 0 && complete()) {
          if (!Emit(/*final_checkpoint=*/false)) {
            return Status::Cancelled(name_ + ": stopped");
          }
          consecutive_abandons = 0;
          release();
        }
        break;
    }
    return std::nullopt;
  };
  // Of each numbered group, the messages next in its reader's order, up to the group's barrier
  // while a checkpoint waits on other inputs (what was sent after it waits for the release).
  auto drain = [&]() -> std::optional<Status> {
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t g = 0; g < early.size(); ++g) {
        while (!early[g].empty()) {
          if (options_.exactly_once) {
            bool waits = false;
            for (size_t i = 0; i < n; ++i) waits = waits || (GroupOf(i) == g && waiting[i]);
            if (waits) break;
          }
          auto it = early[g].find(next_seq[g]);
          if (it == early[g].end()) break;
          Arrival x = std::move(it->second);
          early[g].erase(it);
          ++next_seq[g];
          progress = true;
          if (auto s = handle(x)) return s;
        }
      }
    }
    return std::nullopt;
  };

  while (live > 0) {
    std::optional<Arrival> a;
    if (aligning_since && options_.alignment_timeout_ms > 0) {
      const auto deadline =
          *aligning_since + std::chrono::milliseconds(options_.alignment_timeout_ms);
      const auto now = Clock::now();
      auto r = now >= deadline ? Channel<Arrival>::ReceiveResult::kTimedOut
                               : arrivals_.ReceiveFor(deadline - now, &a);
      if (r == Channel<Arrival>::ReceiveResult::kClosed) {
        return finish(Status::Cancelled(name_ + ": stopped"));
      }
      if (r == Channel<Arrival>::ReceiveResult::kTimedOut) {
        std::string late;
        for (size_t j = 0; j < n; ++j) {
          if (ended_[j] || reached(GroupOf(j))) continue;
          late += (late.empty() ? "" : ", ") + InputName(j);
        }
        ++abandoned_total_;
        ++consecutive_abandons;
        FERRY_LOG(kWarn) << name_ << ": checkpoint abandoned: " << late
                         << " did not reach a checkpoint within alignment_timeout ("
                         << options_.alignment_timeout_ms << " ms); "
                         << (options_.keyed
                                 ? "the others commit alone (what the late sources sent is "
                                   "applied again after a crash, to the same result)"
                                 : "the sources held back go on, and the next checkpoint covers "
                                   "this one");
        if (options_.keyed) {
          // The barriers that arrived go out alone: nothing of an input's next barrier may join
          // the data of its last one.
          if (!Emit(/*final_checkpoint=*/false)) {
            return finish(Status::Cancelled(name_ + ": stopped"));
          }
        }
        if (consecutive_abandons > options_.tolerable_failures) {
          return finish(Status::Unavailable(
              name_ + ": " + std::to_string(consecutive_abandons) +
              " checkpoints in a row could not align: " + late +
              " did not reach a checkpoint within checkpoint.alignment_timeout (" +
              std::to_string(options_.alignment_timeout_ms) +
              " ms). A source that holds one long transaction cannot checkpoint before its "
              "commit: raise checkpoint.alignment_timeout, or tolerable_failures"));
        }
        release();
        if (auto s = drain()) return finish(*s);
        continue;
      }
    } else {
      a = arrivals_.Receive();
      if (!a) return finish(Status::Cancelled(name_ + ": stopped"));
    }
    if (!a->message) {
      return finish(
          Status::Cancelled(name_ + ": " + InputName(a->input) + " stopped before its end"));
    }
    if (ordered[a->input] && a->message->seq != 0) {
      // A numbered group's messages go on in the order its reader sent them (drain, below).
      const size_t g = GroupOf(a->input);
      const uint64_t seq = a->message->seq;
      early[g].emplace(seq, std::move(*a));
    } else if (auto s = handle(*a)) {
      return finish(*s);
    }
    if (auto s = drain()) return finish(*s);
  }
  // Every input has ended: what is left goes out as the last checkpoint, then the end.
  bool rest = false;
  for (const auto& p : pending_) rest = rest || !p.empty();
  if (rest && !Emit(/*final_checkpoint=*/true)) {
    return finish(Status::Cancelled(name_ + ": stopped"));
  }
  if (!output_->Send(Message::End())) return finish(Status::Cancelled(name_ + ": stopped"));
  return finish(Status::OK());
}

}  // namespace ferry::graph
