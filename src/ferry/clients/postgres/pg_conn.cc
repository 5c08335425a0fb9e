#include "ferry/clients/postgres/pg_conn.h"

#include "ferry/base/sql.h"

#include <libpq-fe.h>

#include <sys/select.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ferry/base/log.h"
#include "ferry/config/config.h"

namespace ferry::pg {
namespace {

void NoticeToLog(void*, const char* message) {
  std::string m = message ? message : "";
  while (!m.empty() && m.back() == '\n') m.pop_back();
  FERRY_LOG(kDebug) << "PostgreSQL: " << config::Redact(m);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool Contains(const std::string& hay, const char* needle) {
  return hay.find(needle) != std::string::npos;
}

}  // namespace

std::string QuoteIdent(std::string_view name) { return QuoteSqlIdentifier(name); }

PgResult::PgResult(pg_result* r) : r_(r, PQclear) {}
int PgResult::rows() const { return r_ ? PQntuples(r_.get()) : 0; }
int PgResult::cols() const { return r_ ? PQnfields(r_.get()) : 0; }
int64_t PgResult::AffectedRows() const {
  const char* n = r_ ? PQcmdTuples(r_.get()) : nullptr;
  return (n && *n) ? std::strtoll(n, nullptr, 10) : 0;
}
bool PgResult::IsNull(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
std::string PgResult::Text(int row, int col) const {
  return std::string(PQgetvalue(r_.get(), row, col),
                     static_cast<size_t>(PQgetlength(r_.get(), row, col)));
}
int64_t PgResult::Int64(int row, int col) const {
  if (IsNull(row, col)) return 0;
  return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10);
}
double PgResult::Double(int row, int col) const {
  if (IsNull(row, col)) return 0;
  return std::strtod(PQgetvalue(r_.get(), row, col), nullptr);
}
std::string_view PgResult::Bytes(int row, int col) const {
  return std::string_view(PQgetvalue(r_.get(), row, col),
                          static_cast<size_t>(PQgetlength(r_.get(), row, col)));
}
bool PgResult::Bool(int row, int col) const {
  return !IsNull(row, col) && PQgetvalue(r_.get(), row, col)[0] == 't';
}

namespace {

// What a DSN may show of itself: its password only to scrub messages of it.
struct ParsedDsn {
  std::string password;
  std::string where;  // "host=... port=... dbname=... user=..."
  std::string uri;    // "postgresql://user@host:port/database"
};

Result<ParsedDsn> ParseDsn(const std::string& dsn, std::string_view setting) {
  char* parse_error = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &parse_error);
  if (!opts) {
    std::string m = parse_error ? Trim(parse_error) : "out of memory";
    if (parse_error) PQfreemem(parse_error);
    return Status::InvalidArgument(std::string(setting) +
                                   " is not a valid libpq connection string (" + config::Redact(m) +
                                   "); write it as \"host=... port=... dbname=... user=... "
                                   "password=${PGPASSWORD}\" or as a postgresql:// URI");
  }
  ParsedDsn out;
  std::string user, host, port, db;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (!o->val) continue;
    std::string k = o->keyword;
    if (k == "password") out.password = o->val;
    if (k == "host" || k == "hostaddr" || k == "port" || k == "dbname" || k == "user") {
      out.where += (out.where.empty() ? "" : " ") + k + "=" + o->val;
    }
    if (k == "user") user = o->val;
    if (k == "host" && host.empty()) host = o->val;
    if (k == "hostaddr") host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") db = o->val;
  }
  PQconninfoFree(opts);
  out.uri = "postgresql://" + (user.empty() ? "" : user + "@") + host + (port.empty() ? "" : ":") +
            port + "/" + db;
  return out;
}

}  // namespace

Result<std::string> PgConnection::DsnUri(const std::string& dsn, std::string_view setting) {
  FERRY_ASSIGN_OR_RETURN(ParsedDsn parsed, ParseDsn(dsn, setting));
  return parsed.uri;
}

