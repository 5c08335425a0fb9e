// A stream's transforms, between its source and its sink: which columns are read and written
// (`columns`, `exclude_columns`), their names in the destination (`rename_columns`), computed
// columns (`add_columns`) and a row filter (`filter`), both SQL expressions over the source's
// columns evaluated by SQLite (evaluator.h).
//
// One meaning in every mode:
//   - a load (full refresh, a cdc backfill) keeps the rows the filter holds for;
//   - keyed writes (incremental windows, changes) are upserts by key: a row the filter holds for
//     is upserted, any other row is deleted by its key, so a change that makes a row stop matching
//     removes it from the destination and one that makes it match inserts it;
//   - deletes pass as they are (a key not in the destination is deleted by nobody's loss).
// Columns left out are never read by a load or a window (the source selects only the chosen
// columns) and are dropped from changes. Key and cursor columns are always read.
//
// Thread-safety: Make once; Apply and Project may be called from several threads at once (each
// call takes an evaluator of its own from a pool).
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/config/config.h"
#include "ferry/source/source.h"
#include "ferry/transform/evaluator.h"
#include "ferry/types/batch.h"

namespace ferry::transform {

class Transform {
 public:
  // The stream's transforms over `table` (as discovered, with its key override applied). Errors
  // (kInvalidArgument) name the stream, the setting and the fix: unknown columns, a key or cursor
  // column left out, a rename onto another column's name, a filter or an expression that does
  // not parse or names an unknown column, a computed column whose type cannot be told.
  // `source_table`: what `_ferry_source_table` holds for its rows (the stream's label).
  static Result<std::shared_ptr<Transform>> Make(const config::StreamConfig& settings,
                                                 const source::StreamInfo& table,
                                                 const std::string& source_table);

  // The table as the source reads it for loads and windows: the chosen columns only, each with
  // its ordinal in `table` (source::TableOrdinal).
  const source::StreamInfo& read_info() const { return read_; }
  // Batches of loads and windows are built on it (read_info's columns).
  const std::shared_ptr<const Schema>& read_schema() const { return read_schema_; }
  // Batches of changes are built on it: every column of the table.
  const std::shared_ptr<const Schema>& table_schema() const { return table_schema_; }
  // What the destination table holds: the chosen columns renamed, then the computed ones.
  const Schema& output_schema() const { return output_; }

  // One batch from the source (on read_schema, or on table_schema for changes) to batches on
  // `out_schema` (output_schema's layout, the sink's ids): `out` gets the rows to write; when
  // `keyed` (upserts by key), `removed` gets the rows the filter rejects, to delete by key.
  // `deletes`: the batch holds deletes (key columns set), passed on without the filter; with
  // soft deletes (the rows' last values set) they become rows to upsert, marked deleted, which
  // the filter judges like any row. `in` is left empty (its columns may be moved out); its rows'
  // origins follow them into `out` and `removed` (destinations that write events read them).
  Status Apply(Batch& in, bool keyed, bool deletes, const std::shared_ptr<const Schema>& out_schema,
               Batch* out, Batch* removed) const;

  // What it does, for `check`: "5 of 6 columns (left out: card), renamed: cust_id -> customer_id,
  // filter: status <> 'x', computed: amount_cents long, metadata: _ferry_source_table".
  std::string Describe() const;

  // Something to evaluate per row (a filter or a computed column).
  bool evaluates() const { return !filter_.empty() || !exprs_.empty(); }
  // `deletes: soft`: Apply turns deletes (carrying the rows' last values) into rows to upsert,
  // with _ferry_deleted (the output's last column) true.
  bool soft_deletes() const { return soft_deletes_; }
  // `_ferry_source_table` is among its columns, and in its key when it has one.
  bool keys_by_source_table() const {
    return std::find(metadata_.begin(), metadata_.end(), Metadata::kSourceTable) != metadata_.end();
  }

 private:
  Transform() = default;
  // An evaluator for this call, from the pool (or a new one); back when done.
  Result<std::unique_ptr<Evaluator>> Take() const;
  void Give(std::unique_ptr<Evaluator> e) const;
  // `in`'s columns may be moved out (every row kept). `kept` and `dropped`: the input rows of
  // `out` and of `removed`.
  Status Compute(Batch& in, Evaluator* ev, bool keyed, Batch* out, Batch* removed,
                 std::vector<uint32_t>* kept, std::vector<uint32_t>* dropped) const;

  std::string what_;  // "stream orders", for messages
  source::StreamInfo read_;
  std::shared_ptr<const Schema> read_schema_;
  std::shared_ptr<const Schema> table_schema_;
  std::vector<size_t> from_table_;  // read column i is table column from_table_[i]
  Schema output_;
  std::string filter_;
  std::vector<std::string> exprs_;  // computed columns' expressions, in output order
  enum class Metadata { kSourceTable, kSyncedAt, kOp, kSourceTs, kPosition };
  std::vector<Metadata> metadata_;  // metadata columns, in output order (after the computed)
  std::string source_table_;
  // Fills the metadata columns of `b`'s rows (its other columns filled), and _ferry_deleted
  // with `deleted` (soft deletes). Row r of `b` came from input row `rows[r]` (r when null), whose
  // change is origins[rows[r]] (a read when `origins` is empty).
  void AddMetadata(Batch* b, bool deleted, const std::vector<RowOrigin>& origins,
                   const std::vector<uint32_t>* rows) const;
  bool soft_deletes_ = false;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Evaluator>> idle_;  // guarded by mu_
};

}  // namespace ferry::transform
