// The expressions computed natively (native.h) against SQLite computing the same expressions on
// the same values: random expressions of every compiled shape over awkward values (NULLs, int64
// bounds, NaN and infinities, -0.0, halves, decimals past int64, strings that differ by case or
// length), compared value by value, bit for bit.
#include "ferry/transform/evaluator.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ferry::transform {
namespace {

std::shared_ptr<const Schema> MakeSchema() {
  auto s = std::make_shared<Schema>();
  auto add = [&](const char* name, DataType t) {
    Field f;
    f.id = static_cast<int32_t>(s->fields.size()) + 1;
    f.name = name;
    f.type = t;
    s->fields.push_back(f);
  };
  add("b", DataType::Boolean());
  add("i", DataType::Int32());
  add("n", DataType::Int64());
  add("f", DataType::Float32());
  add("d", DataType::Float64());
  add("m", DataType::Decimal(12, 2));
  add("k", DataType::Decimal(38, 0));
  add("s", DataType::String());
  add("t", DataType::String());
  add("Qty \xce\x94 \"x\"", DataType::Int64());  // quoted: "Qty Δ ""x"""
  add("day", DataType::Date());
  return s;
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr double kInf = std::numeric_limits<double>::infinity();

class Values {
 public:
  explicit Values(uint32_t seed) : rng_(seed) {}
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool Chance(int percent) { return static_cast<int>(Pick(100)) < percent; }

  int64_t Int() {
    static const int64_t kSome[] = {
        0,          1,          -1,   2,        -2,       3,         7,
        100,        kMax,       kMin, kMax - 1, kMin + 1, 1LL << 53, (1LL << 53) + 1,
        3037000500, -3037000500};
    if (Chance(70)) return kSome[Pick(std::size(kSome))];
    return std::uniform_int_distribution<int64_t>(-1000000, 1000000)(rng_);
  }
  double Real() {
    static const double kSome[] = {0.0,
                                   -0.0,
                                   0.5,
                                   -0.5,
                                   1.5,
                                   2.5,
                                   -2.5,
                                   0.49999999999999994,
                                   -0.49999999999999994,
                                   0.4,
                                   -0.4,
                                   1e300,
                                   -1e300,
                                   kInf,
                                   -kInf,
                                   std::nan(""),
                                   4503599627370495.5,
                                   -4503599627370495.5,
                                   4503599627370497.0,
                                   9.2233720368547758e18,
                                   -9.2233720368547758e18,
                                   1e19,
                                   0.1,
                                   12.345,
                                   1e-300};
    if (Chance(70)) return kSome[Pick(std::size(kSome))];
    return std::uniform_real_distribution<double>(-1e6, 1e6)(rng_);
  }
  int128_t Decimal(int precision) {
    int128_t limit = 1;
    for (int i = 0; i < precision; ++i) limit *= 10;
    const int128_t some[] = {0, 1, -1, 50, -50, 149, 150, -150, 1234567, limit - 1, -(limit - 1)};
    if (Chance(60)) return some[Pick(std::size(some))];
    const auto v = static_cast<int128_t>(std::uniform_int_distribution<int64_t>(kMin, kMax)(rng_));
    return precision > 18 ? v * 1000000007 : v % limit;
  }
  std::string Text() {
    static const char* kSome[] = {"",     "a",        "b",         "A", "ab", "abc", "lost", "Lost",
                                  "paid", "\xc3\xa9", "e\xcc\x81", "z", "0",  "10",  "9"};
    return kSome[Pick(std::size(kSome))];
  }

  std::mt19937 rng_;
};

Batch MakeBatch(const std::shared_ptr<const Schema>& schema, Values& v, size_t rows) {
  Batch b(schema);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < schema->fields.size(); ++c) {
      Column& col = b.column(c);
      if (v.Chance(12)) {
        col.AppendNull();
        continue;
      }
      switch (schema->fields[c].type.kind()) {
        case TypeKind::kBoolean:
          col.AppendBool(v.Chance(50));
          break;
        case TypeKind::kInt32: {
          const int64_t x = v.Int();
          col.AppendInt32(x == kMax   ? std::numeric_limits<int32_t>::max()
                          : x == kMin ? std::numeric_limits<int32_t>::min()
                                      : static_cast<int32_t>(x % 100000));
          break;
        }
        case TypeKind::kInt64:
          col.AppendInt64(v.Int());
          break;
        case TypeKind::kFloat32:
          col.AppendFloat(static_cast<float>(v.Real()));
          break;
        case TypeKind::kFloat64:
          col.AppendDouble(v.Real());
          break;
        case TypeKind::kDecimal:
          col.AppendDecimal(v.Decimal(schema->fields[c].type.precision()));
          break;
        case TypeKind::kDate:
          col.AppendInt32(static_cast<int32_t>(v.Pick(30000)) - 10000);
          break;
        default:
          col.AppendBytes(v.Text());
          break;
      }
    }
  }
  return b;
}

