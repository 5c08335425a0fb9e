#include "ferry/engine/window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ferry/engine/progress.h"

namespace ferry::engine {
namespace {

// A table (id, c, v) with an integer cursor c, read the way a database reads a window: the rows
// of a range in cursor order, in batches.
class TableSource : public source::Source {
 public:
  struct Row {
    int64_t id;
    int64_t c;
    std::string v;
  };
  std::map<int64_t, Row> rows;  // by id
  int reads = 0;                // ReadCursorRange calls

  void Put(int64_t id, int64_t c, std::string v) { rows[id] = {id, c, std::move(v)}; }

  Result<std::vector<source::StreamInfo>> Discover() override { return Status::Internal(""); }
  Status BeginSnapshot() override { return Status::OK(); }
  Status EndSnapshot() override { return Status::OK(); }
  Result<source::ChunkPlan> PlanChunks(const source::StreamInfo&, int64_t) override {
    return Status::Internal("");
  }
  Status ReadChunk(const source::StreamInfo&, const source::Chunk&, std::shared_ptr<const Schema>,
                   size_t, const std::function<bool(Batch&)>&) override {
    return Status::Internal("");
  }
  std::string Describe() const override { return "test"; }

  Result<Json> MaxCursor(const source::StreamInfo&, const std::string&,
                         const Json& above) override {
    Json max = nullptr;
    for (const auto& [id, r] : rows) {
      if ((above.is_null() || r.c > above.get<int64_t>()) &&
          (max.is_null() || r.c > max.get<int64_t>())) {
        max = r.c;
      }
    }
    return max;
  }

  Status ReadCursorRange(const source::StreamInfo&, const std::string&,
                         const source::CursorRange& range, std::shared_ptr<const Schema> schema,
                         size_t batch_rows, const std::function<bool(Batch&)>& emit) override {
    ++reads;
    std::vector<Row> in;
    for (const auto& [id, r] : rows) {
      if (!range.lower.is_null()) {
        const int64_t lo = range.lower.get<int64_t>();
        if (range.lower_closed ? r.c < lo : r.c <= lo) continue;
      }
      if (!range.upper.is_null()) {
        const int64_t hi = range.upper.get<int64_t>();
        if (range.upper_closed ? r.c > hi : r.c >= hi) continue;
      }
      in.push_back(r);
    }
    std::stable_sort(in.begin(), in.end(), [](const Row& a, const Row& b) { return a.c < b.c; });
    Batch b(schema);
    for (const Row& r : in) {
      b.column(0).AppendInt64(r.id);
      b.column(1).AppendInt64(r.c);
      b.column(2).AppendBytes(r.v);
      if (b.num_rows() >= batch_rows) {
        if (!emit(b)) return Status::Cancelled("stopped");
        b.Clear();
      }
    }
    if (b.num_rows() > 0 && !emit(b)) return Status::Cancelled("stopped");
    return Status::OK();
  }
};

std::shared_ptr<const Schema> TableSchema() {
  auto s = std::make_shared<Schema>();
  s->fields = {{1, "id", DataType::Int64(), true, ""},
               {2, "c", DataType::Int64(), true, ""},
               {3, "v", DataType::String(), false, ""}};
  s->identifier_field_ids = {1};
  return s;
}

// A destination keyed by id, and what each window wrote.
struct Destination {
  std::map<int64_t, std::pair<int64_t, std::string>> rows;
  std::vector<int64_t> written;  // ids, in the order the window emitted them
  void Clear() { written.clear(); }
};

class WindowTest : public ::testing::Test {
 protected:
  // Plans the next window as the sync does (from the last one's end) and reads it; the result's
  // end and ties become the next window's start.
  WindowRead Next(size_t tie_limit = 100, size_t batch_rows = 2) {
    WindowBounds bounds;
    bounds.from = end_;
    bounds.ties = ties_;
    auto upper = src_.MaxCursor({}, "c", end_);
    EXPECT_TRUE(upper.ok());
    bounds.upper = *upper;
    dst_.Clear();
    if (bounds.empty()) return WindowRead();
    auto r =
        ReadWindow(&src_, {}, "c", bounds, TableSchema(), batch_rows, tie_limit, [&](Batch& b) {
          for (size_t i = 0; i < b.num_rows(); ++i) {
            const int64_t id = b.column(0).ValueAt<int64_t>(i);
            dst_.written.push_back(id);
            dst_.rows[id] = {b.column(1).ValueAt<int64_t>(i), std::string(b.column(2).GetBytes(i))};
          }
          return true;
        });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    end_ = r->end;
    ties_ = r->ties;
    return *r;
  }
  void ExpectDestinationIsSource() {
    ASSERT_EQ(dst_.rows.size(), src_.rows.size());
    for (const auto& [id, r] : src_.rows) {
      ASSERT_TRUE(dst_.rows.count(id)) << "id " << id << " missing";
      EXPECT_EQ(dst_.rows[id].first, r.c) << "id " << id;
      EXPECT_EQ(dst_.rows[id].second, r.v) << "id " << id;
    }
  }
  std::vector<int64_t> Written() {
    std::vector<int64_t> w = dst_.written;
    std::sort(w.begin(), w.end());
    return w;
  }

