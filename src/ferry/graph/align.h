// Where several inputs meet one output: a destination table fed by several sources (the same
// table in two databases, merged). Each source emits barriers at its own consistent points; the
// sink downstream commits once per checkpoint, with one position per source in its marker.
//
// exactly_once: an input whose barrier has arrived is held back (nothing after its barrier
// passes) until every other input has reached a barrier too or ended; then ONE combined barrier
// goes out, carrying every input's barrier positions since the previous one. So a commit holds,
// of every source, exactly the data before the position its marker names: a restart replays
// each source from its own position and nothing is applied twice.
//
// at_least_once: nothing is held back; a combined barrier goes out once every input has sent a
// barrier. A commit may then hold data that follows an input's position, and a restart replays
// it: appends are duplicated, upserts and deletes by key land again unchanged.
//
// Checkpoints that cannot complete are abandoned harmlessly:
// - alignment_timeout: an alignment that has waited this long releases the inputs it holds; the
//   barriers already received are kept and go out with the next combined barrier (a later cut).
//   More than `tolerable_failures` such abandons in a row fail the node (kUnavailable).
// - max_concurrent: a checkpoint that aligns while this many combined barriers are still
//   unacknowledged downstream (Acknowledge) is subsumed by the next one the same way. The last
//   one, when every input has ended, always goes out.
//
// keyed: the output applies changes by key (CDC, incremental windows), and a key's two changes
// must never meet in one commit (an Iceberg equality delete does not reach rows of its own
// snapshot). So no input brings the data of two of its barriers into one checkpoint:
// - exactly_once: an abandoned alignment (alignment_timeout) goes out with the barriers that did
//   arrive; the late inputs' data in it is replayed after a crash, which changes nothing for
//   upserts and deletes by key. Checkpoints are never subsumed (max_concurrent does not apply:
//   they queue for the sink).
// - at_least_once: every barrier goes out at once, as a checkpoint of its input alone.
//
// groups: inputs fed by one reader, one after the other or interleaved (several tables of one
// source merged into one table: the source reads them in turn, or from one log). Their messages
// are numbered in the order the reader sent them (Message::seq, stamped by the edges: see
// GroupEdges), and the node takes a group's messages in that order, whichever pump brings them
// first. A group counts as one input: a barrier of any of its inputs holds what the reader sent
// after it, on every input of the group, and a checkpoint aligns once every group has an input
// at a barrier or has ended. So the reader is never waited for on an input it has not started,
// and nothing it sent after a barrier joins that barrier's checkpoint.
//
// Messages keep their order per input; each carries its input's index in Message::origin. A
// combined barrier is Barrier{seq, "aligned", {"inputs": [[position, ...], ...]}} (one list per
// input, in input order; a list is empty for an input that sent no barrier since the last one).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/graph/graph.h"

namespace ferry::graph {

struct AlignOptions {
  bool exactly_once = true;
  bool keyed = false;
  int64_t alignment_timeout_ms = 0;  // 0: wait without limit
  int max_concurrent = 1;
  int tolerable_failures = 10;
  std::vector<std::string> input_names;  // for messages; default "input <i>"
  // Per input, its group (inputs fed by one reader share one); empty: each input alone.
  std::vector<size_t> groups;
  // Asks the source behind input `i` for a barrier soon (its next consistent point). Called when
  // another input's barrier starts a checkpoint that `i` has not reached.
  std::function<void(size_t i)> request;
};

// Makes `edges` (fed by one reader) number their messages in the order it sends them, for an
// AlignNode that has them in one group.
void GroupEdges(const std::vector<std::shared_ptr<Edge>>& edges);

class AlignNode : public Node {
 public:
  AlignNode(std::string name, std::vector<std::shared_ptr<Edge>> inputs,
            std::shared_ptr<Edge> output, AlignOptions options);
  std::string name() const override { return name_; }
  Status Run() override;

  // The consumer of the output finished a combined barrier's checkpoint. Any thread.
  void Acknowledge() { in_flight_.fetch_sub(1, std::memory_order_acq_rel); }

  // Checkpoints abandoned (alignment_timeout) and subsumed (max_concurrent) so far.
  int64_t abandoned() const { return abandoned_total_.load(); }
  int64_t subsumed() const { return subsumed_total_.load(); }

 private:
  struct Arrival {
    size_t input = 0;
    std::optional<Message> message;  // nullopt: the input closed without its end (cancelled)
  };
  void Pump(size_t i);
  void Release();  // lets every held input go on
  std::string InputName(size_t i) const;
  bool Emit(bool final_checkpoint);

  std::string name_;
  std::vector<std::shared_ptr<Edge>> inputs_;
  std::shared_ptr<Edge> output_;
  AlignOptions options_;
  Channel<Arrival> arrivals_;

  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  std::vector<bool> held_;  // guarded by gate_mu_: group g waits at a barrier
  // Guarded by gate_mu_: of a held group whose messages are numbered, the barrier's number: what
  // the reader sent before it still passes.
  std::vector<uint64_t> held_seq_;
  size_t GroupOf(size_t i) const { return i < options_.groups.size() ? options_.groups[i] : i; }
  // Its group has several inputs: their messages are numbered and taken in order.
  bool Ordered(size_t i) const;
  bool stopping_ = false;  // guarded by gate_mu_

  // Run's own state (one thread).
  std::vector<std::vector<Json>> pending_;  // barrier positions per input since the last emit
  std::vector<bool> ended_;
  int64_t seq_ = 0;

  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> abandoned_total_{0};
  std::atomic<int64_t> subsumed_total_{0};
};

}  // namespace ferry::graph