// Random expressions of the compiled shapes.
class Gen {
 public:
  explicit Gen(Values& v) : v_(v) {}

  std::string Number(int depth) {
    static const char* kCols[] = {
        "b", "i", "n", "f", "d", "m", "k", "\"Qty \xce\x94 \"\"x\"\"\"", "N", "\"d\""};
    static const char* kLits[] = {"0",
                                  "1",
                                  "2",
                                  "-1",
                                  "100",
                                  "0.5",
                                  "2.5",
                                  "0.0",
                                  "-0.0",
                                  "1e308",
                                  "1e400",
                                  "9223372036854775807",
                                  "9223372036854775808",
                                  "-9223372036854775808",
                                  "3.0",
                                  "NULL",
                                  ".5",
                                  "1E2",
                                  "-(0.0)",
                                  "-(9223372036854775808)"};
    if (depth <= 0 || v_.Chance(30)) {
      return v_.Chance(55) ? kCols[v_.Pick(std::size(kCols))] : kLits[v_.Pick(std::size(kLits))];
    }
    switch (v_.Pick(8)) {
      case 0:
      case 1: {
        static const char* kOps[] = {" + ", " - ", " * ", " / ", "+", "- "};
        return Number(depth - 1) + kOps[v_.Pick(std::size(kOps))] + Number(depth - 1);
      }
      case 2: {
        const std::string x = Number(depth - 1);
        return (x[0] == '-' ? "- " : "-") + x;  // not "--": a comment
      }
      case 3: {
        static const char* kTypes[] = {"INTEGER", "int", "BIGINT", "REAL", "double", "Float"};
        return "CAST(" + Number(depth - 1) + " AS " + kTypes[v_.Pick(std::size(kTypes))] + ")";
      }
      case 4:
        return v_.Chance(70) ? "round(" + Number(depth - 1) + ")"
                             : "ROUND(" + Number(depth - 1) + ", 0)";
      case 5:
        return "(" + Number(depth - 1) + ")";
      case 6:
        return "(" + Condition(depth - 1) + ")";
      default:
        return Number(0);
    }
  }

  std::string Text() {
    static const char* kText[] = {"s",  "t",       "S",          "'a'",  "'lost'", "'Lost'",
                                  "''", "'it''s'", "'\xc3\xa9'", "'ab'", "NULL"};
    return kText[v_.Pick(std::size(kText))];
  }

  std::string Condition(int depth) {
    static const char* kCmp[] = {
        " = ", " == ", " <> ", " != ", " < ", " <= ", " > ", " >= ", " IS ", " is not ", "<", ">="};
    if (depth <= 0) return Number(0) + kCmp[v_.Pick(std::size(kCmp))] + Number(0);
    switch (v_.Pick(7)) {
      case 0:
        return Number(depth - 1) + kCmp[v_.Pick(std::size(kCmp))] + Number(depth - 1);
      case 1:
        return Text() + kCmp[v_.Pick(std::size(kCmp))] + Text();
      case 2:
        return Condition(depth - 1) + (v_.Chance(50) ? " AND " : " and ") + Condition(depth - 1);
      case 3:
        return Condition(depth - 1) + (v_.Chance(50) ? " OR " : " or ") + Condition(depth - 1);
      case 4:
        return "NOT " + Condition(depth - 1);
      case 5:
        return "(" + Condition(depth - 1) + ")";
      default:
        return Number(depth - 1);
    }
  }

 private:
  Values& v_;
};

// What a row gives, as the caller sees it.
std::vector<std::string> Results(Evaluator& e, const Batch& batch, bool every_row) {
  std::vector<std::string> out;
  const Status s = e.Run(batch, every_row, [&](size_t row, const Evaluator::Row& r) {
    std::string line = std::to_string(row) + (r.matches() ? " match" : " no");
    for (size_t i = 0; i < e.num_exprs(); ++i) {
      const int type = r.type(i);
      line += " | type " + std::to_string(type);
      if (type == SQLITE_INTEGER) line += " int " + std::to_string(r.Int(i));
      if (type == SQLITE_INTEGER || type == SQLITE_FLOAT) {
        const double d = r.Double(i);
        uint64_t bits = 0;
        std::memcpy(&bits, &d, sizeof bits);
        line += " bits " + std::to_string(bits);
      }
      if (type != SQLITE_NULL) line += " text '" + std::string(r.Text(i)) + "'";
    }
    out.push_back(std::move(line));
    return Status::OK();
  });
  EXPECT_TRUE(s.ok()) << s.message();
  return out;
}

