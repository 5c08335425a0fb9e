// Channel<T>: a bounded multi-producer multi-consumer queue, the edge of the dataflow graph.
// Send blocks while the channel is full (back-pressure); Receive blocks while it is empty.
// Close() wakes everyone: further Sends fail, Receive drains what is left and then returns
// nullopt. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace ferry {

template <typename T>
class Channel {
 public:
  explicit Channel(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // Returns false if the channel was closed (the item is dropped).
  bool Send(T item) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  enum class SendResult { kSent, kTimedOut, kClosed };
  // Like Send, but waits at most `timeout` for room; `item` is moved from only when sent.
  template <typename Rep, typename Period>
  SendResult SendFor(T& item, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!not_full_.wait_for(lock, timeout, [&] { return closed_ || items_.size() < capacity_; })) {
      return SendResult::kTimedOut;
    }
    if (closed_) return SendResult::kClosed;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return SendResult::kSent;
  }

  std::optional<T> Receive() {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;  // guarded by mu_
  bool closed_ = false;  // guarded by mu_
};

}  // namespace ferry
