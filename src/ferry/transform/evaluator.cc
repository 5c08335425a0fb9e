#include "ferry/transform/evaluator.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "ferry/clients/sqlite/sqlite.h"
#include "ferry/types/value_json.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::transform {
namespace {

// SQLite's declared type for a column, which gives it the affinity comparisons use.
const char* DeclaredType(const DataType& t) {
  switch (t.kind()) {
    case TypeKind::kBoolean:
    case TypeKind::kInt32:
    case TypeKind::kInt64:
      return "INTEGER";
    case TypeKind::kFloat32:
    case TypeKind::kFloat64:
      return "REAL";
    case TypeKind::kDecimal:
      return "NUMERIC";
    case TypeKind::kBinary:
      return "BLOB";
    default:
      return "TEXT";
  }
}

// "13:45:00", "13:45:00.5": the fraction without its trailing zeros, as PostgreSQL shows times.
std::string TrimFraction(std::string text) {
  const size_t dot = text.rfind('.');
  if (dot == std::string::npos || text.find(':', dot) != std::string::npos) return text;
  size_t end = text.size();
  while (end > dot + 1 && text[end - 1] == '0') --end;
  if (end == dot + 1) end = dot;
  text.resize(end);
  return text;
}

}  // namespace

// The virtual table over the batch being read: sqlite3_vtab first, so SQLite's pointer is ours.
struct Evaluator::Table {
  sqlite3_vtab base{};
  const Schema* schema = nullptr;
  const Batch* batch = nullptr;
};

namespace {

struct Cursor {
  sqlite3_vtab_cursor base{};
  size_t row = 0;
};

Evaluator::Table* TableOf(sqlite3_vtab* v) { return reinterpret_cast<Evaluator::Table*>(v); }

int Connect(sqlite3* db, void* aux, int, const char* const*, sqlite3_vtab** out, char**) {
  auto* t = static_cast<Evaluator::Table*>(aux);
  std::string ddl = "CREATE TABLE x(";
  for (size_t i = 0; i < t->schema->fields.size(); ++i) {
    const Field& f = t->schema->fields[i];
    ddl += (i ? ", " : "") + sqlite::QuoteIdentifier(f.name) + " " + DeclaredType(f.type);
  }
  ddl += ")";
  const int rc = sqlite3_declare_vtab(db, ddl.c_str());
  if (rc != SQLITE_OK) return rc;
  *out = &t->base;
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab*) { return SQLITE_OK; }  // the Evaluator owns the table

int BestIndex(sqlite3_vtab*, sqlite3_index_info* info) {
  info->estimatedCost = 1000000;
  info->estimatedRows = 1000000;
  return SQLITE_OK;
}

int Open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
  auto* c = new Cursor();
  *out = &c->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* c) {
  delete reinterpret_cast<Cursor*>(c);
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* c, int, const char*, int, sqlite3_value**) {
  reinterpret_cast<Cursor*>(c)->row = 0;
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* c) {
  ++reinterpret_cast<Cursor*>(c)->row;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* c) {
  const Evaluator::Table* t = TableOf(c->pVtab);
  return t->batch == nullptr || reinterpret_cast<Cursor*>(c)->row >= t->batch->num_rows();
}

int RowId(sqlite3_vtab_cursor* c, sqlite3_int64* out) {
  *out = static_cast<sqlite3_int64>(reinterpret_cast<Cursor*>(c)->row);
  return SQLITE_OK;
}