void ExpectSame(const std::shared_ptr<const Schema>& schema, const Batch& batch,
                const std::string& filter, const std::vector<std::string>& exprs,
                bool expect_native) {
  auto native = Evaluator::Make(*schema, filter, exprs, "test", true);
  auto sqlite = Evaluator::Make(*schema, filter, exprs, "test", false);
  ASSERT_TRUE(native.ok()) << native.status().message();
  ASSERT_TRUE(sqlite.ok()) << sqlite.status().message();
  std::string all = "filter '" + filter + "'";
  for (const auto& x : exprs) all += ", '" + x + "'";
  EXPECT_EQ((*native)->native(), expect_native) << all;
  EXPECT_FALSE((*sqlite)->native());
  for (const bool every : {true, false}) {
    const auto a = Results(**native, batch, every);
    const auto b = Results(**sqlite, batch, every);
    ASSERT_EQ(a.size(), b.size()) << all;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << all;
  }
}

TEST(EvaluatorTest, NativeShapesGiveSqlitesValuesOnRandomExpressions) {
  Values values(20261203);
  const auto schema = MakeSchema();
  const Batch batch = MakeBatch(schema, values, 400);
  Gen gen(values);
  for (int round = 0; round < 400; ++round) {
    const int depth = 1 + static_cast<int>(values.Pick(4));
    const std::string filter = values.Chance(20) ? "" : gen.Condition(depth);
    const std::vector<std::string> exprs = {gen.Number(depth), gen.Text(), gen.Condition(depth),
                                            gen.Number(depth)};
    ExpectSame(schema, batch, filter, exprs, true);
    if (HasFatalFailure()) return;
  }
}

TEST(EvaluatorTest, EdgesOfArithmeticRoundingAndCasts) {
  Values values(7);
  const auto schema = MakeSchema();
  // Over several chunks of the native evaluation (NativeExpr::kChunk rows each) and part of one.
  const Batch batch = MakeBatch(schema, values, 2300);
  const std::vector<std::string> exprs = {"n + n",
                                          "n - n",
                                          "n * n",
                                          "n / n",
                                          "n / 0",
                                          "d / 0",
                                          "d - d",
                                          "d * 0",
                                          "-n",
                                          "- -n",
                                          "0 - n",
                                          "CAST(d AS INT)",
                                          "CAST(f AS REAL)",
                                          "CAST(m AS INTEGER)",
                                          "round(d)",
                                          "round(m)",
                                          "round(k)",
                                          "round(f, 0)",
                                          "k * 2",
                                          "m * 100",
                                          "n / -1",
                                          "i * 1000000",
                                          "b + 1",
                                          "-9223372036854775808 / -1",
                                          "round(-0.4)",
                                          "-(0.0)",
                                          "1e400 - 1e400",
                                          "m = d",
                                          "n = d",
                                          "k = n",
                                          "n < d",
                                          "s = t",
                                          "s < t",
                                          "s IS NULL",
                                          "NULL IS NOT n",
                                          "NOT d",
                                          "NOT s IS NULL",
                                          "n AND d",
                                          "NULL OR 1",
                                          "b OR NULL",
                                          "f > 0.1",
                                          "d >= 0.1",
                                          "s"};
  for (const auto& x : exprs) {
    ExpectSame(schema, batch, "", {x}, true);
    if (HasFatalFailure()) return;
  }
  // A filter alone (nothing computed): each row still says whether it matches.
  ExpectSame(schema, batch, "n > 0 AND s <> 'lost'", {}, true);
  ExpectSame(schema, batch, "d", {}, true);
}

TEST(EvaluatorTest, OtherShapesAreLeftToSqlite) {
  Values values(11);
  const auto schema = MakeSchema();
  const Batch batch = MakeBatch(schema, values, 200);
  // Each needs a conversion, a function, an operator or a type not compiled natively: SQLite
  // computes it, and the results are SQLite's either way.
  for (const char* x : {"s LIKE 'a%'",
                        "n > '5'",
                        "s > 5",
                        "day >= '2000-01-01'",
                        "abs(i)",
                        "n IN (1, 2)",
                        "n BETWEEN 1 AND 2",
                        "CASE WHEN n > 0 THEN 1 END",
                        "s || t",
                        "n % 2",
                        "TRUE",
                        "\"no such\" = s",
                        "rowid > 1",
                        "round(d, 2)",
                        "CAST(s AS INTEGER)",
                        "s AND 1",
                        "n /* a comment */ + 1",
                        "+n",
                        "n IS DISTINCT FROM 1",
                        "CAST(n AS TEXT)",
                        "0x10 + n",
                        "NOT s",
                        "s = 'a' COLLATE NOCASE",
                        "n ISNULL",
                        "coalesce(n, 0)"}) {
    ExpectSame(schema, batch, "", {x}, false);
    if (HasFatalFailure()) return;
  }
  // A filter of text is read as a number by SQLite.
  ExpectSame(schema, batch, "s", {"n"}, false);
  // One expression SQLite must compute: all are computed by it.
  ExpectSame(schema, batch, "n > 0", {"n + 1", "abs(i)"}, false);
}

}  // namespace
}  // namespace ferry::transform
