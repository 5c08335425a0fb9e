#include "ferry/graph/align.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

namespace ferry::graph {
namespace {

std::shared_ptr<Schema> OneColumn() {
  auto schema = std::make_shared<Schema>();
  schema->fields = {{1, "x", DataType::Int64(), true, ""}};
  return schema;
}

// What the output of an AlignNode carried, in order.
struct Out {
  enum Kind { kRow, kBarrier, kEnd } kind;
  uint32_t origin = 0;
  int64_t value = 0;
  Json inputs;
};

// Two (or more) inputs into one AlignNode; the test feeds the inputs and reads the output.
class Harness {
 public:
  // `acknowledge`: Next() acknowledges every combined barrier it reads, as a sink that has
  // committed it; false leaves them in progress.
  // `number`: a group's edges number their messages (GroupEdges); false: the test does (Seq).
  explicit Harness(size_t inputs, AlignOptions options, bool acknowledge = true, bool number = true)
      : schema_(OneColumn()), acknowledge_(acknowledge) {
    for (size_t i = 0; i < inputs; ++i) inputs_.push_back(std::make_shared<Edge>(4));
    output_ = std::make_shared<Edge>(4);
    if (options.input_names.empty()) {
      for (size_t i = 0; i < inputs; ++i) options.input_names.push_back(std::string(1, 'A' + i));
    }
    // A group's inputs number their messages, as one reader's edges do.
    std::map<size_t, std::vector<std::shared_ptr<Edge>>> groups;
    for (size_t i = 0; i < options.groups.size(); ++i)
      groups[options.groups[i]].push_back(inputs_[i]);
    for (const auto& [g, edges] : groups) {
      if (edges.size() > 1 && number) GroupEdges(edges);
    }
    node_ = std::make_unique<AlignNode>("align", inputs_, output_, std::move(options));
    runner_ = std::thread([this] { status_ = node_->Run(); });
  }
  ~Harness() {
    for (auto& in : inputs_) in->Close();
    output_->Close();
    if (runner_.joinable()) runner_.join();
  }

  void Row(size_t input, int64_t v) {
    auto b = std::make_unique<Batch>(schema_);
    b->column(0).AppendInt64(v);
    ASSERT_TRUE(inputs_[input]->Send(Message::Data(std::move(b))));
  }
  void Barrier(size_t input, int64_t position) {
    ASSERT_TRUE(inputs_[input]->Send(
        Message::MakeBarrier({CheckpointId(position), "s", Json{{"position", position}}})));
  }
  void End(size_t input) { ASSERT_TRUE(inputs_[input]->Send(Message::End())); }
  // A row or a barrier numbered `seq` by the test (as one reader's edges number them).
  void RowSeq(size_t input, int64_t v, uint64_t seq) {
    auto b = std::make_unique<Batch>(schema_);
    b->column(0).AppendInt64(v);
    Message m = Message::Data(std::move(b));
    m.seq = seq;
    ASSERT_TRUE(inputs_[input]->Send(std::move(m)));
  }
  void BarrierSeq(size_t input, int64_t position, uint64_t seq) {
    Message m = Message::MakeBarrier({CheckpointId(position), "s", Json{{"position", position}}});
    m.seq = seq;
    ASSERT_TRUE(inputs_[input]->Send(std::move(m)));
  }
  void Close(size_t input) { inputs_[input]->Close(); }

  // The next output message, or nullopt after `wait` without one.
  std::optional<Out> Next(std::chrono::milliseconds wait = std::chrono::seconds(10)) {
    std::optional<Message> m;
    if (output_->ReceiveFor(wait, &m) != Edge::ReceiveResult::kReceived) return std::nullopt;
    Out o{Out::kEnd};
    if (m->kind == Message::Kind::kBatch) {
      o.kind = Out::kRow;
      o.origin = m->origin;
      o.value = m->batch->column(0).values<int64_t>()[0];
    } else if (m->kind == Message::Kind::kBarrier) {
      o.kind = Out::kBarrier;
      o.inputs = m->barrier.position["inputs"];
      if (acknowledge_) node_->Acknowledge();
    }
    return o;
  }
  // Output until the end.
  std::vector<Out> Drain() {
    std::vector<Out> all;
    while (auto o = Next()) {
      all.push_back(*o);
      if (o->kind == Out::kEnd) break;
    }
    return all;
  }
  Status Finish() {
    runner_.join();
    return status_;
  }
  AlignNode& node() { return *node_; }