Result<std::unique_ptr<PgConnection>> PgConnection::Connect(const std::string& dsn,
                                                            const PgConnectOptions& options) {
  // Parse first: to validate, to know the password (to scrub it from any message) and to name
  // the server in errors without echoing the DSN.
  const std::string setting(options.setting);
  FERRY_ASSIGN_OR_RETURN(ParsedDsn parsed, ParseDsn(dsn, setting));

  // Later keywords override earlier ones, and the expanded DSN sits in the middle: the DSN may
  // override the timeout, the keepalives and the name, never the encoding (COPY's text values
  // must be UTF-8).
  const std::string application(options.application);
  const char* keys[] = {
      "connect_timeout",  "keepalives", "keepalives_idle", "keepalives_interval",
      "keepalives_count", "dbname",     "client_encoding", "fallback_application_name",
      "replication",      nullptr};
  const char* vals[] = {"10",
                        "1",
                        "30",
                        "10",
                        "3",
                        dsn.c_str(),
                        "UTF8",
                        application.c_str(),
                        options.replication ? "database" : nullptr,
                        nullptr};
  PGconn* conn = PQconnectdbParams(keys, vals, 1);
  if (!conn) return Status::Unavailable("cannot allocate a PostgreSQL connection");
  auto c = std::unique_ptr<PgConnection>(new PgConnection(conn, parsed.password));
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string m = c->Clean(Trim(PQerrorMessage(conn)));
    std::string server =
        options.role.empty()
            ? "PostgreSQL (" +
                  (parsed.where.empty() ? std::string("libpq defaults") : parsed.where) + ")"
            : std::string(options.role) + " " + parsed.uri;
    if (Contains(m, "password authentication failed") || Contains(m, "no password supplied") ||
        Contains(m, "authentication failed") || Contains(m, "pg_hba.conf")) {
      return Status::PermissionDenied("cannot log in to " + server + ": " + m +
                                      "; check the user and password in " + setting +
                                      " (e.g. "
                                      "password=${PGPASSWORD}) and the server's pg_hba.conf");
    }
    if (Contains(m, "does not exist")) {
      return Status::NotFound("cannot connect to " + server + ": " + m +
                              "; check dbname and user in " + setting +
                              " (or create the database)");
    }
    return Status::Unavailable("cannot connect to " + server + ": " + m +
                               "; check host and port in " + setting +
                               " and that the server runs and "
                               "accepts TCP connections from here (listen_addresses, pg_hba.conf)");
  }
  PQsetNoticeProcessor(conn, NoticeToLog, nullptr);
  c->cancel_ = PQgetCancel(conn);
  // A sync holds one transaction open while sinks commit: server-side timeouts must not end it.
  // Text forms that do not depend on the server's or role's defaults: timestamptz as
  // "2024-01-01 12:00:00+00", dates as ISO, floats with every digit (shortest exact form).
  for (const char* set :
       {"SET statement_timeout = 0", "SET idle_in_transaction_session_timeout = 0",
        "SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, YMD'", "SET extra_float_digits = 3"}) {
    auto r = c->SimpleQuery(set);
    if (!r.ok()) return r.status();
  }
  return c;
}

PgConnection::~PgConnection() {
  if (cancel_ != nullptr) PQfreeCancel(cancel_);
  PQfinish(conn_);
}

void PgConnection::Cancel() const {
  if (cancel_ == nullptr) return;
  char err[256];
  if (!PQcancel(cancel_, err, sizeof err)) {
    FERRY_LOG(kWarn) << "could not ask " << Describe() << " to cancel a statement: " << err;
  }
}

std::string PgConnection::Clean(std::string m) const {
  if (password_.size() >= 3) {
    for (size_t at; (at = m.find(password_)) != std::string::npos;)
      m.replace(at, password_.size(), "***");
  }
  return config::Redact(m);
}

std::string PgConnection::User() const { return PQuser(conn_); }

std::string PgConnection::Describe() const {
  int v = PQserverVersion(conn_);
  std::string host = PQhost(conn_) ? PQhost(conn_) : "";
  return "PostgreSQL " + std::to_string(v / 10000) + "." + std::to_string(v % 10000) + " at " +
         host + ":" + PQport(conn_) + ", database " + PQdb(conn_) + ", user " + PQuser(conn_);
}

