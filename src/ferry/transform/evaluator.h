// SQL expressions over the rows of a batch, evaluated by SQLite: one expression language (SQLite's)
// with one meaning wherever a pipeline uses it (row filters and computed columns, in every mode).
//
// The batch is a virtual table whose columns are the schema's, by name; each row's values are
// handed to SQLite as it reads them, only those an expression names:
//   boolean, int, long           INTEGER (booleans 0 and 1)
//   float, double                REAL
//   decimal                      INTEGER when its scale is 0 and it fits, else REAL (SQLite has
//                                no decimal type: 17 significant digits)
//   date, time, timestamp        TEXT, ISO 8601: '2024-06-01', '13:45:00', '2024-06-01
//                                13:45:00' (microseconds shown when not zero); timestamptz in UTC
//                                with '+00:00'
//   string, uuid                 TEXT (uuids in canonical form)
//   binary                       BLOB
//   list                         TEXT, its JSON form
// so that comparisons with literals read as users write them (`created_at >= '2024-01-01'`,
// `amount > 0`), and SQLite's date and time functions apply.
//
// The common shapes of expressions (native.h) are computed without SQLite's virtual machine, with
// its meaning; the others by SQLite.
//
// Not thread-safe: one Evaluator per thread (Transform keeps a pool).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/transform/native.h"
#include "ferry/types/batch.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ferry::transform {

class Evaluator {
 public:
  // Prepares `filter` (a condition; empty: every row) and `exprs` over the columns of `schema`.
  // An expression that does not parse or names an unknown column is kInvalidArgument naming it
  // (`what` names where it was written, e.g. "stream orders: filter") and the columns there are.
  // `native`: compute the common shapes natively when every expression has one (false: SQLite
  // computes all; tests compare the two).
  static Result<std::unique_ptr<Evaluator>> Make(const Schema& schema, const std::string& filter,
                                                 const std::vector<std::string>& exprs,
                                                 const std::string& what, bool native = true);
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // What a row gives: whether the filter holds (true, not false or NULL), and the expressions'
  // values, read with value(i) while the callback runs.
  class Row {
   public:
    bool matches() const;
    // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB or SQLITE_NULL.
    int type(size_t i) const;
    int64_t Int(size_t i) const;
    double Double(size_t i) const;
    std::string_view Text(size_t i) const;  // TEXT or BLOB bytes (any value as text)

   private:
    friend class Evaluator;
    sqlite3_stmt* st_ = nullptr;
    int first_ = 0;  // the column of the first expression
    // Computed natively: the values, and whether the filter holds.
    bool native_ = false;
    const SqlValue* const* values_ = nullptr;  // each expression's values for the chunk
    size_t at_ = 0;                            // this row's place in the chunk
    const SqlValue& value(size_t i) const { return values_[i][at_]; }
    bool matches_ = false;
    mutable std::string text_;  // a number shown as text
  };

  // Runs over every row of `batch` (on the schema given to Make). `every_row`: each row comes,
  // matching or not (Row::matches says); otherwise only the rows the filter keeps. `each(row
  // index, row)`; a runtime error of an expression (an integer overflow, a bad argument) is
  // kInvalidArgument naming the expression and the row.
  Status Run(const Batch& batch, bool every_row,
             const std::function<Status(size_t row, const Row& values)>& each);

  // Any expression is there to compute (else the rows' values are not needed: only the filter).
  size_t num_exprs() const { return num_exprs_; }
  // The expressions are computed natively (native.h), not by SQLite.
  bool native() const { return !native_exprs_.empty() || native_filter_ != nullptr; }

 private:
  Evaluator() = default;
  Status Prepare(const std::string& sql, sqlite3_stmt** st, const std::string& what);

  sqlite3* db_ = nullptr;
  sqlite3_stmt* matching_ = nullptr;  // SELECT rowid, exprs... WHERE filter
  sqlite3_stmt* every_ = nullptr;     // SELECT rowid, (filter) IS TRUE, exprs...

 public:
  struct Table;  // the virtual table's state: the batch being read (evaluator.cc)

 private:
  std::unique_ptr<Table> table_;
  std::vector<std::string> texts_;  // the expressions, for messages
  std::string filter_;
  size_t num_exprs_ = 0;
  // Set when every expression compiled (native.h); the statements above stay for the others.
  std::unique_ptr<NativeExpr> native_filter_;
  std::vector<std::unique_ptr<NativeExpr>> native_exprs_;
  std::vector<const SqlValue*> native_values_;
};

}  // namespace ferry::transform
