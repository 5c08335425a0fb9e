// RunWithDeadline: work that another thread interrupts when it runs too long (a sink's commit
// blocked on a lock past checkpoint.timeout).
#pragma once

#include <cstdint>
#include <functional>

namespace ferry {

// Runs `work` on the calling thread. If it is still running `timeout_ms` later, `interrupt` is
// called once, from another thread, while `work` goes on (it should make `work` return soon, e.g.
// by cancelling the statement it waits on). Returns whether `interrupt` was called. No limit when
// timeout_ms <= 0.
bool RunWithDeadline(int64_t timeout_ms, const std::function<void()>& work,
                     const std::function<void()>& interrupt);

}  // namespace ferry
