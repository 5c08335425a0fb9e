#include "ferry/engine/ticker.h"

#include <gtest/gtest.h>

namespace ferry::engine {
namespace {

TEST(ProgressTextTest, RowsOfThePlanRateChunksAndTimeLeft) {
  StreamTask t;
  t.label = "orders";
  t.progress.plan.count = 10;
  t.progress.plan.rows = 1000;
  StreamReport report;
  t.report = &report;
  const Clock::time_point now = Clock::now();
  EXPECT_EQ(ProgressText(t, now), "");  // nothing read yet: no line
  t.rows_read = 250;
  t.first_rows_ns = (now - std::chrono::seconds(1)).time_since_epoch().count();
  t.chunks_landed = 2;
  EXPECT_EQ(ProgressText(t, now),
            "orders: 250 of about 1000 rows (25%), about 3 s left, 250 rows/s, 2 of 10 chunks "
            "committed");
  // A resumed load: half the chunks were committed by an earlier run, so this run reads about
  // half the rows.
  report.chunks_skipped = 5;
  t.chunks_landed = 6;
  EXPECT_EQ(ProgressText(t, now),
            "orders: 250 of about 500 rows (75%), about 1 s left, 250 rows/s, 6 of 10 chunks "
            "committed");
  // No estimate of the table's rows: what was read and the rate.
  t.progress.plan.rows = 0;
  EXPECT_EQ(ProgressText(t, now), "orders: 250 rows, 250 rows/s, 6 of 10 chunks committed");
}

}  // namespace
}  // namespace ferry::engine
