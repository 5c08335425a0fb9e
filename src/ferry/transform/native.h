// The common shapes of expressions computed without SQLite's virtual machine, with SQLite's
// meaning: the language stays SQLite's (it parses and checks every expression first, and
// evaluates every one that falls outside these shapes), and these shapes are computed here a row
// at a time from the batch's columns, as SQLite would compute them from the same values
// (evaluator_test compares the two on random expressions and awkward values).
//
// The shapes: columns of numbers (boolean, int, long, float, double, decimal) and strings;
// integer, real and string literals and NULL; + - * / and unary minus; = == <> != < <= > >=,
// IS, IS NOT; AND, OR, NOT; CAST(x AS INTEGER | INT | BIGINT | REAL | DOUBLE | FLOAT); round(x)
// and round(x, 0). Comparisons only between two numbers or two strings (where SQLite would
// convert one side by the other's affinity, it is left to SQLite); a condition must be a number.
// Anything else (another function, LIKE, IN, BETWEEN, CASE, COLLATE, dates, comments...) makes
// Compile say no, and SQLite evaluates the expression.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/types/batch.h"

struct sqlite3;

namespace ferry::transform {

// A value as SQLite holds it (no BLOBs: no shape here makes one), in 16 bytes: values pass in
// registers.
struct SqlValue {
  enum class Type : uint8_t { kNull, kInt, kReal, kText };
  union {
    int64_t i = 0;
    double r;
    const char* text;  // kText: the batch's bytes or a literal's
  };
  uint32_t size = 0;  // kText: its bytes
  Type type = Type::kNull;

  std::string_view s() const { return std::string_view(text, size); }

  static SqlValue Int(int64_t v) {
    SqlValue x;
    x.type = Type::kInt;
    x.i = v;
    return x;
  }
  // NaN is NULL, as SQLite stores it.
  static SqlValue Real(double v);
  static SqlValue Text(std::string_view v) {
    SqlValue x;
    x.type = Type::kText;
    x.text = v.data();
    x.size = static_cast<uint32_t>(v.size());
    return x;
  }
};
static_assert(sizeof(SqlValue) == 16);

// A decimal as SQLite is given it (no decimal type there): INTEGER when its scale is 0 and it
// fits, else the nearest REAL.
SqlValue DecimalAsSql(int128_t unscaled, int scale);

// SQLite's CAST of a REAL to INTEGER: truncated, saturating at the int64 bounds.
int64_t SqlRealToInt(double r);

class NativeExpr {
 public:
  // `text` compiled over `schema`'s columns, or nullptr when it has anything outside the shapes
  // above (not an error: SQLite has accepted the text and evaluates it). `condition`: a filter,
  // judged true or not. Numeric literals are read by SQLite (`db`) so that they are its values.
  static std::unique_ptr<NativeExpr> Compile(std::string_view text, const Schema& schema,
                                             sqlite3* db, bool condition);

  // The values of rows [begin, begin + count) of `batch` (count at most kChunk), valid until the
  // next call. Not thread-safe (the values are kept here).
  static constexpr size_t kChunk = 256;
  const SqlValue* Eval(const Batch& batch, size_t begin, size_t count);

  // What SQLite's WHERE and IS TRUE make of a value: a non-zero number.
  static bool Truthy(const SqlValue& v) {
    return v.type == SqlValue::Type::kInt    ? v.i != 0
           : v.type == SqlValue::Type::kReal ? v.r != 0
                                             : false;
  }

  enum class Op : uint8_t {
    kLiteral,
    kColumn,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kEq,
    kNe,
    kLt,
    kLe,
    kGt,
    kGe,
    kIs,
    kIsNot,
    kAnd,
    kOr,
    kNot,
    kCastInt,
    kCastReal,
    kRound,
  };
  // What a node gives whatever the row: numbers (INTEGER or REAL), text, or NULL alone.
  enum class Class : uint8_t { kNull, kNumber, kText };
  struct Node {
    Op op = Op::kLiteral;
    Class cls = Class::kNull;
    int a = -1, b = -1;  // operands
    size_t column = 0;
    SqlValue literal;
    std::string_view number;  // a number's literal as written: unary minus negates it in place
  };

 private:
  friend class Parser;
  NativeExpr() = default;
  void Eval(int n, const Batch& batch, size_t begin, size_t count);

  std::vector<Node> nodes_;
  std::list<std::string> strings_;  // string literals' bytes (stable addresses)
  int root_ = -1;
  std::vector<std::vector<SqlValue>> values_;  // each node's values for the chunk at hand
};

}  // namespace ferry::transform
