#include "ferry/base/assert.h"

#include <cstdio>
#include <cstdlib>

namespace ferry::internal {

void CheckFailed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "ferry: invariant violated at %s:%d: %s %s\n", file, line, expr, msg);
  std::fflush(stderr);
  std::abort();
}

}  // namespace ferry::internal
