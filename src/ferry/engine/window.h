// Incremental windows and the rows that tie at their end.
//
// A window reads the rows whose cursor moved since the last committed value `from`, up to the
// largest value above it (`upper`, captured in the same snapshot as the reads). Rows whose cursor
// EQUALS `from` are read again: a row can arrive later with the cursor value of the last window's
// end (a `date` cursor and a row changed later the same day, a second-resolution timestamp, a
// bulk statement that stamps many rows with one now(), a version shared by a batch), and a window
// that started after `from` would lose it for good. So a window reads three ranges:
//
//   [from, from]     the ties: the rows at the last committed value, less those committed
//                    unchanged (by their fingerprints, CursorTies)
//   (from, upper)    every row between
//   [upper, upper]   every row at the new end, fingerprinted: the ties of the next window
//
// With nothing above `from`, the window is the ties alone and ends where it started; a window
// that finds nothing new emits no rows and commits nothing. Re-reading a committed row is
// harmless anyway (the keyed upsert replaces it: one row per key), so the fingerprints only save
// work and empty commits.
//
// The ties are remembered one by one up to the stream's `tie_rows`; past that, only their count
// and a digest (the sum of their fingerprints). Then the ties are read once to compare digests:
// equal, nothing at `from` changed; different, every row at `from` is written again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/status.h"
#include "ferry/source/source.h"
#include "ferry/types/batch.h"

namespace ferry::engine {

using Json = nlohmann::json;

// The rows committed at a window's end value, by the fingerprint of each whole row.
class CursorTies {
 public:
  explicit CursorTies(size_t limit = 0) : limit_(limit) {}

  void Add(uint64_t fingerprint);
  // Whether a row with this fingerprint is among the ties (only when listed()).
  bool Contains(uint64_t fingerprint) const;
  // The fingerprints themselves are kept (at most `limit` rows), not only their digest.
  bool listed() const { return listed_; }
  uint64_t rows() const { return rows_; }
  // The count and the sum of the fingerprints, "<rows>-<16 hex digits>": equal sets of rows have
  // equal digests.
  std::string Digest() const;

  // {"rows": n, "sum": "<hex>", "fingerprints": "<base64 of the sorted fingerprints>"}; the last
  // only when listed.
  Json ToJson() const;
  static Result<CursorTies> FromJson(const Json& j, const std::string& origin);

 private:
  size_t limit_;
  uint64_t rows_ = 0;
  uint64_t sum_ = 0;
  bool listed_ = true;
  std::vector<uint64_t> fingerprints_;  // sorted after FromJson; in arrival order while adding
  bool sorted_ = true;
};

// What a window reads, decided before reading.
struct WindowBounds {
  Json from;                       // the last committed value; null: the stream's first window
  std::optional<CursorTies> ties;  // the rows committed at `from`; nullopt: not known (all read)
  Json upper;                      // the largest value above `from`; null: none
  bool empty() const { return from.is_null() && upper.is_null(); }  // no row has a cursor
};

struct WindowRead {
  int64_t rows = 0;  // rows emitted
  Json end;          // where the window ends: `upper`, or `from` when nothing is above it
  CursorTies ties;   // every row at `end` now, emitted or not
};

// Reads the window `bounds` of `stream` (see the comment at the top), emitting batches on
// `schema`; `tie_limit` is how many ties the result lists one by one. Between the source's
// BeginSnapshot and EndSnapshot, so that `upper` and the three reads see one state of the table.
Result<WindowRead> ReadWindow(source::Source* src, const source::StreamInfo& stream,
                              const std::string& cursor, const WindowBounds& bounds,
                              const std::shared_ptr<const Schema>& schema, size_t batch_rows,
                              size_t tie_limit, const std::function<bool(Batch&)>& emit);

}  // namespace ferry::engine
