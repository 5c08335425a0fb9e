// The dataflow graph: nodes (sources, operators, sinks) joined by bounded channels that carry
// columnar batches and control events (barriers, end of stream).
//
// A source emits a Barrier at a consistent point (a transaction boundary, the end of a chunk) with
// the position it has reached; a sink that receives a barrier commits what it holds together with
// its marker, then the progress is recorded in the state file, and only once every stream of the
// source has it may the source forget its log up to there (the engine's sink node and
// coordinator, engine/nodes.h and engine/coordinator.h). Memory is bounded: every edge has a
// capacity, and a full edge blocks its producer (back-pressure).
//
// Graph::Run runs every node on its own thread. The first node to fail cancels the graph: every
// edge closes, blocked sends and receives return, and Run returns that first error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/channel.h"
#include "ferry/base/named_type.h"
#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::graph {

using Json = nlohmann::json;
using CheckpointId = NamedType<int64_t, struct CheckpointIdTag>;

struct Barrier {
  CheckpointId id;
  std::string split;  // what the position belongs to: a stream, a chunk, the log
  Json position;      // the source position reached at this barrier
};

struct Message {
  enum class Kind { kBatch, kBarrier, kEnd };
  Kind kind = Kind::kEnd;
  std::unique_ptr<Batch> batch;
  bool deletes = false;  // kBatch: the rows name keys to delete (CDC); only key columns are set
  uint32_t origin = 0;   // which input of an AlignNode the message came from
  // Its place among the messages one reader sends on several edges (AlignOptions::groups; the
  // edges number them: Channel::SetStamp); 0: not numbered.
  uint64_t seq = 0;
  Barrier barrier;

  static Message Data(std::unique_ptr<Batch> b, bool deletes = false) {
    Message m;
    m.kind = Kind::kBatch;
    m.batch = std::move(b);
    m.deletes = deletes;
    return m;
  }
  static Message MakeBarrier(Barrier b) {
    Message m;
    m.kind = Kind::kBarrier;
    m.barrier = std::move(b);
    return m;
  }
  static Message End() { return Message(); }
};

using Edge = Channel<Message>;

class Node {
 public:
  virtual ~Node() = default;
  virtual std::string name() const = 0;
  virtual Status Run() = 0;
};

// Set by SIGINT/SIGTERM handlers (or tests): sources stop at the next batch boundary.
class StopFlag {
 public:
  StopFlag() = default;
  // A flag that is also requested whenever `parent` is (a sync's own reasons to stop, beside
  // the process's signal).
  explicit StopFlag(const StopFlag* parent) : parent_(parent) {}
  void Request() { stop_.store(true, std::memory_order_release); }
  bool requested() const {
    return stop_.load(std::memory_order_acquire) || (parent_ != nullptr && parent_->requested());
  }

 private:
  std::atomic<bool> stop_{false};
  const StopFlag* parent_ = nullptr;
};

// Runs `fn`, turning an exception (an allocation that failed, a library's throw) into an error
// that names `what` was being done, instead of ending the process.
Status RunCatching(const std::string& what, const std::function<Status()>& fn);

// What one node's thread took: the CPU time it used and how long it ran.
struct NodeTime {
  std::string node;  // Node::name()
  double cpu_seconds = 0;
  double seconds = 0;
};

class Graph {
 public:
  std::shared_ptr<Edge> AddEdge(size_t capacity);
  void AddNode(std::unique_ptr<Node> node);
  // Runs every node to completion; returns the first failure (others are then cancelled).
  Status Run();
  // After Run: per node, in the order added. A node whose CPU seconds are near its seconds was
  // busy all along: the one that bounds the graph's speed.
  const std::vector<NodeTime>& times() const { return times_; }
  // times() as one line: "source (change log) 1.02 CPU s in 1.10 s, sink db.t 0.41 CPU s ...".
  std::string DescribeTimes() const;

 private:
  std::vector<std::shared_ptr<Edge>> edges_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<NodeTime> times_;
};

}  // namespace ferry::graph
