#include "ferry/graph/ordered_reads.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "ferry/base/channel.h"

namespace ferry::graph {
namespace {

struct Part {
  explicit Part(size_t capacity) : batches(capacity) {}
  Channel<std::unique_ptr<Batch>> batches;
  // Written by its reader before it closes `batches`; read by the hand-off after Receive has
  // seen the channel closed (the channel's mutex orders the two).
  Status status;
};

class Reads {
 public:
  Reads(size_t parts, size_t readers, size_t capacity, const PartReader& read)
      : readers_(readers), read_(read) {
    parts_.reserve(parts);
    for (size_t i = 0; i < parts; ++i) parts_.push_back(std::make_unique<Part>(capacity));
  }
  ~Reads() {
    Stop();
    for (auto& t : threads_) t.join();
  }

  void Start() {
    for (size_t r = 0; r < readers_; ++r) threads_.emplace_back([this, r] { Reader(r); });
  }

  // The hand-off has reached part i: readers may start parts up to i + readers - 1.
  void Handing(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    handing_ = i;
    cv_.notify_all();
  }

  Part& part(size_t i) { return *parts_[i]; }

  // No part starts any more, and every read in progress sees its emit fail.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      cv_.notify_all();
    }
    for (auto& p : parts_) p->batches.Close();
  }

 private:
  void Reader(size_t r) {
    for (;;) {
      size_t j;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock,
                 [&] { return stopped_ || next_ >= parts_.size() || next_ < handing_ + readers_; });
        if (stopped_ || next_ >= parts_.size()) return;
        j = next_++;
      }
      Part& p = *parts_[j];
      Status s =
          read_(r, j, [&p](std::unique_ptr<Batch> b) { return p.batches.Send(std::move(b)); });
      p.status = std::move(s);
      const bool failed = !p.status.ok();
      p.batches.Close();
      if (failed) {
        // Later parts would not be handed on: start none.
        std::lock_guard<std::mutex> lock(mu_);
        stopped_ = true;
        cv_.notify_all();
        return;
      }
    }
  }

  const size_t readers_;
  const PartReader& read_;
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t next_ = 0;       // guarded by mu_: the next part to start
  size_t handing_ = 0;    // guarded by mu_: the part being handed on
  bool stopped_ = false;  // guarded by mu_
};

}  // namespace

Status ReadInOrder(size_t parts, size_t readers, size_t capacity, const PartReader& read,
                   const std::function<bool(std::unique_ptr<Batch>)>& hand,
                   const std::function<bool(size_t part)>& done) {
  if (parts == 0) return Status::OK();
  Reads reads(parts, std::clamp<size_t>(readers, 1, parts), std::max<size_t>(capacity, 1), read);
  reads.Start();
  for (size_t i = 0; i < parts; ++i) {
    reads.Handing(i);
    Part& p = reads.part(i);
    while (auto b = p.batches.Receive()) {
      if (!hand(std::move(*b))) return Status::Cancelled("the hand-off stopped");
    }
    // Closed: by its reader (status set) or by nothing else, since Stop runs only on return.
    if (!p.status.ok()) return p.status;
    if (!done(i)) return Status::Cancelled("the hand-off stopped");
  }
  return Status::OK();
}

}  // namespace ferry::graph