Status PgConnection::ConnectionError(const std::string& what) const {
  return Status::Unavailable(
      what + ": the connection to PostgreSQL was lost: " + Clean(Trim(PQerrorMessage(conn_))));
}

Status PgConnection::ErrorOf(pg_result* r, const std::string& what) const {
  last_sqlstate_.clear();
  if (PQstatus(conn_) != CONNECTION_OK) return ConnectionError(what);
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const char* primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  const char* hint = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_HINT) : nullptr;
  std::string code = state ? state : "";
  last_sqlstate_ = code;
  std::string m = primary ? primary : Trim(PQerrorMessage(conn_));
  if (hint) m += " (hint: " + std::string(hint) + ")";
  m = what + ": PostgreSQL: " + Clean(m) + (code.empty() ? "" : " [SQLSTATE " + code + "]");
  if (code == "42501") return Status::PermissionDenied(m);
  if (code == "42P01" || code == "3F000") return Status::NotFound(m);
  if (code.rfind("08", 0) == 0 || code.rfind("57P", 0) == 0) return Status::Unavailable(m);
  // Object in use: e.g. a replication slot still held by the session of a process that just
  // died (its server process has not noticed yet). Retryable.
  if (code == "55006") return Status::Unavailable(m);
  if (code == "57014") return Status::Cancelled(m);
  return Status::IOError(m);
}

Result<PgResult> PgConnection::Query(const std::string& sql,
                                     const std::vector<std::optional<std::string>>& params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  PGresult* r = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
  PgResult owned(r);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) return ErrorOf(r, "query");
  return owned;
}

Result<std::string> PgConnection::Literal(std::string_view value) const {
  char* q = PQescapeLiteral(conn_, value.data(), value.size());
  if (!q) {
    return Status::InvalidArgument("cannot quote a value as an SQL literal: " +
                                   Clean(Trim(PQerrorMessage(conn_))));
  }
  std::string out(q);
  PQfreemem(q);
  return out;
}

Status PgConnection::Exec(const std::string& sql) {
  auto r = Query(sql);
  return r.ok() ? Status::OK() : r.status();
}

Result<PgResult> PgConnection::SimpleQuery(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  PgResult owned(r);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) return ErrorOf(r, "query");
  return owned;
}

Result<PgResult> PgConnection::QueryBinary(const std::string& sql,
                                           const std::vector<std::optional<std::string>>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  for (const auto& p : params) {
    values.push_back(p ? p->data() : nullptr);
    lengths.push_back(p ? static_cast<int>(p->size()) : 0);
    formats.push_back(1);
  }
  PGresult* r = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), lengths.data(), formats.data(), 1);
  PgResult owned(r);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) return ErrorOf(r, "query");
  return owned;
}

int PgConnection::ServerVersion() const { return PQserverVersion(conn_); }

bool PgConnection::connected() const { return PQstatus(conn_) == CONNECTION_OK; }

Status PgConnection::StartCopyBoth(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  PgResult owned(r);
  if (!r || PQresultStatus(r) != PGRES_COPY_BOTH) return ErrorOf(r, "START_REPLICATION");
  return Status::OK();
}

Result<int> PgConnection::ReadCopyData(std::string* out, int timeout_ms) {
  for (int round = 0; round < 2; ++round) {
    char* buf = nullptr;
    int n = PQgetCopyData(conn_, &buf, 1);
    if (n > 0) {
      out->assign(buf, static_cast<size_t>(n));
      PQfreemem(buf);
      return 1;
    }
    if (n == -2) return ConnectionError("replication");
    if (n == -1) {
      Status result;
      while (PGresult* r = PQgetResult(conn_)) {
        if (result.ok() && PQresultStatus(r) != PGRES_COMMAND_OK &&
            PQresultStatus(r) != PGRES_TUPLES_OK) {
          result = ErrorOf(r, "replication");
        }
        PQclear(r);
      }
      if (!result.ok()) return result;
      return -1;
    }
    if (round == 1) break;
    // Nothing buffered: wait for the socket, then read what arrived.
    int fd = PQsocket(conn_);
    if (fd < 0) return ConnectionError("replication");
    fd_set in;
    FD_ZERO(&in);
    FD_SET(fd, &in);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int ready = select(fd + 1, &in, nullptr, nullptr, &tv);
    if (ready < 0 && errno != EINTR) return ConnectionError("replication (select)");
    if (ready <= 0) return 0;
    if (PQconsumeInput(conn_) == 0) return ConnectionError("replication");
  }
  return 0;
}

