#include "ferry/graph/graph.h"

#include <thread>

namespace ferry::graph {

std::shared_ptr<Edge> Graph::AddEdge(size_t capacity) {
  auto e = std::make_shared<Edge>(capacity);
  edges_.push_back(e);
  return e;
}

void Graph::AddNode(std::unique_ptr<Node> node) { nodes_.push_back(std::move(node)); }

Status Graph::Run() {
  std::mutex mu;
  Status first;  // guarded by mu
  std::vector<std::thread> threads;
  threads.reserve(nodes_.size());
  for (auto& n : nodes_) {
    Node* node = n.get();
    threads.emplace_back([&, node] {
      Status s = node->Run();
      if (s.ok()) return;
      std::lock_guard<std::mutex> lock(mu);
      if (first.ok()) {
        first = s;
        // Cancel: wake every blocked sender and receiver.
        for (auto& e : edges_) e->Close();
      }
    });
  }
  for (auto& t : threads) t.join();
  return first;
}

}  // namespace ferry::graph