  TableSource src_;
  Destination dst_;
  Json end_ = nullptr;
  std::optional<CursorTies> ties_;
};

TEST_F(WindowTest, ARowArrivingLaterAtTheLastValueIsRead) {
  // The reproduction: versions 10, 20, 20, then (4, 20) and (5, 30).
  src_.Put(1, 10, "a");
  src_.Put(2, 20, "b");
  src_.Put(3, 20, "c");
  WindowRead first = Next();
  EXPECT_EQ(first.rows, 3);
  EXPECT_EQ(first.end, 20);
  EXPECT_EQ(first.ties.rows(), 2u);
  src_.Put(4, 20, "d");
  src_.Put(5, 30, "e");
  WindowRead second = Next();
  EXPECT_EQ(Written(), (std::vector<int64_t>{4, 5}));  // 2 and 3 were committed unchanged
  EXPECT_EQ(second.end, 30);
  ExpectDestinationIsSource();
  WindowRead quiet = Next();
  EXPECT_EQ(quiet.rows, 0);
  EXPECT_EQ(quiet.end, 30);
  EXPECT_EQ(quiet.ties.Digest(), second.ties.Digest());
}

TEST_F(WindowTest, ARowChangedWithoutMovingTheCursorIsReadAgain) {
  for (int64_t id = 1; id <= 5; ++id) src_.Put(id, 7, "v" + std::to_string(id));
  Next();
  src_.Put(3, 7, "changed");  // a date cursor: changed again the same day
  const WindowRead r = Next();
  EXPECT_EQ(Written(), (std::vector<int64_t>{3}));
  EXPECT_EQ(r.end, 7);
  EXPECT_EQ(r.ties.rows(), 5u);
  ExpectDestinationIsSource();
  EXPECT_EQ(Next().rows, 0);
}

TEST_F(WindowTest, RowsAboveTheLastValueAreEachReadOnce) {
  for (int64_t id = 1; id <= 4; ++id) src_.Put(id, id <= 2 ? 1 : 2, "x");
  Next();
  for (int64_t id = 5; id <= 12; ++id) src_.Put(id, 2 + (id % 3), "y");  // at 2, 3 and 4
  src_.Put(1, 9, "moved");                                               // from below to the top
  const WindowRead r = Next();
  EXPECT_EQ(Written(), (std::vector<int64_t>{1, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(r.end, 9);
  EXPECT_EQ(r.ties.rows(), 1u);
  ExpectDestinationIsSource();
}

TEST_F(WindowTest, UnknownTiesAreAllWrittenAgainOnce) {
  src_.Put(1, 5, "a");
  src_.Put(2, 5, "b");
  Next();
  ties_.reset();  // a state written before ties were kept
  EXPECT_EQ(Next().rows, 2);
  EXPECT_EQ(Next().rows, 0);
}

TEST_F(WindowTest, PastTheLimitADigestDecidesAndEveryTieIsWrittenWhenItDiffers) {
  for (int64_t id = 1; id <= 6; ++id) src_.Put(id, 3, "t");
  const WindowRead first = Next(/*tie_limit=*/4);
  EXPECT_FALSE(first.ties.listed());
  EXPECT_EQ(first.ties.rows(), 6u);
  src_.reads = 0;
  EXPECT_EQ(Next(4).rows, 0);  // unchanged: one read of the ties, nothing written
  EXPECT_EQ(src_.reads, 1);
  src_.Put(7, 3, "new");
  src_.reads = 0;
  EXPECT_EQ(Next(4).rows, 7);  // changed: every tie written again
  EXPECT_EQ(src_.reads, 2);
  ExpectDestinationIsSource();
  EXPECT_EQ(Next(4).rows, 0);
}

TEST_F(WindowTest, AnEmptyTableOrNullCursorsReadNothing) {
  EXPECT_EQ(Next().rows, 0);
  EXPECT_TRUE(end_.is_null());
}

TEST_F(WindowTest, TiesDeletedAtTheSourceLeaveNothingToWrite) {
  src_.Put(1, 4, "a");
  src_.Put(2, 4, "b");
  Next();
  src_.rows.erase(2);
  EXPECT_EQ(Next().rows, 0);
}

TEST(CursorTiesTest, RoundTripsThroughJson) {
  CursorTies t(10);
  for (uint64_t f : {9ULL, 3ULL, 0xffffffffffffffffULL, 0ULL}) t.Add(f);
  auto back = CursorTies::FromJson(t.ToJson(), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->listed());
  EXPECT_EQ(back->rows(), 4u);
  EXPECT_EQ(back->Digest(), t.Digest());
  EXPECT_TRUE(back->Contains(3));
  EXPECT_TRUE(back->Contains(0xffffffffffffffffULL));
  EXPECT_FALSE(back->Contains(4));
}

TEST(CursorTiesTest, PastTheLimitOnlyTheDigestIsKept) {
  CursorTies t(2);
  for (uint64_t f : {1ULL, 2ULL, 3ULL}) t.Add(f);
  EXPECT_FALSE(t.listed());
  const Json j = t.ToJson();
  EXPECT_FALSE(j.contains("fingerprints"));
  auto back = CursorTies::FromJson(j, "test");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->listed());
  EXPECT_EQ(back->Digest(), t.Digest());
}

TEST(CursorTiesTest, CorruptRecordsAreRefused) {
  CursorTies t(10);
  t.Add(5);
  t.Add(6);
  Json j = t.ToJson();
  Json wrong_sum = j;
  wrong_sum["sum"] = "0000000000000001";
  Json wrong_count = j;
  wrong_count["rows"] = 3;
  Json bad_base64 = j;
  bad_base64["fingerprints"] = "%%%";
  for (const Json& bad : {wrong_sum, wrong_count, bad_base64, Json("x"), Json::object()}) {
    auto r = CursorTies::FromJson(bad, "the state file's entry");
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
    EXPECT_NE(r.status().message().find("the state file's entry"), std::string::npos);
  }
}

// Recovery: a window is named by its start and the ties committed there, so a crash after the
// commit of a window that started and ended at one value is still recognised.
TEST(CursorTiesTest, AWindowAtOneValueIsRecognisedByItsTies) {
  CursorTies before(10), after(10);
  before.Add(1);
  after.Add(1);
  after.Add(2);
  IncrementalProgress state;
  state.stream = "t";
  state.cursor_column = "c";
  state.cursor = 20;
  state.ties = before;
  IncrementalProgress marker = state;
  marker.from = 20;
  marker.window = IncrementalProgress::WindowId("t", 20, before);
  marker.ties = after;
  auto d = DecideIncremental("t", "c", state.ToJson(), marker.ToJson());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->state_behind);
  ASSERT_TRUE(d->start.ties.has_value());
  EXPECT_EQ(d->start.ties->Digest(), after.Digest());
  // The state already has that window's ties: it is not behind.
  state.ties = after;
  d = DecideIncremental("t", "c", state.ToJson(), marker.ToJson());
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->state_behind);
}

}  // namespace
}  // namespace ferry::engine
