// The SQL catalog, written once over SqlConnection (sql_connection.h): the same tables, statements
// and failure handling whether the catalog lives in SQLite or PostgreSQL.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/base/uuid.h"
#include "ferry/config/config.h"
#include "ferry/lake/catalog.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/sql_connection.h"
#include "ferry/lake/table_commit.h"

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

// "<location>/metadata/00012-<uuid>.metadata.json"
std::string NewMetadataUri(const std::string& table_location, int64_t version) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%05lld", static_cast<long long>(version));
  return table_location + "/metadata/" + buf + "-" + NewUuid() + ".metadata.json";
}

// The metadata files a table's metadata refers to: its metadata-log.
std::vector<std::string> LoggedMetadataFiles(const TableMetadata& m) {
  std::vector<std::string> out;
  const Json& log = m.doc()["metadata-log"];
  if (!log.is_array()) return out;
  for (const auto& e : log) {
    if (e.contains("metadata-file") && e["metadata-file"].is_string()) {
      out.push_back(e["metadata-file"].get<std::string>());
    }
  }
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A commit whose requirements still hold on a table another writer changed meanwhile is applied
// again on the new metadata, this many times at most.
constexpr int kCommitAttempts = 8;

class SqlCatalog final : public Catalog {
 public:
  SqlCatalog(std::unique_ptr<SqlConnection> conn, std::string name, std::shared_ptr<FileIO> io)
      : conn_(std::move(conn)), name_(std::move(name)), io_(std::move(io)) {}

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

  // ---- namespaces ----

  Status CreateNamespace(const std::string& ns,
                         const std::map<std::string, std::string>& properties) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_RETURN_IF_ERROR(CheckName(ns, "namespace"));
    FERRY_ASSIGN_OR_RETURN(bool exists, NamespaceExistsLocked(ns));
    if (exists) return Status::OK();
    // Idempotent, so a failed connection simply runs them again. Java's JdbcCatalog marks a
    // namespace by its 'exists' property.
    std::map<std::string, std::string> props = properties;
    props.emplace("exists", "true");
    for (const auto& [k, v] : props) {
      FERRY_RETURN_IF_ERROR(RunRepeatable("INSERT INTO iceberg_namespace_properties"
                                          " (catalog_name, namespace, property_key, property_value)"
                                          " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                                          {name_, ns, k, v}, "creating namespace '" + ns + "'")
                                .status());
    }
    return Status::OK();
  }

  Result<std::vector<std::string>> ListNamespaces(const std::string& parent) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(
        SqlRows r, RunRepeatable("SELECT DISTINCT namespace FROM iceberg_namespace_properties"
                                 " WHERE catalog_name = $1 UNION SELECT DISTINCT table_namespace"
                                 " FROM iceberg_tables WHERE catalog_name = $1",
                                 {name_}, "listing namespaces"));
    std::set<std::string> out;
    const std::string prefix = parent.empty() ? "" : parent + ".";
    for (auto& row : r.rows) {
      const std::string ns = row[0].value_or("");
      if (ns.empty() || ns.rfind(prefix, 0) != 0 || ns.size() == prefix.size()) continue;
      // One level below the parent: "a.b.c" under "a" is listed as "a.b".
      const size_t dot = ns.find('.', prefix.size());
      out.insert(dot == std::string::npos ? ns : ns.substr(0, dot));
    }
    return std::vector<std::string>(out.begin(), out.end());
  }

  Result<std::optional<std::map<std::string, std::string>>> LoadNamespace(
      const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(bool exists, NamespaceExistsLocked(ns));
    if (!exists) return std::optional<std::map<std::string, std::string>>();
    FERRY_ASSIGN_OR_RETURN(SqlRows r,
                           RunRepeatable("SELECT property_key, property_value FROM"
                                         " iceberg_namespace_properties WHERE catalog_name = $1 AND"
                                         " namespace = $2",
                                         {name_, ns}, "loading namespace '" + ns + "'"));
    std::map<std::string, std::string> props;
    for (auto& row : r.rows) {
      if (row[0] && *row[0] != "exists") props[*row[0]] = row[1].value_or("");
    }
    return std::optional<std::map<std::string, std::string>>(std::move(props));
  }

  Status UpdateNamespace(const std::string& ns, const std::map<std::string, std::string>& set,
                         const std::vector<std::string>& remove) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(bool exists, NamespaceExistsLocked(ns));
    if (!exists) return Status::NotFound("namespace '" + ns + "' does not exist in " + Describe());
    const std::string what = "updating the properties of namespace '" + ns + "'";
    for (const auto& k : remove) {
      if (k == "exists") continue;
      FERRY_RETURN_IF_ERROR(RunRepeatable("DELETE FROM iceberg_namespace_properties WHERE"
                                          " catalog_name = $1 AND namespace = $2 AND"
                                          " property_key = $3",
                                          {name_, ns, k}, what)
                                .status());
    }
    // Idempotent as a pair: a failed connection runs both again.
    for (const auto& [k, v] : set) {
      FERRY_RETURN_IF_ERROR(RunRepeatable("DELETE FROM iceberg_namespace_properties WHERE"
                                          " catalog_name = $1 AND namespace = $2 AND"
                                          " property_key = $3",
                                          {name_, ns, k}, what)
                                .status());
      FERRY_RETURN_IF_ERROR(RunRepeatable("INSERT INTO iceberg_namespace_properties"
                                          " (catalog_name, namespace, property_key, property_value)"
                                          " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                                          {name_, ns, k, v}, what)
                                .status());
    }
    return Status::OK();
  }

  Status DropNamespace(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(bool exists, NamespaceExistsLocked(ns));
    if (!exists) return Status::NotFound("namespace '" + ns + "' does not exist in " + Describe());
    FERRY_ASSIGN_OR_RETURN(
        SqlRows t, RunRepeatable("SELECT table_name FROM iceberg_tables WHERE catalog_name = $1"
                                 " AND table_namespace = $2",
                                 {name_, ns}, "dropping namespace '" + ns + "'"));
    if (!t.rows.empty()) {
      return Status::AlreadyExists("namespace '" + ns + "' is not empty: it holds " +
                                   std::to_string(t.rows.size()) + " table(s); drop them first");
    }
    return RunRepeatable(
               "DELETE FROM iceberg_namespace_properties WHERE catalog_name = $1 AND"
               " namespace = $2",
               {name_, ns}, "dropping namespace '" + ns + "'")
        .status();
  }

  // ---- tables ----

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

  Result<std::optional<LoadedTable>> LoadTable(const TableIdent& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(auto loc, LoadLocationLocked(t));
    if (!loc) return std::optional<LoadedTable>();
    FERRY_ASSIGN_OR_RETURN(LoadedTable table, ReadMetadataLocked(t, *loc));
    return std::optional<LoadedTable>(std::move(table));
  }

  Result<LoadedTable> CreateTable(const TableIdent& t, const TableMetadata& initial) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_RETURN_IF_ERROR(CheckName(t.ns, "namespace"));
    FERRY_RETURN_IF_ERROR(CheckName(t.name, "table"));
    TableMetadata m = initial;
    m.StartUpdate("", NowMs());
    const std::string uri = NewMetadataUri(m.location(), 0);
    FERRY_RETURN_IF_ERROR(io_->WriteNew(uri, m.ToJsonText()));
    Status s = InsertTableLocked(t, uri);
    if (!s.ok()) {
      (void)io_->Delete(uri);  // never registered
      return s;
    }
    LoadedTable out{uri, std::move(m), {}};
    Remember(t, out);
    return out;
  }

  Result<LoadedTable> CommitTable(const TableCommit& commit) override {
    std::lock_guard<std::mutex> lock(mu_);
    const TableIdent& t = commit.ident;
    const std::string what = "committing to table " + t.ToString() + " in " + Describe();
    for (int attempt = 1;; ++attempt) {
      FERRY_ASSIGN_OR_RETURN(auto loc, LoadLocationLocked(t));
      if (!loc) {
        return Status::NotFound("table " + t.ToString() + " does not exist in " + Describe());
      }
      FERRY_ASSIGN_OR_RETURN(LoadedTable current, ReadMetadataLocked(t, *loc));
      FERRY_ASSIGN_OR_RETURN(auto next, BuildNext(commit, current));
      const std::string& uri = next.first;
      Status s = SwapLocked(t, current.metadata_location, uri);
      if (s.ok()) {
        LoadedTable out{uri, std::move(next.second), {}};
        PruneMetadataFiles(current, out.metadata);
        Remember(t, out);
        return out;
      }
      // Outcome lost: the file may become current at any moment; it is never deleted.
      if (s.code() == StatusCode::kCommitStateUnknown) return s.WithContext(what);
      (void)io_->Delete(uri);
      // Changed by another writer after it was read: the requirements decide on the new state.
      if (s.code() == StatusCode::kCommitFailed && attempt < kCommitAttempts) continue;
      return s.WithContext(what);
    }
  }

  Status CommitTables(const std::vector<TableCommit>& commits) override {
    std::lock_guard<std::mutex> lock(mu_);
    // Every table's next metadata file first, then one transaction swapping every location.
    std::vector<std::pair<std::string, std::string>> swaps;  // expected, next
    std::vector<LoadedTable> nexts;
    auto discard = [&] {
      for (const auto& [expected, uri] : swaps) (void)io_->Delete(uri);
    };
    for (const auto& c : commits) {
      auto loc = LoadLocationLocked(c.ident);
      Status s = loc.ok() ? Status::OK() : loc.status();
      if (s.ok() && !*loc) {
        s = Status::NotFound("table " + c.ident.ToString() + " does not exist in " + Describe());
      }
      Result<LoadedTable> current = s.ok() ? ReadMetadataLocked(c.ident, **loc) : s;
      auto next = current.ok() ? BuildNext(c, *current)
                               : Result<std::pair<std::string, TableMetadata>>(current.status());
      if (!next.ok()) {
        discard();
        return next.status().WithContext("committing to table " + c.ident.ToString());
      }
      swaps.emplace_back(current->metadata_location, next->first);
      nexts.push_back(LoadedTable{next->first, std::move(next->second), {}});
    }
    const std::string what = "committing " + std::to_string(commits.size()) +
                             " tables in one transaction in " + Describe();
    auto begun = conn_->Execute("BEGIN", {});
    if (!begun.ok()) {
      discard();
      return begun.status().WithContext(what);
    }
    for (size_t i = 0; i < commits.size(); ++i) {
      const TableIdent& t = commits[i].ident;
      auto r = conn_->Execute(
          SwapSql(), {swaps[i].second, swaps[i].first, name_, t.ns, t.name, swaps[i].first});
      if (!r.ok() || r->changed != 1) {
        (void)conn_->Execute("ROLLBACK", {});
        discard();
        if (!r.ok()) {
          if (r.status().code() == StatusCode::kCommitStateUnknown) {
            // The transaction was not committed: a lost connection rolls it back.
            return Status::Unavailable(r.status().message()).WithContext(what);
          }
          return r.status().WithContext(what);
        }
        return Status::CommitFailed("table " + t.ToString() +
                                    " was changed by another writer since it was read");
      }
    }
    FaultPoint("catalog.before_transaction_commit");
    auto committed = conn_->Execute("COMMIT", {});
    if (!committed.ok()) {
      if (committed.status().code() != StatusCode::kCommitStateUnknown) discard();
      return committed.status().WithContext(what);
    }
    for (size_t i = 0; i < commits.size(); ++i) Remember(commits[i].ident, nexts[i]);
    return Status::OK();
  }

  Status DropTable(const TableIdent& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(SqlRows r,
                           RunRepeatable("DELETE FROM iceberg_tables WHERE catalog_name = $1 AND"
                                         " table_namespace = $2 AND table_name = $3" +
                                             TypeFilter(),
                                         {name_, t.ns, t.name}, "dropping table " + t.ToString()));
    cache_.erase(t.ToString());
    if (r.changed == 0) {
      return Status::NotFound("table " + t.ToString() + " does not exist in " + Describe());
    }
    return Status::OK();
  }

  Status RenameTable(const TableIdent& from, const TableIdent& to) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_RETURN_IF_ERROR(CheckName(to.name, "table"));
    FERRY_ASSIGN_OR_RETURN(bool ns_exists, NamespaceExistsLocked(to.ns));
    if (!ns_exists) {
      return Status::NotFound("namespace '" + to.ns + "' does not exist in " + Describe());
    }
    FERRY_ASSIGN_OR_RETURN(auto source, LoadLocationLocked(from));
    if (!source) {
      return Status::NotFound("table " + from.ToString() + " does not exist in " + Describe());
    }
    FERRY_ASSIGN_OR_RETURN(auto target, LoadLocationLocked(to));
    if (target) return Status::AlreadyExists("table " + to.ToString() + " already exists");
    auto r = conn_->Execute(
        "UPDATE iceberg_tables SET table_namespace = $1, table_name = $2 WHERE catalog_name = $3"
        " AND table_namespace = $4 AND table_name = $5" +
            TypeFilter(),
        {to.ns, to.name, name_, from.ns, from.name});
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kAlreadyExists) {
        return Status::AlreadyExists("table " + to.ToString() + " already exists");
      }
      return r.status().WithContext("renaming table " + from.ToString() + " to " + to.ToString());
    }
    cache_.erase(from.ToString());
    if (r->changed == 0) {
      return Status::NotFound("table " + from.ToString() + " does not exist in " + Describe());
    }
    return Status::OK();
  }

  std::string Describe() const override { return "SQL catalog " + conn_->Describe(); }

 private:
  std::string TypeFilter() const {
    return has_type_column_ ? " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)" : "";
  }

  std::string SwapSql() const {
    return "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2"
           " WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5"
           " AND metadata_location = $6" +
           TypeFilter();
  }

  static Status CheckName(const std::string& name, const char* what) {
    if (name.empty()) return Status::InvalidArgument(std::string("a ") + what + " name is empty");
    if (name.size() > 255) {
      return Status::InvalidArgument(std::string("the ") + what + " name '" + name.substr(0, 40) +
                                     "...' is longer than 255 bytes");
    }
    return Status::OK();
  }

  static void Pause(int64_t& pause_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, kMaxPauseMs);
  }

  Result<bool> NamespaceExistsLocked(const std::string& ns) {
    FERRY_ASSIGN_OR_RETURN(
        SqlRows r, RunRepeatable("SELECT 1 FROM iceberg_namespace_properties WHERE"
                                 " catalog_name = $1 AND namespace = $2 UNION ALL SELECT 1 FROM"
                                 " iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2",
                                 {name_, ns}, "looking up namespace '" + ns + "'"));
    return !r.rows.empty();
  }

  Result<std::optional<std::string>> LoadLocationLocked(const TableIdent& t) {
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

  // The metadata at `location`, from the cache when it is the file read last for the table.
  Result<LoadedTable> ReadMetadataLocked(const TableIdent& t, const std::string& location) {
    auto it = cache_.find(t.ToString());
    if (it != cache_.end() && it->second.metadata_location == location) return it->second;
    auto text = io_->Read(location);
    if (!text.ok()) {
      return text.status().WithContext("reading metadata of table " + t.ToString() +
                                       " (the catalog points at a file that cannot be read)");
    }
    FERRY_ASSIGN_OR_RETURN(TableMetadata m, TableMetadata::Parse(*text, location));
    LoadedTable out{location, std::move(m), {}};
    Remember(t, out);
    return out;
  }

  void Remember(const TableIdent& t, const LoadedTable& table) { cache_[t.ToString()] = table; }

  // Checks the commit's requirements on `current`, applies its updates and writes the next
  // metadata file: its location and contents.
  Result<std::pair<std::string, TableMetadata>> BuildNext(const TableCommit& commit,
                                                          const LoadedTable& current) {
    FERRY_RETURN_IF_ERROR(CheckRequirements(commit.requirements, &current.metadata));
    TableMetadata next = current.metadata;
    next.StartUpdate(current.metadata_location, NowMs());
    FERRY_RETURN_IF_ERROR(ApplyUpdates(next, commit.updates));
    const int64_t version = MetadataVersion(current.metadata_location) + 1;
    std::string uri = NewMetadataUri(next.location(), version < 1 ? 1 : version);
    FERRY_RETURN_IF_ERROR(io_->WriteNew(uri, next.ToJsonText()));
    FaultPoint("catalog.after_metadata_write");
    return std::make_pair(std::move(uri), std::move(next));
  }

  // The compare-and-swap of the table's metadata location.
  Status SwapLocked(const TableIdent& t, const std::string& expected, const std::string& next) {
    int64_t pause_ms = kFirstPauseMs;
    for (int attempt = 1;; ++attempt) {
      auto r = conn_->Execute(SwapSql(), {next, expected, name_, t.ns, t.name, expected});
      if (r.ok()) {
        if (r->changed == 1) return Status::OK();
        return Status::CommitFailed("table " + t.ToString() +
                                    " was changed by another writer since it was read");
      }
      const Status& s = r.status();
      // Sent, outcome lost: only the caller can decide, from the table and its marker.
      if (s.code() == StatusCode::kCommitStateUnknown) return s;
      // Surely not applied: run the same compare-and-swap again once connected.
      if (s.code() == StatusCode::kUnavailable && attempt < kConnectionAttempts) {
        FERRY_LOG(kDebug) << Describe() << ": " << s.message() << "; trying the commit again";
        Pause(pause_ms);
        (void)conn_->Reconnect();
        continue;
      }
      return s;
    }
  }

  // Deletes the files of `before` (the metadata-log and file before the commit) that `after` no
  // longer lists, if the table's properties ask for it (write.metadata.delete-after-commit).
  void PruneMetadataFiles(const LoadedTable& before, const TableMetadata& after) {
    auto enabled = after.Property("write.metadata.delete-after-commit.enabled");
    if (!enabled || (*enabled != "true" && *enabled != "TRUE" && *enabled != "True")) return;
    std::vector<std::string> old = LoggedMetadataFiles(before.metadata);
    old.push_back(before.metadata_location);
    const std::vector<std::string> kept = LoggedMetadataFiles(after);
    for (const auto& uri : old) {
      if (Contains(kept, uri)) continue;
      Status s = io_->Delete(uri);
      if (!s.ok()) {
        // Not an error for the commit: the file is only no longer referenced.
        FERRY_LOG(kDebug) << "could not delete old metadata file " << uri << ": " << s.message();
      }
    }
  }

  Status InsertTableLocked(const TableIdent& t, const std::string& metadata_location) {
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
      auto loc = LoadLocationLocked(t);
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
  std::shared_ptr<FileIO> io_;
  bool has_type_column_ = true;
  // The metadata read or written last, per table ("ns.name"); guarded by mu_.
  std::map<std::string, LoadedTable> cache_;
};

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

Result<std::unique_ptr<Catalog>> NewSqlCatalog(std::unique_ptr<SqlConnection> connection,
                                               const std::string& catalog_name,
                                               std::shared_ptr<FileIO> io) {
  auto catalog = std::make_unique<SqlCatalog>(std::move(connection), catalog_name, std::move(io));
  FERRY_RETURN_IF_ERROR(catalog->Init());
  return std::unique_ptr<Catalog>(std::move(catalog));
}

Result<std::unique_ptr<Catalog>> OpenSqlCatalog(const std::string& uri,
                                                const std::string& catalog_name,
                                                std::shared_ptr<FileIO> io) {
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
  } else if (StartsWith(uri, "http://") || StartsWith(uri, "https://")) {
    return Status::InvalidArgument("catalog '" + config::Redact(uri) +
                                   "' looks like a REST catalog's URL; write it as rest+" +
                                   config::Redact(uri) + " (the base URL, before /v1)");
  } else {
    return Status::InvalidArgument(
        "catalog '" + config::Redact(uri) +
        "' is not supported; use sqlite:<path> for the embedded SQL catalog, "
        "postgresql://user:password@host:port/database for a PostgreSQL one or "
        "rest+https://host[:port][/path] for an Iceberg REST catalog");
  }
  return NewSqlCatalog(std::move(conn), catalog_name, std::move(io));
}

}  // namespace ferry::lake
