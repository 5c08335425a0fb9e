// ReadInOrder: several readers at once, one ordered stream out. A full refresh reads a table's
// chunks on several connections in parallel, while its sink still commits them one after
// another, each chunk's rows with that chunk's marker.
//
// Parts 0..n-1 are handed to `readers` reader threads in order. A reader reads one part at a
// time, and starts part j only while j < i + readers, where i is the part being handed on; a
// part holds at most `capacity` batches ahead of the hand-off. So at most readers * capacity
// batches wait, whatever the number of parts, and a slow consumer slows the readers
// (back-pressure) instead of filling memory.
//
// The calling thread hands on every batch of part i, in the order its reader produced them,
// then calls done(i), before anything of part i+1.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::graph {

// Runs on reader thread `reader` (0 .. readers-1) for part `part`; `emit` takes a batch and
// returns false once the hand-off has stopped (the read should then return).
using PartReader = std::function<Status(size_t reader, size_t part,
                                        const std::function<bool(std::unique_ptr<Batch>)>& emit)>;

// Returns OK when every part was read and handed on; otherwise the error of the first part (in
// part order) whose read failed, or Cancelled when `hand` or `done` returned false. Parts before
// the failing one were handed on and done; of the failing part, the batches read before the
// failure may have been handed on, but done() was not called; nothing of later parts was handed
// on. Every reader thread has ended when it returns.
Status ReadInOrder(size_t parts, size_t readers, size_t capacity, const PartReader& read,
                   const std::function<bool(std::unique_ptr<Batch>)>& hand,
                   const std::function<bool(size_t part)>& done);

}  // namespace ferry::graph
