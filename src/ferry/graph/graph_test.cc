#include "ferry/graph/graph.h"

#include <gtest/gtest.h>

#include <chrono>
#include <new>
#include <stdexcept>
#include <thread>

namespace ferry::graph {
namespace {

class Producer : public Node {
 public:
  Producer(std::shared_ptr<Edge> out, int n, bool fail)
      : out_(std::move(out)), n_(n), fail_(fail) {}
  std::string name() const override { return "producer"; }
  Status Run() override {
    auto schema = std::make_shared<Schema>();
    schema->fields = {{1, "x", DataType::Int64(), true, ""}};
    for (int i = 0; i < n_; ++i) {
      auto b = std::make_unique<Batch>(schema);
      b->column(0).AppendInt64(i);
      if (!out_->Send(Message::Data(std::move(b)))) return Status::Cancelled("closed");
      if (fail_ && i == 3) return Status::IOError("source broke");
    }
    out_->Send(Message::MakeBarrier(Barrier{CheckpointId(1), "s", Json{{"n", n_}}}));
    out_->Send(Message::End());
    return Status::OK();
  }

 private:
  std::shared_ptr<Edge> out_;
  int n_;
  bool fail_;
};

class Consumer : public Node {
 public:
  explicit Consumer(std::shared_ptr<Edge> in) : in_(std::move(in)) {}
  std::string name() const override { return "consumer"; }
  Status Run() override {
    while (auto m = in_->Receive()) {
      if (m->kind == Message::Kind::kBatch) sum += m->batch->column(0).values<int64_t>()[0];
      if (m->kind == Message::Kind::kBarrier) barrier = m->barrier.position;
      if (m->kind == Message::Kind::kEnd) return Status::OK();
    }
    return Status::Cancelled("input closed before its end");
  }
  int64_t sum = 0;
  Json barrier;

 private:
  std::shared_ptr<Edge> in_;
};

TEST(GraphTest, DataAndBarriersFlowInOrder) {
  Graph g;
  auto e = g.AddEdge(2);
  g.AddNode(std::make_unique<Producer>(e, 100, false));
  auto consumer = std::make_unique<Consumer>(e);
  Consumer* c = consumer.get();
  g.AddNode(std::move(consumer));
  ASSERT_TRUE(g.Run().ok());
  EXPECT_EQ(c->sum, 4950);
  EXPECT_EQ(c->barrier["n"], 100);
}

// A node that spins on the CPU for `seconds`, and one that waits as long without using it.
class Busy : public Node {
 public:
  Busy(std::string name, double seconds, bool spin)
      : name_(std::move(name)), seconds_(seconds), spin_(spin) {}
  std::string name() const override { return name_; }
  Status Run() override {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_);
    if (!spin_) {
      std::this_thread::sleep_until(end);
      return Status::OK();
    }
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
    return Status::OK();
  }

 private:
  std::string name_;
  double seconds_;
  bool spin_;
};

TEST(GraphTest, EachNodesThreadTimesAreKept) {
  Graph g;
  g.AddNode(std::make_unique<Busy>("decoder", 0.3, true));
  g.AddNode(std::make_unique<Busy>("waiter", 0.3, false));
  ASSERT_TRUE(g.Run().ok());
  ASSERT_EQ(g.times().size(), 2u);
  EXPECT_EQ(g.times()[0].node, "decoder");
  EXPECT_EQ(g.times()[1].node, "waiter");
  for (const NodeTime& t : g.times()) EXPECT_GE(t.seconds, 0.29) << t.node;
  // The spinning thread used CPU (how much of its time depends on what else the machine runs);
  // the sleeping one next to none, and less.
  EXPECT_GT(g.times()[0].cpu_seconds, 0.01);
  EXPECT_LT(g.times()[1].cpu_seconds, g.times()[0].cpu_seconds);
  EXPECT_LT(g.times()[1].cpu_seconds, 0.05);
  const std::string line = g.DescribeTimes();
  EXPECT_NE(line.find("decoder "), std::string::npos) << line;
  EXPECT_NE(line.find(" CPU s in 0."), std::string::npos) << line;
  EXPECT_NE(line.find(", waiter "), std::string::npos) << line;
}

TEST(GraphTest, AFailingNodeCancelsTheOthersAndItsErrorIsReturned) {
  Graph g;
  auto e = g.AddEdge(2);
  g.AddNode(std::make_unique<Producer>(e, 100, true));
  g.AddNode(std::make_unique<Consumer>(e));
  Status s = g.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_EQ(s.message(), "source broke");
}

// A node that throws (an allocation that failed) ends the graph with an error naming the node,
// not the process.
class Thrower : public Node {
 public:
  std::string name() const override { return "sink t"; }
  Status Run() override { throw std::bad_alloc(); }
};

TEST(GraphTest, ANodeThatThrowsFailsTheGraphWithItsName) {
  Graph g;
  auto e = g.AddEdge(2);
  g.AddNode(std::make_unique<Producer>(e, 100, false));
  g.AddNode(std::make_unique<Thrower>());
  g.AddNode(std::make_unique<Consumer>(e));
  Status s = g.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("sink t: out of memory"), std::string::npos) << s.message();
  Status other = RunCatching("planning the chunks of t",
                             []() -> Status { throw std::length_error("vector too long"); });
  EXPECT_EQ(other.message(), "planning the chunks of t: unexpected error: vector too long");
}

}  // namespace
}  // namespace ferry::graph
