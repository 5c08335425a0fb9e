// The SQL catalog, written once over SqlConnection (sql_connection.h): the same tables, statements
// and failure handling whether the catalog lives in SQLite or PostgreSQL.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "ferry/base/log.h"
#include "ferry/config/config.h"
#include "ferry/lake/catalog.h"
#include "ferry/lake/sql_connection.h"

namespace ferry::lake {
namespace {

// The tables of Java's JdbcCatalog (schema V1, with iceberg_type) and pyiceberg's SqlCatalog.
constexpr const char* kCreateTables =
    "CREATE TABLE IF NOT EXISTS iceberg_tables ("
    " catalog_name VARCHAR(255) NOT NULL,"
    " table_namespace VARCHAR(255) NOT NULL,"
    " table_name VARCHAR(255) NOT NULL,"
    " metadata_location VARCHAR(1000),"
    " previous_metadata_location VARCHAR(1000),"
    " iceberg_type VARCHAR(5),"
    " PRIMARY KEY (catalog_name, table_namespace, table_name))";
constexpr const char* kCreateNamespaces =
    "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties ("
    " catalog_name VARCHAR(255) NOT NULL,"
    " namespace VARCHAR(255) NOT NULL,"
    " property_key VARCHAR(255),"
    " property_value VARCHAR(1000),"
    " PRIMARY KEY (catalog_name, namespace, property_key))";

// Statements that fail because the connection did are run again after a reconnect, this many
// times at most, with a doubling pause: a catalog server restart of a few seconds is ridden out.
constexpr int kConnectionAttempts = 6;
constexpr int64_t kFirstPauseMs = 100;
constexpr int64_t kMaxPauseMs = 2000;

bool IsConnectionFailure(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kCommitStateUnknown;
}

class SqlCatalog final : public Catalog {
 public:
  SqlCatalog(std::unique_ptr<SqlConnection> conn, std::string name)
      : conn_(std::move(conn)), name_(std::move(name)) {}

  // Creates the catalog tables that are missing. A table that exists is only read, so a user
  // without the right to create tables can use tables made ahead by an administrator.
  Status Init() {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_RETURN_IF_ERROR(EnsureTable("iceberg_tables", kCreateTables));
    FERRY_RETURN_IF_ERROR(EnsureTable("iceberg_namespace_properties", kCreateNamespaces));
    // pyiceberg's SqlCatalog makes iceberg_tables without iceberg_type: then every row is a table.
    auto probe = RunRepeatable("SELECT iceberg_type FROM iceberg_tables WHERE 1 = 0", {}, "");
    if (!probe.ok() && IsConnectionFailure(probe.status())) {
      return probe.status().WithContext("opening " + Describe());
    }
    has_type_column_ = probe.ok();
    return Status::OK();
  }

  Status CreateNamespace(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    // Idempotent, so a failed connection simply runs it again.
    return RunRepeatable(
               "INSERT INTO iceberg_namespace_properties"
               " (catalog_name, namespace, property_key, property_value)"
               " VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING",
               {name_, ns}, "creating namespace '" + ns + "'")
        .status();
  }

  Result<std::vector<TableIdent>> ListTables(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(
        SqlRows r, RunRepeatable("SELECT table_name FROM iceberg_tables WHERE catalog_name = $1"
                                 " AND table_namespace = $2" +
                                     TypeFilter() + " ORDER BY table_name",
                                 {name_, ns}, "listing the tables of namespace '" + ns + "'"));
    std::vector<TableIdent> out;
    for (auto& row : r.rows) out.push_back(TableIdent{ns, row[0].value_or("")});
    return out;
  }

  Result<std::optional<std::string>> LoadMetadataLocation(const TableIdent& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    return LoadLocked(t);
  }

