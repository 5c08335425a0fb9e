// Fingerprints of rows: a 64-bit hash of a row's key columns and one of every compared column,
// over a canonical encoding of the values, so that values that mean the same hash alike whatever
// their physical type. `ferry verify` compares a source with its destination by them; incremental
// windows remember the rows committed at the last cursor value by them (engine/window.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/types/batch.h"

namespace ferry {

// What a value is, whatever its physical type: values of two kinds never compare equal.
enum class ValueKind : uint8_t {
  kBoolean = 1,
  kInteger,
  kFloat,
  kDecimal,
  kDate,
  kTime,
  kTimestamp,
  kTimestampTz,
  kBytes,
  kUuid,
  kList,
  kOther,
};

ValueKind KindOf(const DataType& t);
// Two columns compare when their values are of one kind (for lists: their elements too).
bool SameKind(const DataType& a, const DataType& b);

// Appends the canonical encoding of row `row` of `col` to *out. Values that mean the same compare
// equal whatever the physical type on each side: int and long as 64-bit integers; float and double
// as the double's bits, with every NaN the same and -0.0 apart from 0.0 (as stored); decimals by
// value (1.50 at scale 2 = 1.5 at scale 1); dates as days; time and timestamps as microseconds
// (timestamp and timestamptz apart); strings and binaries as their bytes; uuids as 16 bytes; lists
// as their length and elements. NULL is distinct from every value, the empty string included.
// Values of different kinds never compare equal. A kind it does not know is encoded as its kind
// alone; the verifier leaves such columns out of the comparison and says so in the table's notes.
// The encoding is stable: fingerprints kept in state files and markers stay comparable.
void AppendCanonicalValue(const Column& col, size_t row, std::string* out);

// A 64-bit hash of `bytes`.
uint64_t Hash64(std::string_view bytes, uint64_t seed);

struct Fingerprint {
  uint64_t key = 0;  // hash of the key columns (keyless tables: = row)
  uint64_t row = 0;  // hash of every compared column
};

// Fingerprints of a batch's rows: `columns` are the batch positions of the compared columns (in
// the order both sides use), `key` the batch positions of the key columns (empty: keyless).
class RowFingerprinter {
 public:
  RowFingerprinter(std::vector<size_t> columns, std::vector<size_t> key)
      : columns_(std::move(columns)), key_(std::move(key)) {}
  Fingerprint Of(const Batch& batch, size_t row);

 private:
  std::vector<size_t> columns_;
  std::vector<size_t> key_;
  std::string scratch_;
};

}  // namespace ferry
