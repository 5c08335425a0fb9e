// The SQL catalog's connection to PostgreSQL, on the shared PostgreSQL client: the catalog's error
// contract (sql_connection.h) from the client's statuses and the server's SQLSTATE.
//
// Secrets: the connection string is never echoed. Describe() is the URI the client rebuilds from
// the parsed parts without the password; the client scrubs every message of the password.
#include "ferry/clients/postgres/pg_conn.h"
#include "ferry/lake/sql_connection.h"

namespace ferry::lake {
namespace {

constexpr std::string_view kSetting = "destination.catalog";

class PostgresCatalogConnection final : public SqlConnection {
 public:
  static Result<std::unique_ptr<SqlConnection>> Open(const std::string& dsn) {
    FERRY_ASSIGN_OR_RETURN(std::string uri, pg::PgConnection::DsnUri(dsn, kSetting));
    std::unique_ptr<PostgresCatalogConnection> c(new PostgresCatalogConnection(dsn, uri));
    FERRY_RETURN_IF_ERROR(c->Reconnect());
    return std::unique_ptr<SqlConnection>(std::move(c));
  }

  Result<SqlRows> Execute(const std::string& sql, const SqlParams& params) override {
    if (conn_ == nullptr || !conn_->connected()) {
      return Status::Unavailable("not connected to " + Describe());
    }
    auto r = conn_->Query(sql, params);
    // A statement commits when the server has processed the whole exchange: if the connection
    // broke at any point after sending, even after a result arrived, the outcome is unknown.
    if (!conn_->connected()) {
      return Status::CommitStateUnknown(
          "the connection to " + Describe() +
          " was lost while a statement ran, so it may or may not have been applied" +
          (r.ok() ? std::string() : ": " + r.status().message()));
    }
    if (!r.ok()) return Refused(r.status());
    SqlRows out;
    out.rows.reserve(static_cast<size_t>(r->rows()));
    for (int i = 0; i < r->rows(); ++i) {
      std::vector<SqlValue> row;
      row.reserve(static_cast<size_t>(r->cols()));
      for (int j = 0; j < r->cols(); ++j) {
        if (r->IsNull(i, j)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(r->Text(i, j));
        }
      }
      out.rows.push_back(std::move(row));
    }
    out.changed = r->AffectedRows();
    return out;
  }

  Status Reconnect() override {
    conn_.reset();
    FERRY_ASSIGN_OR_RETURN(conn_,
                           pg::PgConnection::Connect(dsn_, {.setting = kSetting,
                                                            .application = "ferry-catalog",
                                                            .role = "the catalog database"}));
    return Status::OK();
  }

  std::string Describe() const override { return uri_; }

 private:
  PostgresCatalogConnection(std::string dsn, std::string uri)
      : dsn_(std::move(dsn)), uri_(std::move(uri)) {}

  // The server refused the statement (nothing applied): the catalog's codes by SQLSTATE.
  Status Refused(const Status& s) const {
    const std::string& code = conn_->last_sqlstate();
    std::string m = Describe() + ": " + s.message();
    // 42710: two sessions creating the same table at once collide on its row type.
    if (code == "23505" || code == "42P07" || code == "42710") return Status::AlreadyExists(m);
    // Serialization failure, deadlock, lock timeout, shutdown, connection class: the statement
    // was rolled back; it may run again.
    if (code == "40001" || code == "40P01" || code == "55P03" || code.rfind("08", 0) == 0 ||
        code.rfind("57P", 0) == 0) {
      return Status::Unavailable(m);
    }
    if (s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kNotFound) {
      return Status(s.code(), m);
    }
    return Status::IOError(m);
  }

  std::string dsn_;
  std::string uri_;  // without the password
  std::unique_ptr<pg::PgConnection> conn_;
};

}  // namespace

Result<std::unique_ptr<SqlConnection>> OpenPostgresCatalogConnection(const std::string& dsn) {
  return PostgresCatalogConnection::Open(dsn);
}

}  // namespace ferry::lake
