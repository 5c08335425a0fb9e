#include "ferry/transform/native.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>

#include "ferry/types/value_parse.h"

namespace ferry::transform {

SqlValue SqlValue::Real(double v) {
  SqlValue x;
  if (std::isnan(v)) return x;
  x.type = Type::kReal;
  x.r = v;
  return x;
}

namespace {

// Integers of at most 53 bits, and powers of ten up to 10^22, are exact doubles.
constexpr int128_t kExactDouble = int128_t{1} << 53;
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

}  // namespace

SqlValue DecimalAsSql(int128_t v, int scale) {
  if (scale == 0 && v >= std::numeric_limits<int64_t>::min() &&
      v <= std::numeric_limits<int64_t>::max()) {
    return SqlValue::Int(static_cast<int64_t>(v));
  }
  if (v > -kExactDouble && v < kExactDouble && scale >= 0 && scale <= 22) {
    // Both exact doubles: their quotient is rounded once, to the nearest double, as SQLite reads
    // the decimal's text.
    return SqlValue::Real(static_cast<double>(v) / kPow10[scale]);
  }
  return SqlValue::Real(std::strtod(FormatDecimal(v, scale).c_str(), nullptr));
}

int64_t SqlRealToInt(double r) {
  constexpr auto kMin = std::numeric_limits<int64_t>::min();
  constexpr auto kMax = std::numeric_limits<int64_t>::max();
  if (r <= static_cast<double>(kMin)) return kMin;
  if (r >= static_cast<double>(kMax)) return kMax;
  return static_cast<int64_t>(r);
}

namespace {

using Op = NativeExpr::Op;
using Class = NativeExpr::Class;
using Type = SqlValue::Type;

bool IsIdStart(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool IsIdChar(unsigned char c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; }

// SQLite's name comparison: ASCII letters without case, other bytes as they are.
bool SameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x != y && (x >= 0x80 || y >= 0x80 || std::tolower(x) != std::tolower(y))) return false;
  }
  return true;
}

struct Token {
  enum Kind { kEnd, kId, kQuotedId, kNumber, kString, kOp } kind = kEnd;
  std::string text;  // an identifier or string unquoted; a number or operator as written
};

// SQLite's tokens, those the shapes use; nullopt for anything else (comments included).
std::optional<std::vector<Token>> Tokenize(std::string_view in) {
  std::vector<Token> out;
  size_t p = 0;
  while (p < in.size()) {
    const auto c = static_cast<unsigned char>(in[p]);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r') {
      ++p;
      continue;
    }
    Token t;
    if (IsIdStart(c)) {
      size_t e = p + 1;
      while (e < in.size() && IsIdChar(static_cast<unsigned char>(in[e]))) ++e;
      t.kind = Token::kId;
      t.text = std::string(in.substr(p, e - p));
      p = e;
    } else if (c == '\'' || c == '"') {
      t.kind = c == '\'' ? Token::kString : Token::kQuotedId;
      size_t e = p + 1;
      for (;;) {
        if (e >= in.size()) return std::nullopt;
        if (static_cast<unsigned char>(in[e]) == c) {
          if (e + 1 < in.size() && static_cast<unsigned char>(in[e + 1]) == c) {
            t.text += static_cast<char>(c);
            e += 2;
            continue;
          }
          break;
        }
        t.text += in[e++];
      }
      p = e + 1;
    } else if (std::isdigit(c) || (c == '.' && p + 1 < in.size() && std::isdigit(in[p + 1]))) {
      if (c == '0' && p + 1 < in.size() && (in[p + 1] == 'x' || in[p + 1] == 'X')) {
        return std::nullopt;
      }
      size_t e = p;
      while (e < in.size() && std::isdigit(static_cast<unsigned char>(in[e]))) ++e;
      if (e < in.size() && in[e] == '.') {
        ++e;
        while (e < in.size() && std::isdigit(static_cast<unsigned char>(in[e]))) ++e;
      }
      if (e < in.size() && (in[e] == 'e' || in[e] == 'E')) {
        size_t x = e + 1;
        if (x < in.size() && (in[x] == '+' || in[x] == '-')) ++x;
        if (x < in.size() && std::isdigit(static_cast<unsigned char>(in[x]))) {
          e = x;
          while (e < in.size() && std::isdigit(static_cast<unsigned char>(in[e]))) ++e;
        }
      }
      if (e < in.size() && IsIdChar(static_cast<unsigned char>(in[e]))) return std::nullopt;
      t.kind = Token::kNumber;
      t.text = std::string(in.substr(p, e - p));
      p = e;
    } else {
      static constexpr std::string_view kTwo[] = {"==", "!=", "<>", "<=", ">="};
      static constexpr std::string_view kOne = "()+-*/=<>,";
      t.kind = Token::kOp;
      for (std::string_view two : kTwo) {
        if (in.substr(p, 2) == two) t.text = std::string(two);
      }
      if (t.text.empty()) {
        if (kOne.find(static_cast<char>(c)) == std::string_view::npos) return std::nullopt;
        t.text = std::string(1, static_cast<char>(c));
      }
      if (in.substr(p, 2) == "--" || in.substr(p, 2) == "/*") return std::nullopt;
      p += t.text.size();
    }
    out.push_back(std::move(t));
  }
  out.push_back(Token{});
  return out;
}

