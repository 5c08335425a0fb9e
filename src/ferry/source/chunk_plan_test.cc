#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "ferry/source/source.h"

namespace ferry::source {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(GridPlanTest, DenseKeysKeepTheGrid) {
  auto plan = GridPlan(1, 1000000, 1000000, 100000);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->count, 10);
  EXPECT_EQ(plan->At(0).hi, 100001);
  EXPECT_FALSE(plan->At(9).hi.has_value());
  // Half the keys deleted: still within twice the chunks the rows need.
  EXPECT_TRUE(GridPlan(1, 1000000, 500000, 100000).has_value());
}

TEST(GridPlanTest, SparseKeysAndFarOutliersRefuseTheGrid) {
  EXPECT_FALSE(GridPlan(3, 1000000999, 91000, 7777).has_value());     // a few keys far away
  EXPECT_FALSE(GridPlan(kMin, kMax, 60000, 7777).has_value());        // the whole int64 range
  EXPECT_FALSE(GridPlan(1, 100000000, 1000000, 100000).has_value());  // 99% deleted
}

TEST(BoundariesPlanTest, OneBoundaryEveryChunkOfRows) {
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 1000; ++k) keys.push_back(k * k);  // skewed
  ChunkPlan plan = BoundariesPlan(keys, 10.0, 1000);  // each key is 10 rows: 100 keys a chunk
  ASSERT_EQ(plan.count, 10);
  ASSERT_EQ(plan.bounds.size(), 9u);
  EXPECT_EQ(plan.bounds[0], 100 * 100);
  EXPECT_FALSE(plan.At(0).lo.has_value());
  EXPECT_EQ(plan.At(0).hi, 100 * 100);
  EXPECT_EQ(plan.At(1).lo, 100 * 100);
  EXPECT_EQ(plan.At(1).hi, 200 * 200);
  EXPECT_EQ(plan.At(9).lo, 900 * 900);
  EXPECT_FALSE(plan.At(9).hi.has_value());
}

TEST(BoundariesPlanTest, ExtremeKeysAndTinySamples) {
  ChunkPlan plan = BoundariesPlan({kMin, -5, 0, 7, kMax}, 1.0, 2);
  EXPECT_EQ(plan.bounds, (std::vector<int64_t>{0, kMax}));
  EXPECT_EQ(plan.At(2).lo, kMax);
  EXPECT_EQ(BoundariesPlan({}, 1.0, 10).count, 1);
  EXPECT_EQ(BoundariesPlan({1, 2, 3}, 1.0, 10).count, 1);
}

}  // namespace
}  // namespace ferry::source
