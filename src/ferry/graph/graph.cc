#include "ferry/graph/graph.h"

#include <time.h>

#include <chrono>
#include <cstdio>
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
  times_.assign(nodes_.size(), NodeTime{});
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node* node = nodes_[i].get();
    NodeTime* time = &times_[i];  // this thread's alone
    threads.emplace_back([&, node, time] {
      const auto start = std::chrono::steady_clock::now();
      Status s = RunCatching(node->name(), [&] { return node->Run(); });
      time->node = node->name();
      time->seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      timespec cpu{};
      if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) {
        time->cpu_seconds =
            static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) / 1e9;
      }
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

std::string Graph::DescribeTimes() const {
  std::string out;
  char buf[64];
  for (const NodeTime& t : times_) {
    if (!out.empty()) out += ", ";
    std::snprintf(buf, sizeof buf, " %.2f CPU s in %.2f s", t.cpu_seconds, t.seconds);
    out += t.node + buf;
  }
  return out;
}

}  // namespace ferry::graph