  Status CreateTable(const TableIdent& t, const std::string& metadata_location) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string what = "creating table " + t.ToString();
    const std::string sql =
        has_type_column_
            ? "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
              " metadata_location, previous_metadata_location, iceberg_type)"
              " VALUES ($1, $2, $3, $4, NULL, 'TABLE')"
            : "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
              " metadata_location, previous_metadata_location) VALUES ($1, $2, $3, $4, NULL)";
    Status last;
    int64_t pause_ms = kFirstPauseMs;
    for (int attempt = 1; attempt <= kConnectionAttempts; ++attempt) {
      auto r = conn_->Execute(sql, {name_, t.ns, t.name, metadata_location});
      if (r.ok()) return Status::OK();
      last = r.status();
      if (!IsConnectionFailure(last) && last.code() != StatusCode::kAlreadyExists) {
        return last.WithContext(what + " in " + Describe());
      }
      if (IsConnectionFailure(last)) {
        // The insert may have landed: the row says whose it is. Never insert blindly again.
        Pause(pause_ms);
        (void)conn_->Reconnect();
      }
      auto loc = LoadLocked(t);
      if (!loc.ok()) {
        if (IsConnectionFailure(loc.status()) && attempt < kConnectionAttempts) continue;
        return loc.status().WithContext(what);
      }
      if (loc->has_value()) {
        if (**loc == metadata_location) return Status::OK();  // ours landed
        return Status::AlreadyExists("table " + t.ToString() + " already exists in " + Describe());
      }
      if (last.code() == StatusCode::kAlreadyExists) {
        // A row of another type (a view) holds the name.
        return Status::AlreadyExists("the name " + t.ToString() + " is taken in " + Describe() +
                                     " by something that is not a table");
      }
    }
    return last.WithContext(what + " in " + Describe() + " after " +
                            std::to_string(kConnectionAttempts) + " attempts");
  }

  Status SwapMetadataLocation(const TableIdent& t, const std::string& expected,
                              const std::string& next) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string sql =
        "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2"
        " WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5"
        " AND metadata_location = $6" +
        TypeFilter();
    const std::string what = "committing to table " + t.ToString() + " in " + Describe();
    int64_t pause_ms = kFirstPauseMs;
    for (int attempt = 1;; ++attempt) {
      auto r = conn_->Execute(sql, {next, expected, name_, t.ns, t.name, expected});
      if (r.ok()) {
        if (r->changed == 1) return Status::OK();
        return Status::CommitFailed("table " + t.ToString() +
                                    " was changed by another writer since it was read");
      }
      const Status& s = r.status();
      // Sent, outcome lost: only the caller can decide, from the table and its marker.
      if (s.code() == StatusCode::kCommitStateUnknown) return s.WithContext(what);
      // Surely not applied: run the same compare-and-swap again once connected.
      if (s.code() == StatusCode::kUnavailable && attempt < kConnectionAttempts) {
        FERRY_LOG(kDebug) << what << ": " << s.message() << "; trying again";
        Pause(pause_ms);
        (void)conn_->Reconnect();
        continue;
      }
      return s.WithContext(what);
    }
  }

  std::string Describe() const override { return "SQL catalog " + conn_->Describe(); }

 private:
  std::string TypeFilter() const {
    return has_type_column_ ? " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)" : "";
  }