// A numeric literal (`text`, possibly with a leading '-') as SQLite reads it.
std::optional<SqlValue> ReadNumber(sqlite3* db, const std::string& text) {
  const std::string sql = "SELECT " + text;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &st, nullptr) !=
      SQLITE_OK) {
    sqlite3_finalize(st);
    return std::nullopt;
  }
  std::optional<SqlValue> out;
  if (sqlite3_step(st) == SQLITE_ROW) {
    switch (sqlite3_column_type(st, 0)) {
      case SQLITE_INTEGER:
        out = SqlValue::Int(sqlite3_column_int64(st, 0));
        break;
      case SQLITE_FLOAT:
        out = SqlValue::Real(sqlite3_column_double(st, 0));
        break;
      default:
        break;
    }
  }
  sqlite3_finalize(st);
  return out;
}

}  // namespace

// Recursive descent with SQLite's precedence (lowest first): OR; AND; NOT; = == <> != IS; < <= >
// >=; + -; * /; unary minus. Each step returns a node, or -1 when the text leaves the shapes.
class Parser {
 public:
  Parser(NativeExpr* e, std::vector<Token> tokens, const Schema& schema, sqlite3* db)
      : e_(e), t_(std::move(tokens)), schema_(schema), db_(db) {}

  int Parse() {
    const int n = Or();
    return n >= 0 && t_[p_].kind == Token::kEnd ? n : -1;
  }

 private:
  const Token& Peek() const { return t_[p_]; }
  bool IsOp(std::string_view s) const { return Peek().kind == Token::kOp && Peek().text == s; }
  bool IsWord(std::string_view w) const {
    return Peek().kind == Token::kId && SameName(Peek().text, w);
  }

  int Add(NativeExpr::Node n) {
    e_->nodes_.push_back(std::move(n));
    return static_cast<int>(e_->nodes_.size()) - 1;
  }
  Class ClassOf(int n) const { return e_->nodes_[static_cast<size_t>(n)].cls; }

  // A condition's operand (AND, OR, NOT): numbers or NULL.
  bool Logical(int n) const { return n >= 0 && ClassOf(n) != Class::kText; }

  int Binary(Op op, int a, int b, Class cls) {
    NativeExpr::Node n;
    n.op = op;
    n.a = a;
    n.b = b;
    n.cls = cls;
    return Add(std::move(n));
  }

