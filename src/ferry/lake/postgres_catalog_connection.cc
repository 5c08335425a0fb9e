// The SQL catalog's connection to PostgreSQL: a few lines of libpq, kept inside lake so that the
// catalog does not depend on the PostgreSQL source.
//
// Secrets: the connection string is never echoed. Describe() rebuilds a URI from the parsed
// parts without the password; every message from libpq or the server is scrubbed of the password
// and passed through config::Redact.
#include <libpq-fe.h>

#include <cstdlib>

#include "ferry/config/config.h"
#include "ferry/lake/sql_connection.h"

namespace ferry::lake {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool Contains(const std::string& hay, const char* needle) {
  return hay.find(needle) != std::string::npos;
}

class PostgresCatalogConnection final : public SqlConnection {
 public:
  ~PostgresCatalogConnection() override {
    if (conn_) PQfinish(conn_);
  }

  static Result<std::unique_ptr<SqlConnection>> Open(const std::string& dsn) {
    std::unique_ptr<PostgresCatalogConnection> c(new PostgresCatalogConnection());
    c->dsn_ = dsn;
    FERRY_RETURN_IF_ERROR(c->Parse());
    FERRY_RETURN_IF_ERROR(c->Connect());
    return std::unique_ptr<SqlConnection>(std::move(c));
  }

