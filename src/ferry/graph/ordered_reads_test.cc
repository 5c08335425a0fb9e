#include "ferry/graph/ordered_reads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace ferry::graph {
namespace {

std::shared_ptr<Schema> OneColumn() {
  auto schema = std::make_shared<Schema>();
  schema->fields = {{1, "x", DataType::Int64(), true, ""}};
  return schema;
}

std::unique_ptr<Batch> Value(const std::shared_ptr<Schema>& schema, int64_t v) {
  auto b = std::make_unique<Batch>(schema);
  b->column(0).AppendInt64(v);
  return b;
}

int64_t ValueOf(const Batch& b) { return b.column(0).values<int64_t>()[0]; }

// Parts of different lengths read at different speeds come out whole and in part order, and
// each reader index reads one part at a time.
TEST(ReadInOrderTest, HandsPartsOnInOrderWhateverTheirSpeed) {
  auto schema = OneColumn();
  constexpr size_t kParts = 40, kReaders = 3;
  std::atomic<int> busy[kReaders] = {};
  std::atomic<bool> overlapped{false};
  std::atomic<int> max_at_once{0}, at_once{0};
  PartReader read = [&](size_t r, size_t part, const auto& emit) {
    if (busy[r].fetch_add(1) != 0) overlapped = true;
    int now = ++at_once;
    int seen = max_at_once.load();
    while (now > seen && !max_at_once.compare_exchange_weak(seen, now)) {
    }
    std::mt19937 rng(static_cast<unsigned>(part));
    const int n = static_cast<int>(part % 7);  // some parts are empty
    Status s;
    for (int k = 0; k < n; ++k) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
      if (!emit(Value(schema, static_cast<int64_t>(part) * 100 + k))) {
        s = Status::Cancelled("stopped");
        break;
      }
    }
    --at_once;
    busy[r].fetch_sub(1);
    return s;
  };
  std::vector<int64_t> got, expected;
  std::vector<size_t> done;
  for (size_t part = 0; part < kParts; ++part) {
    for (size_t k = 0; k < part % 7; ++k) expected.push_back(static_cast<int64_t>(part * 100 + k));
  }
  Status s = ReadInOrder(
      kParts, kReaders, 2, read,
      [&](std::unique_ptr<Batch> b) {
        got.push_back(ValueOf(*b));
        return true;
      },
      [&](size_t part) {
        done.push_back(part);
        return true;
      });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got, expected);
  ASSERT_EQ(done.size(), kParts);
  for (size_t i = 0; i < kParts; ++i) EXPECT_EQ(done[i], i);
  EXPECT_FALSE(overlapped) << "a reader index read two parts at once";
  EXPECT_GT(max_at_once.load(), 1) << "the parts were not read in parallel";
  EXPECT_LE(max_at_once.load(), static_cast<int>(kReaders));
}

// A consumer that does not take anything holds the readers back: no more than `readers` parts
// are started past the one being handed on, and each holds at most `capacity` batches (plus the
// one its reader is blocked sending).
TEST(ReadInOrderTest, ReadersWaitForASlowConsumer) {
  auto schema = OneColumn();
  constexpr size_t kReaders = 2, kCapacity = 3;
  std::atomic<int> started{0}, made{0};
  std::atomic<int> handed{0};
  int max_waiting = 0;
  size_t max_started_ahead = 0;
  PartReader read = [&](size_t, size_t part, const auto& emit) {
    ++started;
    for (int k = 0; k < 50; ++k) {
      ++made;
      if (!emit(Value(schema, static_cast<int64_t>(part)))) return Status::Cancelled("stopped");
    }
    return Status::OK();
  };
  size_t current = 0;
  Status s = ReadInOrder(
      20, kReaders, kCapacity, read,
      [&](std::unique_ptr<Batch>) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        max_waiting = std::max(max_waiting, made.load() - ++handed);
        max_started_ahead =
            std::max(max_started_ahead, static_cast<size_t>(started.load()) - current);
        return true;
      },
      [&](size_t part) {
        current = part + 1;
        return true;
      });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(handed.load(), 20 * 50);
  EXPECT_LE(max_waiting, static_cast<int>(kReaders * (kCapacity + 1)));
  EXPECT_LE(max_started_ahead, kReaders);
}

// A failed read: the parts before it are done, the error comes back, later parts are not
// handed on, and every reader has stopped.
TEST(ReadInOrderTest, AFailedPartStopsTheHandOffAtThatPart) {
  auto schema = OneColumn();
  PartReader read = [&](size_t, size_t part, const auto& emit) {
    if (!emit(Value(schema, static_cast<int64_t>(part)))) return Status::Cancelled("stopped");
    if (part == 5) return Status::IOError("connection lost in part 5");
    return Status::OK();
  };
  std::vector<size_t> done;
  int64_t last = -1;
  Status s = ReadInOrder(
      30, 4, 1, read,
      [&](std::unique_ptr<Batch> b) {
        last = ValueOf(*b);
        return true;
      },
      [&](size_t part) {
        done.push_back(part);
        return true;
      });
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_EQ(s.message(), "connection lost in part 5");
  EXPECT_EQ(done, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(last, 5);
}

// The consumer stops (sink failed, stop requested): Cancelled, and readers blocked on a full
// part return instead of waiting forever.
TEST(ReadInOrderTest, AStoppedHandOffEndsEveryReader) {
  auto schema = OneColumn();
  std::atomic<int> cancelled{0};
  PartReader read = [&](size_t, size_t part, const auto& emit) {
    for (int k = 0; k < 1000; ++k) {
      if (!emit(Value(schema, static_cast<int64_t>(part)))) {
        ++cancelled;
        return Status::Cancelled("stopped");
      }
    }
    return Status::OK();
  };
  int handed = 0;
  Status s = ReadInOrder(
      10, 3, 2, read, [&](std::unique_ptr<Batch>) { return ++handed < 5; },
      [](size_t) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_EQ(handed, 5);
  EXPECT_GE(cancelled.load(), 1);
}

TEST(ReadInOrderTest, NoPartsNoReads) {
  bool called = false;
  PartReader read = [&](size_t, size_t, const auto&) {
    called = true;
    return Status::OK();
  };
  Status s = ReadInOrder(
      0, 4, 2, read, [](std::unique_ptr<Batch>) { return true; }, [](size_t) { return true; });
  EXPECT_TRUE(s.ok());
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace ferry::graph