  int Or() {
    int a = And();
    while (a >= 0 && IsWord("or")) {
      ++p_;
      const int b = And();
      if (!Logical(a) || !Logical(b)) return -1;
      a = Binary(Op::kOr, a, b, Class::kNumber);
    }
    return a;
  }

  int And() {
    int a = Not();
    while (a >= 0 && IsWord("and")) {
      ++p_;
      const int b = Not();
      if (!Logical(a) || !Logical(b)) return -1;
      a = Binary(Op::kAnd, a, b, Class::kNumber);
    }
    return a;
  }

  int Not() {
    if (!IsWord("not")) return Equality();
    ++p_;
    const int a = Not();
    if (!Logical(a)) return -1;
    return Binary(Op::kNot, a, -1, Class::kNumber);
  }

  // Two operands SQLite compares without converting either: two numbers or two strings (or a
  // NULL).
  bool Comparable(int a, int b) const {
    if (a < 0 || b < 0) return false;
    const Class x = ClassOf(a), y = ClassOf(b);
    return x == Class::kNull || y == Class::kNull || x == y;
  }

  int Equality() {
    int a = Relational();
    for (;;) {
      if (a < 0) return -1;
      Op op;
      if (IsOp("=") || IsOp("==")) {
        op = Op::kEq;
      } else if (IsOp("<>") || IsOp("!=")) {
        op = Op::kNe;
      } else if (IsWord("is")) {
        op = Op::kIs;
        if (t_[p_ + 1].kind == Token::kId && SameName(t_[p_ + 1].text, "not")) {
          op = Op::kIsNot;
          ++p_;
        }
      } else {
        return a;
      }
      ++p_;
      const int b = Relational();
      if (!Comparable(a, b)) return -1;
      a = Binary(op, a, b, Class::kNumber);
    }
  }

  int Relational() {
    int a = Additive();
    for (;;) {
      if (a < 0) return -1;
      Op op;
      if (IsOp("<")) {
        op = Op::kLt;
      } else if (IsOp("<=")) {
        op = Op::kLe;
      } else if (IsOp(">")) {
        op = Op::kGt;
      } else if (IsOp(">=")) {
        op = Op::kGe;
      } else {
        return a;
      }
      ++p_;
      const int b = Additive();
      if (!Comparable(a, b)) return -1;
      a = Binary(op, a, b, Class::kNumber);
    }
  }

  // Arithmetic on numbers (or NULL): SQLite would read a string operand as a number.
  bool Numeric(int n) const { return n >= 0 && ClassOf(n) != Class::kText; }

