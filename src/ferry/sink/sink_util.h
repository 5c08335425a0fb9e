// Small helpers every destination uses: names of ferry's own tables, a schema's key, the JSON
// ferry stores, fixed-width values of a batch. No destination's client library is needed.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::sink {

// ---- names ----

inline constexpr uint64_t kFnvOffset = 14695981039346656037ull;
inline constexpr uint64_t kLoadIdOffset = 1469598103934665603ull;
// FNV-1a 64 of `s`, continuing from `h`.
uint64_t Fnv1a64(std::string_view s, uint64_t h = kFnvOffset);
// 16 lowercase hex digits.
std::string Hex16(uint64_t v);
// The hex id of a load of the PostgreSQL and MySQL destinations: FNV-1a 64 of the parts, each
// followed by a NUL, from kLoadIdOffset. Names a load table after its pipeline, stream and run;
// it must stay the same in every version (a resumed load finds its table by it), which is why
// its offset is not FNV's.
std::string LoadId(const std::vector<std::string>& parts);
// ASCII letters lowered; other bytes as they are.
std::string Lower(std::string_view s);

// ---- a schema's key ----

// Whether field `id` is one of the key's columns.
bool IsKey(const Schema& s, int32_t id);
// The key's column names, in key order.
std::vector<std::string> KeyNames(const Schema& s);
// The key's column positions in s.fields, in key order.
std::vector<size_t> KeyPositions(const Schema& s);
// "(a, b)"
std::string JoinNames(const std::vector<std::string>& names);

// ---- values ----

// `j` as compact JSON; kInvalidArgument naming `what` when it holds text that is not UTF-8.
Result<std::string> DumpJson(const nlohmann::json& j, std::string_view what);

// Value `row` of a fixed-width column, as T.
template <typename T>
T FixedAt(const Column& col, size_t row) {
  T v;
  std::memcpy(&v, col.fixed_data() + row * sizeof(T), sizeof(T));
  return v;
}

// kInternal (a bug) unless `batch` has `schema`'s columns: kinds and scales, list elements alike.
// `table`: the table's name for the message.
Status CheckBatchColumns(const Batch& batch, const Schema& schema, const std::string& table);

}  // namespace ferry::sink
