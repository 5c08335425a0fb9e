#include "ferry/sink/transactional.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ferry::sink {
namespace {

// A destination in memory: what is committed, and a COMMIT whose answer can be lost after it
// landed or before it reached the server.
class MemoryStream : public TransactionalStream {
 public:
  enum class Cut { kNone, kAfterCommit, kBeforeCommit };

  MemoryStream() : TransactionalStream("mem.t", std::make_shared<Schema>(), nullptr) {}

  const Json& committed_marker() const { return committed_marker_; }
  Status StartLoad(const std::string&) override { return Status::OK(); }
  Status Write(const Batch&) override { return Status::OK(); }
  Status WriteUpserts(const Batch&) override { return Status::OK(); }
  Status WriteDeleteKeys(const Batch&) override { return Status::OK(); }
  Result<CommitResult> Publish(const std::string&, const Json& marker,
                               const MarkerCheck& already_landed) override {
    return Transact(
        marker, already_landed, [] { return Status::OK(); }, nullptr, nullptr, "publishing");
  }
  void DiscardPending() override { Rollback(); }

  // `rows` upserted, as a destination counts them.
  void Stage(uint64_t rows) {
    pending_.rows += rows;
    pending_.upserts += rows;
    pending_.bytes += rows * 10;
    staged_ += rows;
  }

  Cut cut = Cut::kNone;
  bool reconnect_fails = false;
  uint64_t committed_rows = 0;
  std::vector<std::string> calls;

 protected:
  Status Begin() override {
    calls.push_back("begin");
    txn_marker_ = committed_marker_;
    return Status::OK();
  }
  Result<Json> LockedMarker() override {
    calls.push_back("locked");
    return committed_marker_;
  }
  Status ApplyChanges() override {
    calls.push_back("apply");
    txn_rows_ = staged_;
    return Status::OK();
  }
  Status SetMarker(const Json& marker) override {
    calls.push_back("set");
    txn_marker_ = marker;
    return Status::OK();
  }
  Status SendCommit(bool) override {
    calls.push_back("commit");
    staged_ = 0;
    if (cut == Cut::kBeforeCommit) return Status::Unavailable("connection lost");
    committed_marker_ = txn_marker_;
    committed_rows += txn_rows_;
    txn_rows_ = 0;
    if (cut == Cut::kAfterCommit) return Status::Unavailable("connection lost");
    return Status::OK();
  }
  bool OutcomeUnknown(const Status& s) const override {
    return s.code() == StatusCode::kUnavailable;
  }
  Status Reconnect() override {
    calls.push_back("reconnect");
    return reconnect_fails ? Status::Unavailable("no server") : Status::OK();
  }
  Result<Json> ReadMarker() override {
    calls.push_back("read");
    return committed_marker_;
  }
  void RollbackTransaction() override {
    calls.push_back("rollback");
    txn_rows_ = 0;
  }

 private:
  Json committed_marker_ = nullptr;
  Json txn_marker_ = nullptr;
  uint64_t staged_ = 0;
  uint64_t txn_rows_ = 0;
};

MarkerCheck AtLeast(int64_t n) {
  return [n](const Json& m) { return m.is_number() && m.get<int64_t>() >= n; };
}

TEST(TransactionalStreamTest, ACommitRunsTheStepsInOrderAndCountsItsRows) {
  MemoryStream s;
  s.Stage(3);
  auto r = s.Commit("", Json(1), {}, AtLeast(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->already_landed);
  EXPECT_EQ(s.calls, (std::vector<std::string>{"begin", "locked", "apply", "set", "commit"}));
  EXPECT_EQ(s.totals().rows, 3u);
  EXPECT_EQ(s.totals().bytes, 30u);
  EXPECT_FALSE(s.HasPending());
}

TEST(TransactionalStreamTest, ALoadsCommitAppliesNoChanges) {
  MemoryStream s;
  s.Stage(2);
  ASSERT_TRUE(s.Commit("run-1", Json(1), {}, AtLeast(1)).ok());
  EXPECT_EQ(s.calls, (std::vector<std::string>{"begin", "locked", "set", "commit"}));
  EXPECT_EQ(s.totals().rows, 2u);
}

TEST(TransactionalStreamTest, WorkThatLandedBeforeIsRolledBackAndNotCounted) {
  MemoryStream s;
  s.Stage(3);
  ASSERT_TRUE(s.Commit("", Json(1), {}, AtLeast(1)).ok());
  s.calls.clear();
  s.Stage(3);
  auto r = s.Commit("", Json(1), {}, AtLeast(1));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->already_landed);
  EXPECT_EQ(s.calls, (std::vector<std::string>{"begin", "locked", "rollback"}));
  EXPECT_EQ(s.totals().rows, 3u);
  EXPECT_FALSE(s.HasPending());
}

TEST(TransactionalStreamTest, ACommitThatLandedThoughItsAnswerWasLostCountsItsRows) {
  MemoryStream s;
  s.cut = MemoryStream::Cut::kAfterCommit;
  s.Stage(4);
  auto r = s.Commit("", Json(1), {}, AtLeast(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->already_landed);  // this commit wrote them
  EXPECT_EQ(s.committed_rows, 4u);
  EXPECT_EQ(s.totals().rows, 4u);
  EXPECT_EQ(s.totals().bytes, 40u);
  EXPECT_EQ(s.calls, (std::vector<std::string>{"begin", "locked", "apply", "set", "commit",
                                               "reconnect", "read"}));
}

TEST(TransactionalStreamTest, ACommitThatDidNotLandIsRetryableAndNotCounted) {
  MemoryStream s;
  s.cut = MemoryStream::Cut::kBeforeCommit;
  s.Stage(4);
  auto r = s.Commit("", Json(1), {}, AtLeast(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("did not land"), std::string::npos);
  EXPECT_EQ(s.totals().rows, 0u);
  EXPECT_FALSE(s.HasPending());
  // Without a new connection the outcome stays unknown: the COMMIT's error, naming the table.
  s.reconnect_fails = true;
  s.Stage(1);
  r = s.Commit("", Json(1), {}, AtLeast(1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("committing to mem.t"), std::string::npos);
}

TEST(TransactionalStreamTest, PublishIsTheSameProtocol) {
  MemoryStream s;
  s.cut = MemoryStream::Cut::kAfterCommit;
  auto r = s.Publish("run-1", Json(2), AtLeast(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(s.committed_marker(), Json(2));
  s.cut = MemoryStream::Cut::kNone;
  r = s.Publish("run-1", Json(2), AtLeast(2));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->already_landed);
}

TEST(ParseCheckpointMarkerTest, NoRowIsNullAndTextThatIsNotJsonIsCorruption) {
  EXPECT_TRUE(ParseCheckpointMarker(std::nullopt, "s.t")->is_null());
  EXPECT_EQ(*ParseCheckpointMarker("{\"a\": 1}", "s.t"), (Json{{"a", 1}}));
  auto bad = ParseCheckpointMarker("{", "s.t");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_NE(bad.status().message().find("s.t"), std::string::npos);
}

}  // namespace
}  // namespace ferry::sink