  // One level of left-associative arithmetic: operands from `next`, operators from `ops`.
  int Arithmetic(int (Parser::*next)(), std::initializer_list<std::pair<const char*, Op>> ops) {
    int a = (this->*next)();
    for (;;) {
      if (a < 0) return -1;
      const auto op =
          std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return IsOp(o.first); });
      if (op == ops.end()) return a;
      ++p_;
      const int b = (this->*next)();
      if (!Numeric(a) || !Numeric(b)) return -1;
      a = Binary(op->second, a, b, Class::kNumber);
    }
  }
  int Additive() { return Arithmetic(&Parser::Multiplicative, {{"+", Op::kAdd}, {"-", Op::kSub}}); }
  int Multiplicative() { return Arithmetic(&Parser::Unary, {{"*", Op::kMul}, {"/", Op::kDiv}}); }

  int Unary() {
    if (!IsOp("-")) return Primary();
    ++p_;
    const int a = Unary();
    if (!Numeric(a)) return -1;
    // A number as written, negated, is a literal to SQLite (`-5`, `-(0.0)`,
    // `-9223372036854775808`).
    NativeExpr::Node& n = e_->nodes_[static_cast<size_t>(a)];
    if (n.op == Op::kLiteral && !n.number.empty()) {
      const auto v = ReadNumber(db_, "-" + std::string(n.number));
      if (!v) return -1;
      n.literal = *v;
      n.number = {};
      return a;
    }
    // Otherwise `0 - x`.
    const int zero = Literal(SqlValue::Int(0), Class::kNumber);
    return Binary(Op::kSub, zero, a, Class::kNumber);
  }

  int Literal(const SqlValue& v, Class cls) {
    NativeExpr::Node n;
    n.op = Op::kLiteral;
    n.literal = v;
    n.cls = cls;
    return Add(std::move(n));
  }

  int Column(std::string_view name) {
    for (size_t i = 0; i < schema_.fields.size(); ++i) {
      if (!SameName(schema_.fields[i].name, name)) continue;
      NativeExpr::Node n;
      n.op = Op::kColumn;
      n.column = i;
      switch (schema_.fields[i].type.kind()) {
        case TypeKind::kBoolean:
        case TypeKind::kInt32:
        case TypeKind::kInt64:
        case TypeKind::kFloat32:
        case TypeKind::kFloat64:
        case TypeKind::kDecimal:
          n.cls = Class::kNumber;
          break;
        case TypeKind::kString:
          n.cls = Class::kText;
          break;
        default:  // dates, times, uuids, bytes and lists are shown to SQLite as text: left to it
          return -1;
      }
      return Add(std::move(n));
    }
    return -1;  // not a column here (rowid, or a double-quoted string)
  }

  // CAST(x AS t): the type names SQLite reads as INTEGER or REAL affinity, one word each.
  int Cast() {
    if (!IsOp("(")) return -1;
    ++p_;
    const int a = Or();
    if (!Numeric(a) || !IsWord("as")) return -1;
    ++p_;
    if (Peek().kind != Token::kId) return -1;
    Op op;
    const std::string& type = Peek().text;
    if (SameName(type, "integer") || SameName(type, "int") || SameName(type, "bigint")) {
      op = Op::kCastInt;
    } else if (SameName(type, "real") || SameName(type, "double") || SameName(type, "float")) {
      op = Op::kCastReal;
    } else {
      return -1;
    }
    ++p_;
    if (!IsOp(")")) return -1;
    ++p_;
    return Binary(op, a, -1, Class::kNumber);
  }

  int Round() {
    ++p_;  // (
    const int a = Or();
    if (!Numeric(a)) return -1;
    if (IsOp(",")) {
      // round(x, 0) only: other places go through SQLite's printf.
      ++p_;
      if (Peek().kind != Token::kNumber) return -1;
      const auto digits = ReadNumber(db_, Peek().text);
      if (!digits || digits->type != Type::kInt || digits->i != 0) return -1;
      ++p_;
    }
    if (!IsOp(")")) return -1;
    ++p_;
    return Binary(Op::kRound, a, -1, Class::kNumber);
  }

  int Primary() {
    const Token& t = Peek();
    switch (t.kind) {
      case Token::kNumber: {
        const auto v = ReadNumber(db_, t.text);
        ++p_;
        if (!v) return -1;
        e_->strings_.push_back(t.text);
        const int n = Literal(*v, Class::kNumber);
        e_->nodes_[static_cast<size_t>(n)].number = e_->strings_.back();
        return n;
      }
      case Token::kString: {
        e_->strings_.push_back(t.text);
        ++p_;
        return Literal(SqlValue::Text(e_->strings_.back()), Class::kText);
      }
      case Token::kQuotedId: {
        const std::string name = t.text;
        ++p_;
        return Column(name);
      }
      case Token::kOp: {
        if (t.text != "(") return -1;
        ++p_;
        const int a = Or();
        if (a < 0 || !IsOp(")")) return -1;
        ++p_;
        return a;
      }
      case Token::kId: {
        const std::string word = t.text;
        ++p_;
        const bool call = IsOp("(");
        if (SameName(word, "null") && !call) return Literal(SqlValue(), Class::kNull);
        if (SameName(word, "cast")) return Cast();
        if (call) return SameName(word, "round") ? Round() : -1;
        // SQLite's keywords (TRUE, CURRENT_DATE, ...) mean more than a name: left to it.
        if (sqlite3_keyword_check(word.data(), static_cast<int>(word.size())) != 0) return -1;
        return Column(word);
      }
      case Token::kEnd:
        return -1;
    }
    return -1;
  }

  NativeExpr* e_;
  std::vector<Token> t_;
  size_t p_ = 0;
  const Schema& schema_;
  sqlite3* db_;
};