 private:
  std::shared_ptr<Schema> schema_;
  bool acknowledge_;
  std::vector<std::shared_ptr<Edge>> inputs_;
  std::shared_ptr<Edge> output_;
  std::unique_ptr<AlignNode> node_;
  std::thread runner_;
  Status status_;
};

std::vector<int64_t> Positions(const Json& list) {
  std::vector<int64_t> out;
  for (const auto& p : list) out.push_back(p["position"].get<int64_t>());
  return out;
}

// Nothing A sends after its barrier passes before B's barrier: the combined barrier carries both
// positions and separates exactly the rows before them from the rows after.
TEST(AlignNodeTest, ExactlyOnceHoldsAnInputBackUntilEveryInputReachesItsBarrier) {
  Harness h(2, AlignOptions{});
  h.Row(0, 1);
  h.Barrier(0, 10);
  h.Row(0, 2);  // after A's barrier
  h.End(0);
  h.Row(1, 100);
  auto first = h.Next();
  ASSERT_TRUE(first);
  auto second = h.Next();
  ASSERT_TRUE(second);
  std::set<int64_t> before = {first->value, second->value};
  EXPECT_EQ(before, (std::set<int64_t>{1, 100}));
  // Row 2 waits behind A's barrier while B has not reached one.
  EXPECT_FALSE(h.Next(std::chrono::milliseconds(300)));
  h.Barrier(1, 20);
  h.Row(1, 101);
  h.End(1);
  auto rest = h.Drain();
  ASSERT_EQ(rest.size(), 4u);
  ASSERT_EQ(rest[0].kind, Out::kBarrier);
  EXPECT_EQ(Positions(rest[0].inputs[0]), std::vector<int64_t>{10});
  EXPECT_EQ(Positions(rest[0].inputs[1]), std::vector<int64_t>{20});
  std::set<int64_t> after = {rest[1].value, rest[2].value};
  EXPECT_EQ(after, (std::set<int64_t>{2, 101}));
  EXPECT_EQ(rest[3].kind, Out::kEnd);
  EXPECT_TRUE(h.Finish().ok());
}

// Inputs fed by one reader (a source's shards) align as one: a barrier of A completes the
// group's part of a checkpoint (B, not started, is not waited for), and holds B too, so nothing
// of B passes before the checkpoint goes out.
TEST(AlignNodeTest, InputsOfOneReaderAlignAsOneAndAreHeldTogether) {
  AlignOptions o;
  o.groups = {0, 0, 1};  // A and B read in turn by one reader; C by another
  Harness h(3, o);
  h.Row(0, 1);
  h.Barrier(0, 10);
  h.End(0);
  h.Row(1, 5);  // B starts after A's end
  h.Row(2, 100);
  auto first = h.Next();
  ASSERT_TRUE(first);
  auto second = h.Next();
  ASSERT_TRUE(second);
  EXPECT_EQ((std::set<int64_t>{first->value, second->value}), (std::set<int64_t>{1, 100}));
  // B's row waits behind A's barrier while C has not reached one.
  EXPECT_FALSE(h.Next(std::chrono::milliseconds(300)));
  h.Barrier(2, 20);
  auto cp = h.Next();
  ASSERT_TRUE(cp);
  ASSERT_EQ(cp->kind, Out::kBarrier);
  EXPECT_EQ(Positions(cp->inputs[0]), std::vector<int64_t>{10});
  EXPECT_TRUE(cp->inputs[1].empty());
  EXPECT_EQ(Positions(cp->inputs[2]), std::vector<int64_t>{20});
  auto b = h.Next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->value, 5);
  EXPECT_EQ(b->origin, 1u);
  h.Barrier(1, 11);
  h.End(1);
  h.End(2);
  auto rest = h.Drain();
  ASSERT_EQ(rest.size(), 2u);
  ASSERT_EQ(rest[0].kind, Out::kBarrier);
  EXPECT_EQ(Positions(rest[0].inputs[1]), std::vector<int64_t>{11});
  EXPECT_EQ(rest[1].kind, Out::kEnd);
  EXPECT_TRUE(h.Finish().ok());
}

// What one reader sent after a barrier never joins that barrier's checkpoint, even when its pump
// brings it first: B's row (sent after A's barrier) reaches the node before A's row and barrier,
// and still waits for the checkpoint.
TEST(AlignNodeTest, OneReadersMessagesAreTakenInTheOrderItSentThem) {
  AlignOptions o;
  o.groups = {0, 0, 1};
  Harness h(3, o, /*acknowledge=*/true, /*number=*/false);
  h.RowSeq(1, 5, 3);  // sent after A's barrier (seq 2), arrives first
  EXPECT_FALSE(h.Next(std::chrono::milliseconds(200)));
  h.RowSeq(0, 1, 1);
  h.BarrierSeq(0, 10, 2);
  auto first = h.Next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->value, 1);
  // B's row is after the group's barrier: it waits while C has not reached one.
  EXPECT_FALSE(h.Next(std::chrono::milliseconds(300)));
  h.Barrier(2, 20);
  auto cp = h.Next();
  ASSERT_TRUE(cp);
  ASSERT_EQ(cp->kind, Out::kBarrier);
  EXPECT_EQ(Positions(cp->inputs[0]), std::vector<int64_t>{10});
  EXPECT_TRUE(cp->inputs[1].empty());
  auto b = h.Next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->value, 5);
  h.RowSeq(1, 6, 4);
  auto c = h.Next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->value, 6);
}

