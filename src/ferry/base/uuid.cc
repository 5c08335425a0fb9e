#include "ferry/base/uuid.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>

namespace ferry {
namespace {
uint64_t Random64() {
  static std::mutex mu;
  static std::mt19937_64 rng([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }());
  std::lock_guard<std::mutex> lock(mu);
  return rng();
}
}  // namespace

std::string NewUuid() {
  uint64_t hi = Random64();
  uint64_t lo = Random64();
  hi = (hi & 0xffffffffffff0fffull) | 0x0000000000004000ull;  // version 4
  lo = (lo & 0x3fffffffffffffffull) | 0x8000000000000000ull;  // variant 10
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return buf;
}

int64_t NewPositiveId() {
  int64_t v = static_cast<int64_t>(Random64() & 0x7fffffffffffffffull);
  return v == 0 ? 1 : v;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ferry
