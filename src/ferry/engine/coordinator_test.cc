#include "ferry/engine/coordinator.h"

#include <gtest/gtest.h>

#include <thread>

#include "ferry/metrics/metrics.h"

namespace ferry::engine {
namespace {

using Held = source::Source::CheckpointTrigger::Held;

config::CheckpointConfig Policy(int64_t interval_ms, int64_t min_pause_ms) {
  config::CheckpointConfig p;
  p.interval_ms = interval_ms;
  p.min_pause_ms = min_pause_ms;
  p.max_changes = 100;
  p.max_bytes = 1000;
  return p;
}

TEST(CoordinatorTest, BytesComeFirstKeysWaitForThePauseChangesForTheInterval) {
  Coordinator c;
  c.Start(Policy(/*interval_ms=*/60000, /*min_pause_ms=*/60000), false, 0);
  EXPECT_FALSE(c.Due({0, 0, true, false}));
  EXPECT_FALSE(c.Due({99, 999, true, false}));
  EXPECT_TRUE(c.Due({1, 1000, true, false}));   // memory first, pause or not
  EXPECT_FALSE(c.Due({100, 10, true, false}));  // many keys, but within the pause
  c.Start(Policy(60000, 0), false, 0);
  EXPECT_TRUE(c.Due({100, 10, true, false}));
  c.Start(Policy(/*interval_ms=*/0, 0), false, 0);
  EXPECT_TRUE(c.Due({1, 1, true, false}));   // the interval passed, changes held
  EXPECT_FALSE(c.Due({0, 0, true, false}));  // nothing held: nothing to commit
}

TEST(CoordinatorTest, AQuietLogMovesOnOnlyWhenFollowedAtTheFollowingPace) {
  Coordinator c;
  c.Start(Policy(60000, 0), /*follow=*/false, 0);
  EXPECT_FALSE(c.Due({0, 0, true, true}));
  c.Start(Policy(60000, 0), /*follow=*/true, /*follow_commit_ms=*/0);
  EXPECT_TRUE(c.Due({0, 0, true, true}));    // the following pace bounds the interval
  EXPECT_FALSE(c.Due({0, 0, false, true}));  // the position did not move
  c.Start(Policy(60000, 0), true, 60000);
  EXPECT_FALSE(c.Due({0, 0, true, true}));
}

TEST(CoordinatorTest, ARequestIsTakenAtTheNextBoundaryAndOnce) {
  Coordinator c;
  c.Start(Policy(60000, 60000), false, 0);
  c.Request();
  EXPECT_TRUE(c.Due({0, 0, false, true}));  // between transactions too
  EXPECT_FALSE(c.Due({0, 0, false, false}));
  c.Request();
  c.ClearRequests();
  EXPECT_FALSE(c.Due({0, 0, false, false}));
  // A boundary the policy checkpoints anyway leaves the request for the next one.
  c.Request();
  EXPECT_TRUE(c.Due({1, 1000, true, false}));
  EXPECT_TRUE(c.Due({0, 0, false, false}));
}

TEST(CoordinatorTest, TakenRestartsTheClock) {
  Coordinator c;
  c.Start(Policy(/*interval_ms=*/50, 0), false, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_TRUE(c.Due({1, 1, true, false}));
  c.Taken();
  EXPECT_FALSE(c.Due({1, 1, true, false}));
}

TEST(CoordinatorTest, ALateLandingIsSeenByTheLagAlarmThoughQuietOnesFollowAtOnce) {
  Coordinator c;
  c.SetSeries(metrics::Metrics::Get().Source("coordinator_test", "late"));
  c.Start(Policy(60000, 0), false, 0);
  const auto now_us = static_cast<int64_t>(metrics::UnixNow() * 1e6);
  c.Due({1, 1, true, false, now_us - 30'000'000});  // committed at the source 30 s ago
  c.Checkpointed(source::Position::Lsn(100));
  c.Checkpointed(source::Position::Lsn(200));  // a quiet log's: nothing waits in it
  EXPECT_EQ(c.TakeLagPeak(), 0);
  c.Landed(source::Position::Lsn(100));
  c.Landed(source::Position::Lsn(200));
  // The gauge says what is true now (nothing waits); the alarm still learns of the late landing.
  EXPECT_EQ(metrics::Metrics::Get().Source("coordinator_test", "late").lag_seconds->Value(), 0);
  EXPECT_GE(c.TakeLagPeak(), 29.0);
  EXPECT_EQ(c.TakeLagPeak(), 0);  // once
}

}  // namespace
}  // namespace ferry::engine