  Result<SqlRows> Execute(const std::string& sql, const SqlParams& params) override {
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      return Status::Unavailable("not connected to " + Describe());
    }
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, 0) == 0) {
      std::string m = Clean(Trim(PQerrorMessage(conn_)));
      if (PQstatus(conn_) != CONNECTION_OK) {
        return Status::Unavailable("the connection to " + Describe() +
                                   " was lost before the statement was sent: " + m);
      }
      return Status::IOError("cannot send a statement to " + Describe() + ": " + m);
    }
    SqlRows out;
    Status refused;
    bool completed = false;
    while (PGresult* r = PQgetResult(conn_)) {
      ExecStatusType st = PQresultStatus(r);
      if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        completed = true;
        const int rows = PQntuples(r), cols = PQnfields(r);
        for (int i = 0; i < rows; ++i) {
          std::vector<SqlValue> row;
          for (int j = 0; j < cols; ++j) {
            if (PQgetisnull(r, i, j)) {
              row.emplace_back(std::nullopt);
            } else {
              row.emplace_back(
                  std::string(PQgetvalue(r, i, j), static_cast<size_t>(PQgetlength(r, i, j))));
            }
          }
          out.rows.push_back(std::move(row));
        }
        const char* n = PQcmdTuples(r);
        out.changed = (n && *n) ? std::strtoll(n, nullptr, 10) : 0;
      } else if (refused.ok()) {
        refused = ErrorOf(r);
      }
      PQclear(r);
    }
    // A statement commits when the server has processed the whole exchange: if the connection
    // broke at any point after sending, even after a result arrived, the outcome is unknown.
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status::CommitStateUnknown(
          "the connection to " + Describe() +
          " was lost while a statement ran, so it may or may not have been applied: " +
          Clean(Trim(PQerrorMessage(conn_))));
    }
    if (!refused.ok()) return refused;
    if (!completed) return Status::Internal("PostgreSQL returned no result for a statement");
    return out;
  }

  Status Reconnect() override { return Connect(); }

  std::string Describe() const override { return uri_; }

 private:
  PostgresCatalogConnection() = default;

  // Validates the connection string and keeps what may be shown of it.
  Status Parse() {
    char* parse_error = nullptr;
    PQconninfoOption* opts = PQconninfoParse(dsn_.c_str(), &parse_error);
    if (!opts) {
      std::string m = parse_error ? Trim(parse_error) : "out of memory";
      if (parse_error) PQfreemem(parse_error);
      return Status::InvalidArgument(
          "destination.catalog is not a valid PostgreSQL connection string (" + config::Redact(m) +
          "); write it as postgresql://user:${PASSWORD}@host:5432/database or "
          "postgresql:host=... port=... dbname=... user=...");
    }
    std::string user, host, port, db;
    for (PQconninfoOption* o = opts; o->keyword; ++o) {
      if (!o->val) continue;
      std::string k = o->keyword;
      if (k == "password") password_ = o->val;
      if (k == "user") user = o->val;
      if (k == "host" && host.empty()) host = o->val;
      if (k == "hostaddr") host = o->val;
      if (k == "port") port = o->val;
      if (k == "dbname") db = o->val;
    }
    PQconninfoFree(opts);
    uri_ = "postgresql://" + (user.empty() ? "" : user + "@") + host + (port.empty() ? "" : ":") +
           port + "/" + db;
    return Status::OK();
  }

  Status Connect() {
    if (conn_) {
      PQfinish(conn_);
      conn_ = nullptr;
    }
    // Later keywords override earlier ones and the expanded DSN sits in the middle: the DSN may
    // set its own timeout and keepalives (a dead server is noticed instead of waited on forever).
    const char* keys[] = {
        "connect_timeout",  "keepalives", "keepalives_idle",           "keepalives_interval",
        "keepalives_count", "dbname",     "fallback_application_name", nullptr};
    const char* vals[] = {"10", "1", "30", "10", "3", dsn_.c_str(), "ferry-catalog", nullptr};
    conn_ = PQconnectdbParams(keys, vals, 1);
    if (!conn_) return Status::Unavailable("cannot allocate a PostgreSQL connection");
    if (PQstatus(conn_) == CONNECTION_OK) return Status::OK();
    std::string m = Clean(Trim(PQerrorMessage(conn_)));
    PQfinish(conn_);
    conn_ = nullptr;
    const std::string where = "the catalog database " + Describe();
    if (Contains(m, "password authentication failed") || Contains(m, "no password supplied") ||
        Contains(m, "authentication failed") || Contains(m, "pg_hba.conf")) {
      return Status::PermissionDenied("cannot log in to " + where + ": " + m +
                                      "; check the user and password in destination.catalog "
                                      "(e.g. postgresql://user:${CATALOG_PASSWORD}@host/db)");
    }
    if (Contains(m, "does not exist")) {
      return Status::NotFound("cannot connect to " + where + ": " + m +
                              "; create the database (CREATE DATABASE ...) or fix the database "
                              "and user in destination.catalog");
    }
    return Status::Unavailable("cannot connect to " + where + ": " + m +
                               "; check host and port in destination.catalog and that the server "
                               "runs and accepts connections from here");
  }

  Status ErrorOf(PGresult* r) const {
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    std::string code = state ? state : "";
    std::string m = Clean(primary ? primary : Trim(PQerrorMessage(conn_)));
    m = Describe() + ": PostgreSQL: " + m + (code.empty() ? "" : " [SQLSTATE " + code + "]");
    // 42710: two sessions creating the same table at once collide on its row type.
    if (code == "23505" || code == "42P07" || code == "42710") return Status::AlreadyExists(m);
    if (code == "42501") return Status::PermissionDenied(m);
    if (code == "42P01") return Status::NotFound(m);
    // Serialization failure, deadlock, lock timeout, shutdown, connection class: the statement
    // was rolled back; it may run again.
    if (code == "40001" || code == "40P01" || code == "55P03" || code.rfind("08", 0) == 0 ||
        code.rfind("57P", 0) == 0) {
      return Status::Unavailable(m);
    }
    return Status::IOError(m);
  }

  std::string Clean(std::string m) const {
    if (password_.size() >= 3) {
      for (size_t at; (at = m.find(password_)) != std::string::npos;) {
        m.replace(at, password_.size(), "***");
      }
    }
    return config::Redact(m);
  }

  PGconn* conn_ = nullptr;
  std::string dsn_;
  std::string password_;  // only to scrub messages
  std::string uri_;       // without the password
};

}  // namespace

Result<std::unique_ptr<SqlConnection>> OpenPostgresCatalogConnection(const std::string& dsn) {
  return PostgresCatalogConnection::Open(dsn);
}

}  // namespace ferry::lake