void ResultText(sqlite3_context* ctx, const std::string& s) {
  sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

int ColumnValue(sqlite3_vtab_cursor* c, sqlite3_context* ctx, int i) {
  const Evaluator::Table* t = TableOf(c->pVtab);
  const size_t row = reinterpret_cast<Cursor*>(c)->row;
  const Column& col = t->batch->column(static_cast<size_t>(i));
  if (!col.IsValid(row)) {
    sqlite3_result_null(ctx);
    return SQLITE_OK;
  }
  const DataType& type = col.type();
  switch (type.kind()) {
    case TypeKind::kBoolean:
      sqlite3_result_int(ctx, col.ValueAt<uint8_t>(row) != 0 ? 1 : 0);
      break;
    case TypeKind::kInt32:
      sqlite3_result_int64(ctx, col.ValueAt<int32_t>(row));
      break;
    case TypeKind::kInt64:
      sqlite3_result_int64(ctx, col.ValueAt<int64_t>(row));
      break;
    case TypeKind::kFloat32:
      sqlite3_result_double(ctx, static_cast<double>(col.ValueAt<float>(row)));
      break;
    case TypeKind::kFloat64:
      sqlite3_result_double(ctx, col.ValueAt<double>(row));
      break;
    case TypeKind::kDecimal: {
      const SqlValue v = DecimalAsSql(col.ValueAt<int128_t>(row), type.scale());
      if (v.type == SqlValue::Type::kInt) {
        sqlite3_result_int64(ctx, v.i);
      } else {
        sqlite3_result_double(ctx, v.r);
      }
      break;
    }
    case TypeKind::kDate:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kUuid: {
      auto text = FormatTextValue(col, row);
      ResultText(ctx, type.kind() == TypeKind::kUuid ? *text : TrimFraction(*text));
      break;
    }
    case TypeKind::kTimestampTz:
      ResultText(ctx, TrimFraction(FormatTimestampIso(col.ValueAt<int64_t>(row))));
      break;
    // The batch outlives the statement's step: SQLite may point at its bytes (SQLITE_STATIC)
    // rather than copy them.
    case TypeKind::kString: {
      const std::string_view s = col.GetBytes(row);
      sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
      break;
    }
    case TypeKind::kBinary: {
      const std::string_view s = col.GetBytes(row);
      sqlite3_result_blob(ctx, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
      break;
    }
    case TypeKind::kList: {
      auto json = FormatListJson(col, row, [](const Column& e, size_t r) -> Result<std::string> {
        auto text = FormatTextValue(e, r);
        return text ? *text : std::string();
      });
      if (!json.ok()) {
        sqlite3_result_error(ctx, json.status().message().c_str(), -1);
        return SQLITE_ERROR;
      }
      ResultText(ctx, *json);
      break;
    }
  }
  return SQLITE_OK;
}

sqlite3_module MakeModule() {
  sqlite3_module m{};
  m.iVersion = 1;
  m.xCreate = Connect;
  m.xConnect = Connect;
  m.xBestIndex = BestIndex;
  m.xDisconnect = Disconnect;
  m.xDestroy = Disconnect;
  m.xOpen = Open;
  m.xClose = Close;
  m.xFilter = Filter;
  m.xNext = Next;
  m.xEof = Eof;
  m.xColumn = ColumnValue;
  m.xRowid = RowId;
  return m;
}

const sqlite3_module kModule = MakeModule();

int Authorize(void*, int action, const char* a, const char* b, const char* db, const char*) {
  switch (action) {
    case SQLITE_SELECT:
      return SQLITE_OK;
    case SQLITE_FUNCTION:  // b: the function's name
      return b != nullptr && std::string_view(b) == "load_extension" ? SQLITE_DENY : SQLITE_OK;
    case SQLITE_READ:  // a column of the batch's table (temp."row") only
      return db != nullptr && std::string_view(db) == "temp" && a != nullptr &&
                     std::string_view(a) == "row"
                 ? SQLITE_OK
                 : SQLITE_DENY;
    default:
      return SQLITE_DENY;
  }
}

std::string ColumnNames(const Schema& schema) {
  std::string out;
  for (const auto& f : schema.fields) out += (out.empty() ? "" : ", ") + f.name;
  return out;
}

}  // namespace

Result<std::unique_ptr<Evaluator>> Evaluator::Make(const Schema& schema, const std::string& filter,
                                                   const std::vector<std::string>& exprs,
                                                   const std::string& what, bool native) {
  std::unique_ptr<Evaluator> e(new Evaluator());
  e->table_ = std::make_unique<Table>();
  e->table_->schema = &schema;
  e->texts_ = exprs;
  e->filter_ = filter;
  e->num_exprs_ = exprs.size();
  if (sqlite3_open_v2(":memory:", &e->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    return Status::Internal("cannot open an in-memory SQLite database for expressions");
  }
  // Expressions compute values; they read and write nothing else.
  sqlite3_db_config(e->db_, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(e->db_, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  if (sqlite3_create_module_v2(e->db_, "ferry_batch", &kModule, e->table_.get(), nullptr) !=
      SQLITE_OK) {
    return Status::Internal(std::string("registering the batch table: ") + sqlite3_errmsg(e->db_));
  }
  char* err = nullptr;
  if (sqlite3_exec(e->db_, "CREATE VIRTUAL TABLE temp.\"row\" USING ferry_batch", nullptr, nullptr,
                   &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::Internal("creating the batch table: " + m);
  }
  // From here on statements may read the batch's table and call functions, nothing else (no
  // ATTACH, no pragma, no write, no other table), whatever an expression says.
  sqlite3_set_authorizer(e->db_, Authorize, nullptr);
  // Each expression alone first, so that an error names the one at fault.
  for (const auto& x : exprs) {
    sqlite3_stmt* probe = nullptr;
    FERRY_RETURN_IF_ERROR(
        e->Prepare("SELECT (" + x + ") FROM temp.\"row\"", &probe, what + " '" + x + "'"));
    sqlite3_finalize(probe);
  }
  if (!filter.empty()) {
    sqlite3_stmt* probe = nullptr;
    FERRY_RETURN_IF_ERROR(e->Prepare("SELECT 1 FROM temp.\"row\" WHERE (" + filter + ")", &probe,
                                     what + " filter '" + filter + "'"));
    sqlite3_finalize(probe);
  }
  std::string values;
  for (const auto& x : exprs) values += ", (" + x + ")";
  const std::string cond = filter.empty() ? std::string("1") : "(" + filter + ")";
  FERRY_RETURN_IF_ERROR(e->Prepare(
      "SELECT rowid, 1" + values + " FROM temp.\"row\"" + (filter.empty() ? "" : " WHERE " + cond),
      &e->matching_, what));
  FERRY_RETURN_IF_ERROR(e->Prepare(
      "SELECT rowid, " + cond + " IS TRUE" + values + " FROM temp.\"row\"", &e->every_, what));
  if (native) {
    // SQLite has accepted every expression; those of the common shapes are computed here.
    std::unique_ptr<NativeExpr> f;
    bool all = filter.empty() ||
               (f = NativeExpr::Compile(filter, schema, e->db_, /*condition=*/true)) != nullptr;
    std::vector<std::unique_ptr<NativeExpr>> xs;
    for (size_t i = 0; all && i < exprs.size(); ++i) {
      xs.push_back(NativeExpr::Compile(exprs[i], schema, e->db_, /*condition=*/false));
      all = xs.back() != nullptr;
    }
    if (all) {
      e->native_filter_ = std::move(f);
      e->native_exprs_ = std::move(xs);
      e->native_values_.resize(exprs.size());
    }
  }
  return e;
}

Status Evaluator::Prepare(const std::string& sql, sqlite3_stmt** st, const std::string& what) {
  const char* tail = nullptr;
  if (sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                         st, &tail) != SQLITE_OK) {
    return Status::InvalidArgument(what + ": " + sqlite3_errmsg(db_) +
                                   " (expressions are SQLite's SQL over the source's columns: " +
                                   ColumnNames(*table_->schema) + ")");
  }
  if (tail != nullptr &&
      std::string_view(tail).find_first_not_of(" \t\r\n;") != std::string_view::npos) {
    sqlite3_finalize(*st);
    *st = nullptr;
    return Status::InvalidArgument(what + ": is more than one expression");
  }
  // Reading the batch only: an expression that would write or open anything is refused.
  if (!sqlite3_stmt_readonly(*st)) {
    sqlite3_finalize(*st);
    *st = nullptr;
    return Status::InvalidArgument(what + ": is not an expression (it would change something)");
  }
  return Status::OK();
}

Evaluator::~Evaluator() {
  sqlite3_finalize(matching_);
  sqlite3_finalize(every_);
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

bool Evaluator::Row::matches() const {
  return native_ ? matches_ : sqlite3_column_int(st_, 1) != 0;
}
int Evaluator::Row::type(size_t i) const {
  if (native_) {
    static constexpr int kTypes[] = {SQLITE_NULL, SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT};
    return kTypes[static_cast<size_t>(value(i).type)];
  }
  return sqlite3_column_type(st_, first_ + static_cast<int>(i));
}
int64_t Evaluator::Row::Int(size_t i) const {
  if (native_) {
    const SqlValue& v = value(i);
    return v.type == SqlValue::Type::kInt    ? v.i
           : v.type == SqlValue::Type::kReal ? SqlRealToInt(v.r)
                                             : 0;
  }
  return sqlite3_column_int64(st_, first_ + static_cast<int>(i));
}
double Evaluator::Row::Double(size_t i) const {
  if (native_) {
    const SqlValue& v = value(i);
    return v.type == SqlValue::Type::kInt ? static_cast<double>(v.i) : v.r;
  }
  return sqlite3_column_double(st_, first_ + static_cast<int>(i));
}
std::string_view Evaluator::Row::Text(size_t i) const {
  if (native_) {
    // Numbers as SQLite shows them: integers in full, reals to 15 significant digits.
    const SqlValue& v = value(i);
    char buf[64];
    switch (v.type) {
      case SqlValue::Type::kText:
        return v.s();
      case SqlValue::Type::kInt:
        sqlite3_snprintf(sizeof buf, buf, "%lld", static_cast<long long>(v.i));
        break;
      case SqlValue::Type::kReal:
        sqlite3_snprintf(sizeof buf, buf, "%!.15g", v.r);
        break;
      case SqlValue::Type::kNull:
        return {};
    }
    text_ = buf;
    return text_;
  }
  const int c = first_ + static_cast<int>(i);
  const auto* p = sqlite3_column_type(st_, c) == SQLITE_BLOB
                      ? static_cast<const char*>(sqlite3_column_blob(st_, c))
                      : reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
  return std::string_view(p == nullptr ? "" : p, static_cast<size_t>(sqlite3_column_bytes(st_, c)));
}

Status Evaluator::Run(const Batch& batch, bool every_row,
                      const std::function<Status(size_t row, const Row& values)>& each) {
  if (native()) {
    Row values;
    values.native_ = true;
    values.values_ = native_values_.data();
    for (size_t begin = 0, n = batch.num_rows(); begin < n; begin += NativeExpr::kChunk) {
      const size_t count = std::min(NativeExpr::kChunk, n - begin);
      const SqlValue* filter =
          native_filter_ == nullptr ? nullptr : native_filter_->Eval(batch, begin, count);
      for (size_t i = 0; i < native_exprs_.size(); ++i) {
        native_values_[i] = native_exprs_[i]->Eval(batch, begin, count);
      }
      for (size_t k = 0; k < count; ++k) {
        values.matches_ = filter == nullptr || NativeExpr::Truthy(filter[k]);
        if (!every_row && !values.matches_) continue;
        values.at_ = k;
        FERRY_RETURN_IF_ERROR(each(begin + k, values));
      }
    }
    return Status::OK();
  }
  sqlite3_stmt* st = every_row ? every_ : matching_;
  table_->batch = &batch;
  Row values;
  values.st_ = st;
  values.first_ = 2;
  Status result;
  for (;;) {
    const int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      std::string exprs = filter_.empty() ? "" : "filter '" + filter_ + "'";
      for (const auto& x : texts_) exprs += (exprs.empty() ? "'" : ", '") + x + "'";
      result = Status::InvalidArgument("evaluating " + exprs + ": " + sqlite3_errmsg(db_));
      break;
    }
    const auto row = static_cast<size_t>(sqlite3_column_int64(st, 0));
    result = each(row, values);
    if (!result.ok()) break;
  }
  sqlite3_reset(st);
  table_->batch = nullptr;
  return result;
}

}  // namespace ferry::transform
