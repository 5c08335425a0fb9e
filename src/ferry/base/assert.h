// FERRY_CHECK: an invariant of the protocol or a programmer error. Always on, also in release
// builds: a violated invariant stops the process before it can write wrong data.
#pragma once

namespace ferry::internal {
[[noreturn]] void CheckFailed(const char* expr, const char* file, int line, const char* msg);
}  // namespace ferry::internal

#define FERRY_CHECK(cond)                                            \
  do {                                                               \
    if (!(cond)) [[unlikely]]                                        \
      ::ferry::internal::CheckFailed(#cond, __FILE__, __LINE__, ""); \
  } while (0)

#define FERRY_CHECK_MSG(cond, msg)                                      \
  do {                                                                  \
    if (!(cond)) [[unlikely]]                                           \
      ::ferry::internal::CheckFailed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