Status PgConnection::PutCopyData(std::string_view data) {
  if (PQputCopyData(conn_, data.data(), static_cast<int>(data.size())) != 1 ||
      PQflush(conn_) != 0) {
    return ConnectionError("replication (sending a status update)");
  }
  return Status::OK();
}

Status PgConnection::SendAndCut(const std::string& sql) {
  if (PQsendQuery(conn_, sql.c_str()) != 1 || PQflush(conn_) != 0) {
    return ConnectionError("sending " + sql);
  }
  ::shutdown(PQsocket(conn_), SHUT_RDWR);
  return Status::Unavailable("the connection was cut after sending " + sql + " (fault injected)");
}

Status PgConnection::CopyIn(const std::string& sql, std::string_view data) {
  {
    PGresult* r = PQexec(conn_, sql.c_str());
    PgResult owned(r);
    if (!r || PQresultStatus(r) != PGRES_COPY_IN) return ErrorOf(r, "COPY");
  }
  // Sent in slices: libpq buffers what it is given, and a slice bounds that buffer.
  constexpr size_t kSlice = 1 << 20;
  Status failed;
  for (size_t at = 0; at < data.size() && failed.ok(); at += kSlice) {
    size_t n = std::min(kSlice, data.size() - at);
    if (PQputCopyData(conn_, data.data() + at, static_cast<int>(n)) != 1) {
      failed = ConnectionError("COPY");
    }
  }
  if (PQputCopyEnd(conn_, failed.ok() ? nullptr : "ferry stopped the COPY") != 1 && failed.ok()) {
    failed = ConnectionError("COPY");
  }
  Status result = failed;
  while (PGresult* r = PQgetResult(conn_)) {
    if (result.ok() && PQresultStatus(r) != PGRES_COMMAND_OK) result = ErrorOf(r, "COPY");
    PQclear(r);
  }
  return result;
}

Status PgConnection::CopyOut(const std::string& sql,
                             const std::function<Status(std::string_view)>& on_data) {
  {
    PGresult* r = PQexec(conn_, sql.c_str());
    PgResult owned(r);
    if (!r || PQresultStatus(r) != PGRES_COPY_OUT) return ErrorOf(r, "COPY");
  }
  Status failed;
  for (;;) {
    char* buf = nullptr;
    int n = PQgetCopyData(conn_, &buf, 0);
    if (n == -1) break;  // the COPY is over; its result follows
    if (n == -2) return ConnectionError("COPY");
    if (n < 0 || !buf) return Status::Internal("PQgetCopyData returned " + std::to_string(n));
    Status s = on_data(std::string_view(buf, static_cast<size_t>(n)));
    PQfreemem(buf);
    if (!s.ok()) {
      failed = s;
      break;
    }
  }
  if (!failed.ok()) {
    // Stop the server's side and drain what is in flight, so the connection stays usable (the
    // transaction is then aborted; EndSnapshot's COMMIT becomes a rollback).
    Cancel();
    for (;;) {
      char* buf = nullptr;
      int n = PQgetCopyData(conn_, &buf, 0);
      if (buf) PQfreemem(buf);
      if (n < 0) break;
    }
  }
  Status result = failed;
  while (PGresult* r = PQgetResult(conn_)) {
    if (result.ok() && PQresultStatus(r) != PGRES_COMMAND_OK) result = ErrorOf(r, "COPY");
    PQclear(r);
  }
  return result;
}

}  // namespace ferry::pg
