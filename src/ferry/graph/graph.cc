#include "ferry/graph/graph.h"

#include <new>
#include <stdexcept>
#include <thread>

namespace ferry::graph {

std::shared_ptr<Edge> Graph::AddEdge(size_t capacity) {
  auto e = std::make_shared<Edge>(capacity);
  edges_.push_back(e);
  return e;
}

void Graph::AddNode(std::unique_ptr<Node> node) { nodes_.push_back(std::move(node)); }

Status RunCatching(const std::string& what, const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Status::Internal(what +
                            ": out of memory (an allocation failed); lower batch_rows, "
                            "chunk_rows or readers, or give ferry more memory");
  } catch (const std::exception& e) {
    return Status::Internal(what + ": unexpected error: " + e.what());
  }
}

Status Graph::Run() {
  std::mutex mu;
  Status first;  // guarded by mu
  std::vector<std::thread> threads;
  threads.reserve(nodes_.size());
  for (auto& n : nodes_) {
    Node* node = n.get();
    threads.emplace_back([&, node] {
      Status s = RunCatching(node->name(), [&] { return node->Run(); });
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