// One reader's inputs alone: each barrier is a checkpoint at once, in the reader's order.
TEST(AlignNodeTest, OneReadersInputsNeverWaitForAnInputItHasNotStarted) {
  AlignOptions o;
  o.groups = {0, 0};
  Harness h(2, o);
  h.Row(0, 1);
  h.Barrier(0, 10);
  auto row = h.Next();
  ASSERT_TRUE(row);
  auto cp = h.Next();
  ASSERT_TRUE(cp);
  ASSERT_EQ(cp->kind, Out::kBarrier);
  EXPECT_EQ(Positions(cp->inputs[0]), std::vector<int64_t>{10});
  h.End(0);
  h.Row(1, 2);
  h.Barrier(1, 20);
  h.End(1);
  auto rest = h.Drain();
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0].value, 2);
  ASSERT_EQ(rest[1].kind, Out::kBarrier);
  EXPECT_EQ(Positions(rest[1].inputs[1]), std::vector<int64_t>{20});
  EXPECT_EQ(rest[2].kind, Out::kEnd);
  EXPECT_TRUE(h.Finish().ok());
}

TEST(AlignNodeTest, AtLeastOnceLetsDataAfterABarrierThrough) {
  AlignOptions o;
  o.exactly_once = false;
  Harness h(2, o);
  h.Row(0, 1);
  h.Barrier(0, 10);
  h.Row(0, 2);
  std::vector<int64_t> seen;
  for (int k = 0; k < 2; ++k) {
    auto m = h.Next();
    ASSERT_TRUE(m);
    ASSERT_EQ(m->kind, Out::kRow);
    seen.push_back(m->value);
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2}));  // row 2 passed before B's barrier
  h.Barrier(1, 20);
  auto b = h.Next();
  ASSERT_TRUE(b);
  ASSERT_EQ(b->kind, Out::kBarrier);
  EXPECT_EQ(Positions(b->inputs[0]), std::vector<int64_t>{10});
  EXPECT_EQ(Positions(b->inputs[1]), std::vector<int64_t>{20});
  h.End(0);
  h.End(1);
  auto rest = h.Drain();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].kind, Out::kEnd);
  EXPECT_TRUE(h.Finish().ok());
}

// The guarantee of each mode when the process dies between two inputs' barriers: a sink commits
// what it received before a combined barrier with the barrier's positions, the process dies, and
// a restart replays each source from its position. Each source sends rows 1..6 (A: 1..6, B:
// 101..106) with a barrier after its third row; A races ahead, B's barrier comes late.
std::map<int64_t, int> CommittedThenReplayed(bool exactly_once) {
  AlignOptions o;
  o.exactly_once = exactly_once;
  Harness h(2, o);
  for (int64_t v = 1; v <= 3; ++v) h.Row(0, v);
  h.Barrier(0, 3);
  std::vector<Out> received;
  // A's rows after its barrier: sent from another thread, since exactly_once holds them back.
  std::thread a_rest([&] {
    for (int64_t v = 4; v <= 6; ++v) h.Row(0, v);
  });
  for (int64_t v = 101; v <= 103; ++v) h.Row(1, v);
  if (!exactly_once) {
    // Wait until A's later rows are through, as a fast source's would be.
    while (true) {
      auto m = h.Next();
      if (!m) break;
      received.push_back(*m);
      if (m->kind == Out::kRow && m->value == 6) break;
    }
  }
  h.Barrier(1, 3);
  // The sink commits at the combined barrier; then the process dies.
  Json positions;
  while (auto m = h.Next()) {
    if (m->kind == Out::kBarrier) {
      positions = m->inputs;
      break;
    }
    received.push_back(*m);
  }
  std::map<int64_t, int> table;
  for (const auto& r : received) ++table[r.value];
  // The restart: each source from the last position the commit's marker names.
  const int64_t a_from = Positions(positions[0]).back(), b_from = Positions(positions[1]).back();
  for (int64_t v = a_from + 1; v <= 6; ++v) ++table[v];
  for (int64_t v = b_from + 1; v <= 6; ++v) ++table[100 + v];
  h.End(1);
  a_rest.join();
  h.End(0);
  h.Drain();
  EXPECT_TRUE(h.Finish().ok());
  return table;
}

