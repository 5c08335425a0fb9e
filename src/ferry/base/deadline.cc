#include "ferry/base/deadline.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ferry {

bool RunWithDeadline(int64_t timeout_ms, const std::function<void()>& work,
                     const std::function<void()>& interrupt) {
  if (timeout_ms <= 0) {
    work();
    return false;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;   // guarded by mu
  bool fired = false;  // written by the watcher, read after join
  std::thread watcher([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done; })) return;
    lock.unlock();
    fired = true;
    interrupt();
  });
  work();
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  watcher.join();
  return fired;
}

}  // namespace ferry
