#include "ferry/base/deadline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ferry {
namespace {

TEST(RunWithDeadlineTest, QuickWorkIsNotInterrupted) {
  int runs = 0, interrupts = 0;
  EXPECT_FALSE(RunWithDeadline(
      5000, [&] { ++runs; }, [&] { ++interrupts; }));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(interrupts, 0);
}

// Work blocked until someone interrupts it (a statement waiting on a lock) returns once the
// deadline passes, and the interrupt ran exactly once.
TEST(RunWithDeadlineTest, BlockedWorkIsInterruptedOnceAfterTheTimeout) {
  std::mutex mu;
  std::condition_variable cv;
  bool cancelled = false;
  std::atomic<int> interrupts{0};
  auto t0 = std::chrono::steady_clock::now();
  bool fired = RunWithDeadline(
      100,
      [&] {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return cancelled; });
      },
      [&] {
        ++interrupts;
        std::lock_guard<std::mutex> lock(mu);
        cancelled = true;
        cv.notify_all();
      });
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_TRUE(fired);
  EXPECT_EQ(interrupts.load(), 1);
  EXPECT_GE(ms, 100);
}

TEST(RunWithDeadlineTest, NoLimitRunsTheWorkAlone) {
  bool interrupted = false;
  EXPECT_FALSE(RunWithDeadline(
      0, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); },
      [&] { interrupted = true; }));
  EXPECT_FALSE(interrupted);
}

}  // namespace
}  // namespace ferry