TEST(AlignNodeTest, ExactlyOnceACrashBetweenTwoBarriersReplaysNothingTwice) {
  auto table = CommittedThenReplayed(/*exactly_once=*/true);
  EXPECT_EQ(table.size(), 12u);  // 1..6 and 101..106: nothing missing
  for (const auto& [v, n] : table) EXPECT_EQ(n, 1) << "row " << v;
}

TEST(AlignNodeTest, AtLeastOnceACrashBetweenTwoBarriersDuplicatesWhatPassedAPosition) {
  auto table = CommittedThenReplayed(/*exactly_once=*/false);
  EXPECT_EQ(table.size(), 12u);  // still nothing missing
  std::vector<int64_t> twice;
  for (const auto& [v, n] : table) {
    if (n > 1) twice.push_back(v);
  }
  // A's rows after its barrier were committed with A's position 3, and are read again.
  EXPECT_EQ(twice, (std::vector<int64_t>{4, 5, 6}));
}

TEST(AlignNodeTest, AlignmentTimeoutAbandonsTheCheckpointAndTheNextCoversIt) {
  AlignOptions o;
  o.alignment_timeout_ms = 100;
  Harness h(2, o);
  h.Barrier(0, 1);
  h.Row(0, 2);
  // B sends no barrier: after the timeout A goes on.
  auto m = h.Next();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, Out::kRow);
  EXPECT_EQ(m->value, 2);
  EXPECT_EQ(h.node().abandoned(), 1);
  h.Barrier(0, 3);
  h.Barrier(1, 7);
  auto b = h.Next();
  ASSERT_TRUE(b);
  ASSERT_EQ(b->kind, Out::kBarrier);
  // The abandoned checkpoint's position travels with the next one.
  EXPECT_EQ(Positions(b->inputs[0]), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Positions(b->inputs[1]), std::vector<int64_t>{7});
  h.End(0);
  h.End(1);
  h.Drain();
  EXPECT_TRUE(h.Finish().ok());
}

TEST(AlignNodeTest, TooManyAbandonedAlignmentsInARowFailNamingTheLateSource) {
  AlignOptions o;
  o.alignment_timeout_ms = 50;
  o.tolerable_failures = 1;
  o.input_names = {"east", "west"};
  Harness h(2, o);
  h.Barrier(0, 1);
  h.Barrier(0, 2);  // held until the first abandon, then aligns again and is abandoned again
  Status s = h.Finish();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("west"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("alignment_timeout"), std::string::npos) << s.message();
  EXPECT_EQ(h.node().abandoned(), 2);
}

TEST(AlignNodeTest, RequestsABarrierFromTheInputsThatHaveNotReachedOne) {
  std::mutex mu;
  std::vector<size_t> requested;
  AlignOptions o;
  o.request = [&](size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    requested.push_back(i);
  };
  Harness h(3, o);
  h.Barrier(1, 5);
  for (int k = 0; k < 1000; ++k) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (requested.size() >= 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    std::sort(requested.begin(), requested.end());
    EXPECT_EQ(requested, (std::vector<size_t>{0, 2}));
  }
  h.Barrier(0, 1);
  h.Barrier(2, 1);
  h.End(0);
  h.End(1);
  h.End(2);
  auto rest = h.Drain();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].kind, Out::kBarrier);
  EXPECT_TRUE(h.Finish().ok());
}

