// A thin RAII layer over the SQLite C API, shared by the SQLite source, the SQLite destination
// and the SQL catalog.
// Statements bind values; no SQL is ever built from unchecked strings (identifiers go through
// QuoteIdentifier). Not thread-safe: one connection per thread.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/base/status.h"

namespace ferry::sqlite {

// "name" with embedded quotes doubled: safe for any table or column name.
std::string QuoteIdentifier(std::string_view name);

class Statement {
 public:
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t v);
  Statement& Bind(int index, std::string_view v);
  Statement& BindNull(int index);
  Statement& BindDouble(int index, double v);
  Statement& BindBlob(int index, std::string_view v);

  // true: a row is ready; false: done.
  Result<bool> Step();
  Status Reset();
  // Runs to completion (for statements that return no rows).
  Status Exec();

  int ColumnCount() const { return sqlite3_column_count(stmt_); }
  int ColumnType(int i) const { return sqlite3_column_type(stmt_, i); }
  bool IsNull(int i) const { return ColumnType(i) == SQLITE_NULL; }
  int64_t Int64(int i) const { return sqlite3_column_int64(stmt_, i); }
  double Double(int i) const { return sqlite3_column_double(stmt_, i); }
  std::string_view Text(int i) const;
  std::string_view Blob(int i) const;
  std::string ColumnName(int i) const { return sqlite3_column_name(stmt_, i); }
  sqlite3_stmt* raw() { return stmt_; }

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* s) : db_(db), stmt_(s) {}
  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

class Database {
 public:
  enum class Mode { kReadOnly, kReadWrite, kReadWriteCreate };
  static Result<std::unique_ptr<Database>> Open(const std::string& path, Mode mode);
  ~Database();

  Result<Statement> Prepare(std::string_view sql);
  Status Exec(std::string_view sql);  // one or more statements, no parameters
  int64_t Changes() const { return sqlite3_changes64(db_); }
  const std::string& path() const { return path_; }
  sqlite3* raw() { return db_; }

  // Turns the connection's last error into a Status prefixed with `what`.
  Status Error(std::string_view what) const;

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

}  // namespace ferry::sqlite
