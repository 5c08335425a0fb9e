#include "ferry/graph/graph.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

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