// With the sink still committing the previous checkpoint, a newly aligned one is folded into
// the next; the last one, at the end, always goes out.
TEST(AlignNodeTest, MaxConcurrentSubsumesCheckpointsWhileOneIsInProgress) {
  Harness h(2, AlignOptions{}, /*acknowledge=*/false);
  h.Barrier(0, 1);
  h.Barrier(1, 1);
  auto first = h.Next();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind, Out::kBarrier);
  // Not acknowledged: the next alignments are subsumed.
  for (int64_t p : {2, 3}) {
    h.Barrier(0, p);
    h.Barrier(1, p);
  }
  h.End(0);
  h.End(1);
  auto rest = h.Drain();
  EXPECT_TRUE(h.Finish().ok());
  ASSERT_EQ(rest.size(), 2u);
  ASSERT_EQ(rest[0].kind, Out::kBarrier);
  EXPECT_EQ(Positions(rest[0].inputs[0]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Positions(rest[0].inputs[1]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.node().subsumed(), 2);
}

TEST(AlignNodeTest, AnInputThatEndsEarlyLeavesTheOthersToAlignAlone) {
  Harness h(2, AlignOptions{});
  h.Barrier(0, 1);
  h.End(0);
  h.Barrier(1, 1);
  auto first = h.Next();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind, Out::kBarrier);
  h.Row(1, 5);
  h.Barrier(1, 2);
  h.End(1);
  auto rest = h.Drain();
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0].value, 5);
  ASSERT_EQ(rest[1].kind, Out::kBarrier);
  EXPECT_TRUE(rest[1].inputs[0].empty());
  EXPECT_EQ(Positions(rest[1].inputs[1]), std::vector<int64_t>{2});
  EXPECT_TRUE(h.Finish().ok());
}

TEST(AlignNodeTest, AnInputClosedBeforeItsEndCancels) {
  Harness h(2, AlignOptions{});
  h.Barrier(0, 1);
  h.Close(1);
  EXPECT_EQ(h.Finish().code(), StatusCode::kCancelled);
}

// Changes by key: a source's two checkpoints never meet in one commit.
TEST(AlignNodeTest, KeyedCheckpointsAreNeverFoldedTogether) {
  AlignOptions o;
  o.keyed = true;
  Harness h(2, o);
  // Not acknowledged (the harness acknowledges when it reads a barrier): both still go out.
  h.Barrier(0, 1);
  h.Barrier(1, 1);
  h.Barrier(0, 2);
  h.Barrier(1, 2);
  h.End(0);
  h.End(1);
  auto all = h.Drain();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(Positions(all[0].inputs[0]), std::vector<int64_t>{1});
  EXPECT_EQ(Positions(all[1].inputs[0]), std::vector<int64_t>{2});
  EXPECT_EQ(h.node().subsumed(), 0);
  EXPECT_TRUE(h.Finish().ok());
}

TEST(AlignNodeTest, KeyedAtLeastOnceCommitsEachBarrierAlone) {
  AlignOptions o;
  o.keyed = true;
  o.exactly_once = false;
  Harness h(2, o);
  h.Row(1, 100);  // B's data before its barrier
  h.Row(0, 1);
  h.Barrier(0, 1);
  std::vector<Out> seen;
  while (seen.empty() || seen.back().kind != Out::kBarrier) {
    auto m = h.Next();
    ASSERT_TRUE(m);
    seen.push_back(*m);
  }
  // A's barrier went out without waiting for B's.
  ASSERT_EQ(seen.back().kind, Out::kBarrier);
  EXPECT_EQ(Positions(seen.back().inputs[0]), std::vector<int64_t>{1});
  EXPECT_TRUE(seen.back().inputs[1].empty());
  h.Barrier(1, 5);
  auto b = h.Next();
  while (b && b->kind == Out::kRow) b = h.Next();  // B's row may come after A's barrier
  ASSERT_TRUE(b);
  ASSERT_EQ(b->kind, Out::kBarrier);
  EXPECT_TRUE(b->inputs[0].empty());
  EXPECT_EQ(Positions(b->inputs[1]), std::vector<int64_t>{5});
  h.End(0);
  h.End(1);
  h.Drain();
  EXPECT_TRUE(h.Finish().ok());
}

TEST(AlignNodeTest, KeyedAlignmentTimeoutCommitsTheArrivedBarriersAlone) {
  AlignOptions o;
  o.keyed = true;
  o.alignment_timeout_ms = 100;
  Harness h(2, o);
  h.Row(1, 100);
  h.Barrier(0, 1);
  h.Row(0, 2);  // after A's barrier: must not join A's first checkpoint
  std::vector<Out> seen;
  while (true) {
    auto m = h.Next();
    ASSERT_TRUE(m);
    seen.push_back(*m);
    if (m->kind == Out::kBarrier) break;
  }
  EXPECT_EQ(Positions(seen.back().inputs[0]), std::vector<int64_t>{1});
  EXPECT_TRUE(seen.back().inputs[1].empty());
  for (const auto& o : seen) EXPECT_NE(o.value, 2) << "row 2 passed A's barrier";
  EXPECT_EQ(h.node().abandoned(), 1);
  h.End(0);
  h.End(1);
  auto rest = h.Drain();
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().value, 2);
  EXPECT_TRUE(h.Finish().ok());
}

}  // namespace
}  // namespace ferry::graph
