#include <mutex>

#include "ferry/base/fs.h"
#include "ferry/lake/catalog.h"
#include "ferry/sqlite/sqlite.h"

namespace ferry::lake {
namespace {

constexpr const char* kSchemaSql = R"(
CREATE TABLE IF NOT EXISTS iceberg_tables (
  catalog_name VARCHAR(255) NOT NULL,
  table_namespace VARCHAR(255) NOT NULL,
  table_name VARCHAR(255) NOT NULL,
  metadata_location VARCHAR(1000),
  previous_metadata_location VARCHAR(1000),
  iceberg_type VARCHAR(5),
  PRIMARY KEY (catalog_name, table_namespace, table_name));
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
  catalog_name VARCHAR(255) NOT NULL,
  namespace VARCHAR(255) NOT NULL,
  property_key VARCHAR(255),
  property_value VARCHAR(1000),
  PRIMARY KEY (catalog_name, namespace, property_key));
)";

class SqliteCatalog final : public Catalog {
 public:
  SqliteCatalog(std::unique_ptr<sqlite::Database> db, std::string name, std::string path)
      : db_(std::move(db)), name_(std::move(name)), path_(std::move(path)) {}

  Status CreateNamespace(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(auto st,
                           db_->Prepare("INSERT OR IGNORE INTO iceberg_namespace_properties"
                                        " (catalog_name, namespace, property_key, property_value) "
                                        "VALUES (?, ?, 'exists', 'true')"));
    st.Bind(1, name_).Bind(2, ns);
    return st.Exec().WithContext("creating namespace '" + ns + "' in " + Describe());
  }

  Result<std::vector<TableIdent>> ListTables(const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(
        auto st,
        db_->Prepare(
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?"
            " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL) ORDER BY table_name"));
    st.Bind(1, name_).Bind(2, ns);
    std::vector<TableIdent> out;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      out.push_back(TableIdent{ns, std::string(st.Text(0))});
    }
    return out;
  }

  Result<std::optional<std::string>> LoadMetadataLocation(const TableIdent& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(
        auto st,
        db_->Prepare("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND"
                     " table_namespace = ? AND table_name = ? AND (iceberg_type = 'TABLE' OR "
                     "iceberg_type IS NULL)"));
    st.Bind(1, name_).Bind(2, t.ns).Bind(3, t.name);
    auto row = st.Step();
    if (!row.ok()) return row.status().WithContext("loading table " + t.ToString());
    if (!*row) return std::optional<std::string>();
    return std::optional<std::string>(std::string(st.Text(0)));
  }

  Status CreateTable(const TableIdent& t, const std::string& metadata_location) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(
        auto st,
        db_->Prepare("INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name,"
                     " metadata_location, previous_metadata_location, iceberg_type) VALUES (?, ?, "
                     "?, ?, NULL, 'TABLE')"));
    st.Bind(1, name_).Bind(2, t.ns).Bind(3, t.name).Bind(4, metadata_location);
    Status s = st.Exec();
    if (s.code() == StatusCode::kAlreadyExists) {
      return Status::AlreadyExists("table " + t.ToString() + " already exists in " + Describe());
    }
    return s.WithContext("creating table " + t.ToString());
  }

  Status SwapMetadataLocation(const TableIdent& t, const std::string& expected,
                              const std::string& next) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(
        auto st,
        db_->Prepare(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ?"
            " WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?"
            " AND metadata_location = ? AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"));
    st.Bind(1, next)
        .Bind(2, expected)
        .Bind(3, name_)
        .Bind(4, t.ns)
        .Bind(5, t.name)
        .Bind(6, expected);
    Status s = st.Exec();
    if (!s.ok()) {
      // SQLite applies the update atomically or not at all, and reports a failure before
      // commit; a busy database means nothing was written.
      if (s.code() == StatusCode::kUnavailable) return Status::CommitFailed(s.message());
      return Status::CommitStateUnknown("committing " + t.ToString() + ": " + s.message());
    }
    if (db_->Changes() != 1) {
      return Status::CommitFailed("table " + t.ToString() +
                                  " was changed by another writer since it was read");
    }
    return Status::OK();
  }

  std::string Describe() const override { return "SQL catalog sqlite:" + path_; }

 private:
  std::mutex mu_;
  std::unique_ptr<sqlite::Database> db_;  // guarded by mu_
  std::string name_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<Catalog>> OpenSqlCatalog(const std::string& uri,
                                                const std::string& catalog_name) {
  if (uri.rfind("sqlite:", 0) != 0) {
    return Status::InvalidArgument("catalog '" + uri +
                                   "' is not supported; use sqlite:<path> for the embedded SQL "
                                   "catalog");
  }
  std::string path = uri.substr(7);
  if (path.rfind("//", 0) == 0) path = path.substr(2);
  if (path.empty()) return Status::InvalidArgument("catalog 'sqlite:' needs a file path");
  FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(path)));
  FERRY_ASSIGN_OR_RETURN(auto db,
                         sqlite::Database::Open(path, sqlite::Database::Mode::kReadWriteCreate));
  FERRY_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  FERRY_RETURN_IF_ERROR(db->Exec(kSchemaSql).WithContext("creating catalog tables in " + path));
  return std::unique_ptr<Catalog>(new SqliteCatalog(std::move(db), catalog_name, path));
}

}  // namespace ferry::lake
