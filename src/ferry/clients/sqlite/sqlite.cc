#include "ferry/clients/sqlite/sqlite.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ferry/base/sql.h"

namespace ferry::sqlite {

std::string QuoteIdentifier(std::string_view name) { return QuoteSqlIdentifier(name); }

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = o.db_;
    stmt_ = o.stmt_;
    o.stmt_ = nullptr;
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::Bind(int index, int64_t v) {
  sqlite3_bind_int64(stmt_, index, v);
  return *this;
}

Statement& Statement::Bind(int index, std::string_view v) {
  sqlite3_bind_text64(stmt_, index, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Statement& Statement::BindDouble(int index, double v) {
  sqlite3_bind_double(stmt_, index, v);
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view v) {
  sqlite3_bind_blob64(stmt_, index, v.data(), v.size(), SQLITE_TRANSIENT);
  return *this;
}

namespace {
Status FromCode(sqlite3* db, int rc, std::string_view what) {
  std::string m(what);
  m += ": ";
  m += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(m + " (the database is locked by another writer)");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(m);
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return Status::PermissionDenied(m);
    case SQLITE_CANTOPEN:
      return Status::NotFound(m);
    case SQLITE_CONSTRAINT:
      return Status::AlreadyExists(m);
    case SQLITE_IOERR:
    case SQLITE_FULL:
      return Status::IOError(m);
    default:
      return Status::IOError(m);
  }
}
}  // namespace

Result<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return FromCode(db_, rc, "SQLite statement failed");
}

Status Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  return Status::OK();
}

Status Statement::Exec() {
  for (;;) {
    FERRY_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::OK();
  }
}

std::string_view Statement::Text(int i) const {
  const unsigned char* p = sqlite3_column_text(stmt_, i);
  int n = sqlite3_column_bytes(stmt_, i);
  return p ? std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

std::string_view Statement::Blob(int i) const {
  const void* p = sqlite3_column_blob(stmt_, i);
  int n = sqlite3_column_bytes(stmt_, i);
  return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

namespace {

// "user postgres (uid 108)", for messages about files that user may not open.
std::string CurrentUser() {
  const uid_t uid = ::geteuid();
  const passwd* pw = ::getpwuid(uid);
  return "user " + std::string(pw && pw->pw_name ? pw->pw_name : "?") + " (uid " +
         std::to_string(uid) + ")";
}

// Why SQLite could not open `path`, when it is the file system's permissions (SQLite says only
// "unable to open database file"): kPermissionDenied naming the path, what is missing and for
// whom; OK when permissions are not the reason.
Status PermissionProblem(const std::string& path, bool write) {
  const int want = write ? R_OK | W_OK : R_OK;
  if (::access(path.c_str(), F_OK) == 0) {
    if (::access(path.c_str(), want) != 0 && (errno == EACCES || errno == EROFS)) {
      return Status::PermissionDenied(
          "cannot open SQLite database '" + path + "': " + CurrentUser() + " may not " +
          (write ? "read and write" : "read") + " it (" + std::strerror(errno) +
          "); give that user access to the file, or run ferry as a "
          "user who has it");
    }
    return Status::OK();
  }
  // A file to be created: its folder must let this user create files (SQLite also writes its
  // journal beside the database).
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (write && ::access(dir.c_str(), W_OK | X_OK) != 0 && (errno == EACCES || errno == EROFS)) {
    return Status::PermissionDenied(
        "cannot create SQLite database '" + path + "': " + CurrentUser() +
        " may not create files in the folder '" + dir + "' (" + std::strerror(errno) +
        "); make the folder writable for that user, or choose a "
        "folder that is");
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Database>> Database::Open(const std::string& path, Mode mode) {
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case Mode::kReadOnly:
      flags |= SQLITE_OPEN_READONLY;
      break;
    case Mode::kReadWrite:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Mode::kReadWriteCreate:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status s = FromCode(db, rc, "cannot open SQLite database '" + path + "'");
    sqlite3_close(db);
    if ((rc & 0xff) == SQLITE_CANTOPEN) {
      Status denied = PermissionProblem(path, mode != Mode::kReadOnly);
      if (!denied.ok()) return denied;
    }
    return s;
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_extended_result_codes(db, 1);
  auto out = std::unique_ptr<Database>(new Database(db, path));
  // Opening is lazy in SQLite: touch the schema so that "not a database" shows up here.
  auto probe = out->Exec("SELECT count(*) FROM sqlite_schema");
  if (!probe.ok()) return probe.WithContext("cannot read SQLite database '" + path + "'");
  return out;
}

Database::~Database() { sqlite3_close_v2(db_); }

Result<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &s, nullptr);
  if (rc != SQLITE_OK) return FromCode(db_, rc, "cannot prepare SQL on '" + path_ + "'");
  return Statement(db_, s);
}

Status Database::Exec(std::string_view sql) {
  std::string q(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, q.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) return FromCode(db_, rc, "SQL on '" + path_ + "' failed");
  return Status::OK();
}

Status Database::Error(std::string_view what) const {
  return FromCode(db_, sqlite3_errcode(db_), what);
}

}  // namespace ferry::sqlite