std::unique_ptr<NativeExpr> NativeExpr::Compile(std::string_view text, const Schema& schema,
                                                sqlite3* db, bool condition) {
  auto tokens = Tokenize(text);
  if (!tokens) return nullptr;
  std::unique_ptr<NativeExpr> e(new NativeExpr());
  Parser parser(e.get(), std::move(*tokens), schema, db);
  e->root_ = parser.Parse();
  if (e->root_ < 0) return nullptr;
  // A condition of text is judged by its reading as a number: left to SQLite.
  if (condition && e->nodes_[static_cast<size_t>(e->root_)].cls == Class::kText) return nullptr;
  e->values_.assign(e->nodes_.size(), std::vector<SqlValue>(kChunk));
  return e;
}

namespace {

// A column's rows [begin, begin + count) as SQLite is given them (evaluator.cc's virtual table).
template <typename T, typename Make>
void ReadFixed(const Column& col, size_t begin, size_t count, SqlValue* out, Make make) {
  for (size_t k = 0; k < count; ++k) {
    const size_t row = begin + k;
    out[k] = col.IsValid(row) ? make(col.ValueAt<T>(row)) : SqlValue();
  }
}

void ReadColumn(const Column& col, size_t begin, size_t count, SqlValue* out) {
  switch (col.type().kind()) {
    case TypeKind::kBoolean:
      return ReadFixed<uint8_t>(col, begin, count, out,
                                [](uint8_t v) { return SqlValue::Int(v != 0 ? 1 : 0); });
    case TypeKind::kInt32:
      return ReadFixed<int32_t>(col, begin, count, out, [](int32_t v) { return SqlValue::Int(v); });
    case TypeKind::kInt64:
      return ReadFixed<int64_t>(col, begin, count, out, [](int64_t v) { return SqlValue::Int(v); });
    case TypeKind::kFloat32:
      return ReadFixed<float>(col, begin, count, out,
                              [](float v) { return SqlValue::Real(static_cast<double>(v)); });
    case TypeKind::kFloat64:
      return ReadFixed<double>(col, begin, count, out, [](double v) { return SqlValue::Real(v); });
    case TypeKind::kDecimal: {
      const int scale = col.type().scale();
      return ReadFixed<int128_t>(col, begin, count, out,
                                 [scale](int128_t v) { return DecimalAsSql(v, scale); });
    }
    default:
      for (size_t k = 0; k < count; ++k) {
        const size_t row = begin + k;
        out[k] = col.IsValid(row) ? SqlValue::Text(col.GetBytes(row)) : SqlValue();
      }
      return;
  }
}

double AsReal(const SqlValue& v) { return v.type == Type::kInt ? static_cast<double>(v.i) : v.r; }

// SQLite's arithmetic: integers while they fit (else REAL), division by zero is NULL, NaN is
// NULL.
template <Op op>
SqlValue Arithmetic(const SqlValue& x, const SqlValue& y) {
  if (x.type == Type::kNull || y.type == Type::kNull) return SqlValue();
  if (x.type == Type::kInt && y.type == Type::kInt) {
    int64_t out = 0;
    bool overflow = false;
    if constexpr (op == Op::kAdd) {
      overflow = __builtin_add_overflow(x.i, y.i, &out);
    } else if constexpr (op == Op::kSub) {
      overflow = __builtin_sub_overflow(x.i, y.i, &out);
    } else if constexpr (op == Op::kMul) {
      overflow = __builtin_mul_overflow(x.i, y.i, &out);
    } else {
      if (y.i == 0) return SqlValue();
      overflow = y.i == -1 && x.i == std::numeric_limits<int64_t>::min();
      if (!overflow) out = x.i / y.i;
    }
    if (!overflow) return SqlValue::Int(out);
  }
  const double a = AsReal(x), b = AsReal(y);
  if constexpr (op == Op::kAdd) {
    return SqlValue::Real(a + b);
  } else if constexpr (op == Op::kSub) {
    return SqlValue::Real(a - b);
  } else if constexpr (op == Op::kMul) {
    return SqlValue::Real(a * b);
  } else {
    if (b == 0) return SqlValue();
    return SqlValue::Real(a / b);
  }
}

// Two non-NULL values of one class: numbers exactly (an integer against a real as SQLite does,
// in long double), strings by their bytes (BINARY collation).
int Compare(const SqlValue& x, const SqlValue& y) {
  if (x.type == Type::kText) {
    const size_t n = std::min(x.size, y.size);
    const int c = n == 0 ? 0 : std::memcmp(x.text, y.text, n);
    if (c != 0) return c < 0 ? -1 : 1;
    return x.size < y.size ? -1 : x.size > y.size ? 1 : 0;
  }
  if (x.type == Type::kInt && y.type == Type::kInt) return x.i < y.i ? -1 : x.i > y.i ? 1 : 0;
  if (x.type == Type::kReal && y.type == Type::kReal) return x.r < y.r ? -1 : x.r > y.r ? 1 : 0;
  if (x.type == Type::kInt) {
    const auto a = static_cast<long double>(x.i);
    const auto b = static_cast<long double>(y.r);
    return a < b ? -1 : a > b ? 1 : 0;
  }
  return -Compare(y, x);
}

template <Op op>
SqlValue Comparison(const SqlValue& x, const SqlValue& y) {
  if constexpr (op == Op::kIs || op == Op::kIsNot) {
    const bool nx = x.type == Type::kNull, ny = y.type == Type::kNull;
    const bool same = nx || ny ? nx && ny : Compare(x, y) == 0;
    return SqlValue::Int(same == (op == Op::kIs) ? 1 : 0);
  } else {
    if (x.type == Type::kNull || y.type == Type::kNull) return SqlValue();
    const int c = Compare(x, y);
    bool r = false;
    if constexpr (op == Op::kEq) r = c == 0;
    if constexpr (op == Op::kNe) r = c != 0;
    if constexpr (op == Op::kLt) r = c < 0;
    if constexpr (op == Op::kLe) r = c <= 0;
    if constexpr (op == Op::kGt) r = c > 0;
    if constexpr (op == Op::kGe) r = c >= 0;
    return SqlValue::Int(r ? 1 : 0);
  }
}

// 0 false, 1 true, 2 NULL: SQLite's reading of an operand of AND, OR, NOT.
int Logic(const SqlValue& v) { return v.type == Type::kNull ? 2 : NativeExpr::Truthy(v) ? 1 : 0; }

SqlValue FromLogic(int v) { return v == 2 ? SqlValue() : SqlValue::Int(v); }

template <Op op>
SqlValue Logical(const SqlValue& x, const SqlValue& y) {
  static constexpr int kAnd[] = {0, 0, 0, 0, 1, 2, 0, 2, 2};
  static constexpr int kOr[] = {0, 1, 2, 1, 1, 1, 2, 1, 2};
  const int i = Logic(x) * 3 + Logic(y);
  return FromLogic(op == Op::kAnd ? kAnd[i] : kOr[i]);
}

SqlValue Not(const SqlValue& x) {
  const int v = Logic(x);
  return FromLogic(v == 2 ? 2 : 1 - v);
}

SqlValue CastInt(const SqlValue& x) {
  return x.type == Type::kReal ? SqlValue::Int(SqlRealToInt(x.r)) : x;
}

SqlValue CastReal(const SqlValue& x) {
  return x.type == Type::kInt ? SqlValue::Real(static_cast<double>(x.i)) : x;
}

// SQLite's round(x) (and round(x, 0)) of a value that may have a fraction: half away from zero,
// through an int64 (so -0.4 gives 0.0).
SqlValue Round(const SqlValue& x) {
  if (x.type == Type::kNull) return x;
  double r = AsReal(x);
  if (r >= -4503599627370496.0 && r <= 4503599627370496.0) {
    r = static_cast<double>(static_cast<int64_t>(r + (r < 0 ? -0.5 : 0.5)));
  }
  return SqlValue::Real(r);
}

template <typename F>
void Each(size_t count, SqlValue* out, const SqlValue* a, F f) {
  for (size_t k = 0; k < count; ++k) out[k] = f(a[k]);
}

template <typename F>
void Each(size_t count, SqlValue* out, const SqlValue* a, const SqlValue* b, F f) {
  for (size_t k = 0; k < count; ++k) out[k] = f(a[k], b[k]);
}

}  // namespace

