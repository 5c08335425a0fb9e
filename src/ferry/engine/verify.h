// `ferry verify`: compares every stream's source table with its Iceberg table, row by row.
//
// The source is read whole inside one snapshot (Source::BeginSnapshot, then every chunk of
// PlanChunks), the destination as a reader of main's head sees it (lake::TableScan: live data
// files, equality and position deletes applied). Each row becomes a fingerprint: a 64-bit hash of
// its key (the stream's primary key, or the stream's `primary_key` setting) and a 64-bit hash of
// the canonical encoding of every column both sides have (types/fingerprint.h). Tables
// without a key are compared as multisets of rows (the key is the row). The two sides'
// fingerprints are sorted and merged: a key only in the source is "missing in destination", only
// in the destination "extra in destination", on both with other values "different values". When
// something differs, both sides are read a second time (the same snapshots) to name the first keys
// and, for different values, the columns that differ.
//
// Memory: 16 bytes per source row and 16 per destination row (the fingerprints), plus what the
// table scan holds (the equality-delete keys, one row group), plus one source batch. The table's
// values are never held.
//
// What a difference means depends on the stream's mode: a full-refresh stream matches its source
// as of its last sync, so a source changed since then shows the changes; CDC and incremental
// streams show the changes not yet applied (replication lag), and incremental streams also keep
// rows deleted in the source. The report says so per table (TableVerify::notes). For incremental
// streams the rows the next window would read (from the table's marker, engine/window.h) are read
// once more and told apart: differences they explain are lag; the others (a NULL cursor, a row
// changed without moving its cursor forward) no incremental sync will ever mend.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/config/config.h"
#include "ferry/types/batch.h"
#include "ferry/types/fingerprint.h"

namespace ferry::engine {

// A value as a person reads it in a report: 42, 'text', 2024-06-01 05:00:00, NULL, x'00ff'.
std::string DisplayValue(const Column& col, size_t row);

enum class DiffKind { kMissing, kExtra, kDifferent };

struct FingerprintDiff {
  uint64_t missing = 0;    // rows of the source the destination does not have
  uint64_t extra = 0;      // rows of the destination the source does not have
  uint64_t different = 0;  // keys on both sides with other values
  // The first `max_keys` differing keys (by key hash), with what differs.
  std::vector<std::pair<uint64_t, DiffKind>> first;
  bool empty() const { return missing == 0 && extra == 0 && different == 0; }
};

// Compares the two sides' fingerprints (sorts both in place). Per key: the rows with the same
// row hash on both sides match; of the rest, as many as both sides have are "different", the
// remainder missing or extra.
FingerprintDiff CompareFingerprints(std::vector<Fingerprint>* source,
                                    std::vector<Fingerprint>* destination, size_t max_keys);

// ---- the command ----

struct VerifyOptions {
  std::vector<std::string> tables;  // stream names; empty: every stream of the pipeline
  size_t max_examples = 10;         // differing keys named per table
  size_t batch_rows = 65536;
};

struct VerifyExample {
  DiffKind kind = DiffKind::kMissing;
  std::string key;                   // "id=42", "(a='x', b=3)"; keyless: the row's values
  std::vector<std::string> columns;  // kDifferent: "name: source 'a', destination 'b'"
  std::string why;                   // incremental: whether the next sync reads the row
};

struct TableVerify {
  std::string stream;
  std::string table;             // the destination's table name
  std::string mode;              // the stream's sync mode
  std::vector<std::string> key;  // the key columns compared by; empty: rows as a multiset
  bool table_missing = false;    // the destination has no such table
  std::string version;           // what was read of the destination ("snapshot 42")
  uint64_t source_rows = 0;
  uint64_t destination_rows = 0;
  uint64_t missing = 0;
  uint64_t extra = 0;
  uint64_t different = 0;
  // Incremental: of the missing and different rows, those the next sync reads (their cursor
  // moved past what the table holds); the rest no incremental sync will read.
  uint64_t pending = 0;
  bool pending_known = false;  // `pending` was counted (an incremental stream with a key)
  std::vector<std::string> source_only_columns;       // not in the destination: a difference
  std::vector<std::string> destination_only_columns;  // not compared (e.g. dropped in the source)
  std::vector<std::string> type_differences;          // "price: source double, destination string"
  std::vector<VerifyExample> examples;
  std::vector<std::string> notes;  // lag, modes, what a difference may mean
  std::string error;               // the table could not be verified
  bool matches() const {
    return error.empty() && !table_missing && missing == 0 && extra == 0 && different == 0 &&
           source_only_columns.empty() && type_differences.empty();
  }
};

// Verifies the pipeline's streams (or `options.tables`). A stream named in options.tables that the
// pipeline does not have is kInvalidArgument; a table that cannot be read is reported in its
// TableVerify::error and the others are still verified. Errors opening the source or the
// destination are returned.
Status RunVerify(config::PipelineConfig& cfg, const VerifyOptions& options,
                 std::vector<TableVerify>* out);

}  // namespace ferry::engine
