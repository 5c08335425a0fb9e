// Channel<T>: a bounded multi-producer multi-consumer queue, the edge of the dataflow graph.
// Send blocks while the channel is full (back-pressure); Receive blocks while it is empty.
// Close() wakes everyone: further Sends fail, Receive drains what is left and then returns
// nullopt. Optionally the channel also bounds the total weight of what it holds (e.g. bytes):
// Send then waits while either bound is reached, except that an empty channel always takes an
// item, however heavy. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

namespace ferry {

template <typename T>
class Channel {
 public:
  using Weigher = std::function<size_t(const T&)>;

  explicit Channel(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  Channel(size_t capacity, size_t weight_limit, Weigher weigh)
      : capacity_(capacity == 0 ? 1 : capacity),
        weight_limit_(weight_limit),
        weigh_(std::move(weigh)) {}

  // Returns false if the channel was closed (the item is dropped).
  bool Send(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    const size_t w = Weigh(item);
    not_full_.wait(lock, [&] { return closed_ || HasRoom(w); });
    if (closed_) return false;
    Push(std::move(item), w);
    return true;
  }

  enum class SendResult { kSent, kTimedOut, kClosed };
  // Like Send, but waits at most `timeout` for room; `item` is moved from only when sent.
  template <typename Rep, typename Period>
  SendResult SendFor(T& item, std::chrono::duration<Rep, Period> timeout) {
    const size_t w = Weigh(item);
    std::unique_lock<std::mutex> lock(mu_);
    if (!not_full_.wait_for(lock, timeout, [&] { return closed_ || HasRoom(w); })) {
      return SendResult::kTimedOut;
    }
    if (closed_) return SendResult::kClosed;
    Push(std::move(item), w);
    return SendResult::kSent;
  }

  std::optional<T> Receive() {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    return Pop();
  }

  enum class ReceiveResult { kReceived, kTimedOut, kClosed };
  // Like Receive, but waits at most `timeout` for an item.
  template <typename Rep, typename Period>
  ReceiveResult ReceiveFor(std::chrono::duration<Rep, Period> timeout, std::optional<T>* out) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); })) {
      return ReceiveResult::kTimedOut;
    }
    if (items_.empty()) return ReceiveResult::kClosed;
    out->emplace(Pop());
    return ReceiveResult::kReceived;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t capacity() const { return capacity_; }

  // Called on every item as it goes in, under the channel's lock (e.g. to number the items of
  // several channels one producer feeds, in the order it sends them). Set before any Send.
  void SetStamp(std::function<void(T&)> stamp) { stamp_ = std::move(stamp); }

 private:
  size_t Weigh(const T& item) const { return weigh_ ? weigh_(item) : 0; }
  bool HasRoom(size_t w) const {  // mu_ held
    if (items_.empty()) return true;
    return items_.size() < capacity_ && (!weigh_ || weight_ + w <= weight_limit_);
  }
  T Pop() {  // mu_ held, items_ not empty
    T item = std::move(items_.front().first);
    weight_ -= items_.front().second;
    items_.pop_front();
    not_full_.notify_all();  // a light item may fit where a heavy one did not
    return item;
  }
  void Push(T item, size_t w) {  // mu_ held
    if (stamp_) stamp_(item);
    items_.emplace_back(std::move(item), w);
    weight_ += w;
    not_empty_.notify_one();
  }

  const size_t capacity_;
  const size_t weight_limit_ = 0;
  const Weigher weigh_;
  std::function<void(T&)> stamp_;
  std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<std::pair<T, size_t>> items_;  // guarded by mu_: each item with its weight
  size_t weight_ = 0;                       // guarded by mu_
  bool closed_ = false;                     // guarded by mu_
};

}  // namespace ferry