const SqlValue* NativeExpr::Eval(const Batch& batch, size_t begin, size_t count) {
  Eval(root_, batch, begin, count);
  return values_[static_cast<size_t>(root_)].data();
}

// A node's values a chunk at a time: one dispatch per node and chunk, not per row.
void NativeExpr::Eval(int n, const Batch& batch, size_t begin, size_t count) {
  const Node& x = nodes_[static_cast<size_t>(n)];
  if (x.a >= 0) Eval(x.a, batch, begin, count);
  if (x.b >= 0) Eval(x.b, batch, begin, count);
  SqlValue* out = values_[static_cast<size_t>(n)].data();
  const SqlValue* a = x.a >= 0 ? values_[static_cast<size_t>(x.a)].data() : nullptr;
  const SqlValue* b = x.b >= 0 ? values_[static_cast<size_t>(x.b)].data() : nullptr;
  switch (x.op) {
    case Op::kLiteral:
      std::fill(out, out + count, x.literal);
      return;
    case Op::kColumn:
      return ReadColumn(batch.column(x.column), begin, count, out);
    case Op::kAdd:
      return Each(count, out, a, b, Arithmetic<Op::kAdd>);
    case Op::kSub:
      return Each(count, out, a, b, Arithmetic<Op::kSub>);
    case Op::kMul:
      return Each(count, out, a, b, Arithmetic<Op::kMul>);
    case Op::kDiv:
      return Each(count, out, a, b, Arithmetic<Op::kDiv>);
    case Op::kEq:
      return Each(count, out, a, b, Comparison<Op::kEq>);
    case Op::kNe:
      return Each(count, out, a, b, Comparison<Op::kNe>);
    case Op::kLt:
      return Each(count, out, a, b, Comparison<Op::kLt>);
    case Op::kLe:
      return Each(count, out, a, b, Comparison<Op::kLe>);
    case Op::kGt:
      return Each(count, out, a, b, Comparison<Op::kGt>);
    case Op::kGe:
      return Each(count, out, a, b, Comparison<Op::kGe>);
    case Op::kIs:
      return Each(count, out, a, b, Comparison<Op::kIs>);
    case Op::kIsNot:
      return Each(count, out, a, b, Comparison<Op::kIsNot>);
    case Op::kAnd:
      return Each(count, out, a, b, Logical<Op::kAnd>);
    case Op::kOr:
      return Each(count, out, a, b, Logical<Op::kOr>);
    case Op::kNot:
      return Each(count, out, a, Not);
    case Op::kCastInt:
      return Each(count, out, a, CastInt);
    case Op::kCastReal:
      return Each(count, out, a, CastReal);
    case Op::kRound:
      return Each(count, out, a, Round);
  }
}

}  // namespace ferry::transform