  static void Pause(int64_t& pause_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, kMaxPauseMs);
  }

  Result<std::optional<std::string>> LoadLocked(const TableIdent& t) {
    FERRY_ASSIGN_OR_RETURN(
        SqlRows r,
        RunRepeatable("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1"
                      " AND table_namespace = $2 AND table_name = $3" +
                          TypeFilter(),
                      {name_, t.ns, t.name}, "loading table " + t.ToString()));
    if (r.rows.empty()) return std::optional<std::string>();
    if (!r.rows[0][0]) {
      return Status::Corruption("table " + t.ToString() + " has no metadata_location in " +
                                Describe());
    }
    return std::optional<std::string>(*r.rows[0][0]);
  }

  // Runs a statement that may safely run twice (a read, an idempotent write), reconnecting after
  // a failed connection.
  Result<SqlRows> RunRepeatable(const std::string& sql, const SqlParams& params,
                                const std::string& what) {
    int64_t pause_ms = kFirstPauseMs;
    for (int attempt = 1;; ++attempt) {
      auto r = conn_->Execute(sql, params);
      if (r.ok() || !IsConnectionFailure(r.status()) || attempt >= kConnectionAttempts) {
        if (r.ok() || what.empty()) return r;
        return r.status().WithContext(what + " in " + Describe());
      }
      FERRY_LOG(kDebug) << Describe() << ": " << r.status().message() << "; reconnecting";
      Pause(pause_ms);
      (void)conn_->Reconnect();
    }
  }

  // Probing first: CREATE TABLE IF NOT EXISTS needs the right to create even when the table is
  // there (PostgreSQL checks the schema's CREATE privilege before looking).
  Status EnsureTable(const std::string& table, const char* create_sql) {
    auto probe = RunRepeatable("SELECT 1 FROM " + table + " WHERE 1 = 0", {}, "");
    if (probe.ok()) return Status::OK();
    if (probe.status().code() == StatusCode::kPermissionDenied) {
      return Status::PermissionDenied(
          "the catalog table " + table + " in " + Describe() +
          " cannot be read: " + probe.status().message() +
          "; grant the user SELECT, INSERT, UPDATE on iceberg_tables and "
          "iceberg_namespace_properties");
    }
    if (IsConnectionFailure(probe.status())) {
      return probe.status().WithContext("opening " + Describe());
    }
    auto created = RunRepeatable(create_sql, {}, "");
    if (created.ok() || created.status().code() == StatusCode::kAlreadyExists) {
      return Status::OK();  // kAlreadyExists: another process created it at the same moment
    }
    const Status& s = created.status();
    if (s.code() == StatusCode::kPermissionDenied) {
      return Status::PermissionDenied(
          "cannot create the catalog table " + table + " in " + Describe() + ": " + s.message() +
          "; let the user create tables (e.g. GRANT CREATE ON SCHEMA public TO <user>) or have "
          "an administrator create iceberg_tables and iceberg_namespace_properties as described "
          "in docs/configuration.md");
    }
    return s.WithContext("creating the catalog table " + table + " in " + Describe());
  }

  std::mutex mu_;
  std::unique_ptr<SqlConnection> conn_;  // guarded by mu_
  std::string name_;
  bool has_type_column_ = true;
};

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Result<std::unique_ptr<Catalog>> NewSqlCatalog(std::unique_ptr<SqlConnection> connection,
                                               const std::string& catalog_name) {
  auto catalog = std::make_unique<SqlCatalog>(std::move(connection), catalog_name);
  FERRY_RETURN_IF_ERROR(catalog->Init());
  return std::unique_ptr<Catalog>(std::move(catalog));
}

Result<std::unique_ptr<Catalog>> OpenSqlCatalog(const std::string& uri,
                                                const std::string& catalog_name) {
  std::unique_ptr<SqlConnection> conn;
  if (StartsWith(uri, "sqlite:")) {
    std::string path = uri.substr(7);
    if (StartsWith(path, "//")) path = path.substr(2);
    if (path.empty()) return Status::InvalidArgument("catalog 'sqlite:' needs a file path");
    FERRY_ASSIGN_OR_RETURN(conn, OpenSqliteCatalogConnection(path));
  } else if (StartsWith(uri, "postgresql://") || StartsWith(uri, "postgres://")) {
    FERRY_ASSIGN_OR_RETURN(conn, OpenPostgresCatalogConnection(uri));
  } else if (StartsWith(uri, "postgresql:") || StartsWith(uri, "postgres:")) {
    // "postgresql:host=db dbname=lake user=ferry": a key=value libpq connection string.
    std::string dsn = uri.substr(uri.find(':') + 1);
    if (dsn.find('=') == std::string::npos) {
      return Status::InvalidArgument(
          "catalog '" + config::Redact(uri) +
          "' is neither a postgresql:// URI nor a key=value connection string; write "
          "postgresql://user:${PASSWORD}@host:5432/database");
    }
    FERRY_ASSIGN_OR_RETURN(conn, OpenPostgresCatalogConnection(dsn));
  } else {
    return Status::InvalidArgument(
        "catalog '" + config::Redact(uri) +
        "' is not supported; use sqlite:<path> for the embedded SQL catalog or "
        "postgresql://user:password@host:port/database for a PostgreSQL one");
  }
  return NewSqlCatalog(std::move(conn), catalog_name);
}

}  // namespace ferry::lake
