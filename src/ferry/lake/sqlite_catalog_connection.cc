// The SQL catalog's connection to an embedded SQLite file.
#include "ferry/base/fs.h"
#include "ferry/clients/sqlite/sqlite.h"
#include "ferry/lake/sql_connection.h"

namespace ferry::lake {
namespace {

// "$1" -> "?1": SQLite's numbered parameters.
std::string ToSqliteParameters(const std::string& sql) {
  std::string out = sql;
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '$' && out[i + 1] >= '0' && out[i + 1] <= '9') out[i] = '?';
  }
  return out;
}

class SqliteCatalogConnection final : public SqlConnection {
 public:
  explicit SqliteCatalogConnection(std::unique_ptr<sqlite::Database> db) : db_(std::move(db)) {}

  Result<SqlRows> Execute(const std::string& sql, const SqlParams& params) override {
    FERRY_ASSIGN_OR_RETURN(auto st, db_->Prepare(ToSqliteParameters(sql)));
    for (size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i + 1);
      if (params[i]) {
        st.Bind(index, std::string_view(*params[i]));
      } else {
        st.BindNull(index);
      }
    }
    const bool writes = sqlite3_stmt_readonly(st.raw()) == 0;
    SqlRows out;
    for (;;) {
      auto row = st.Step();
      if (!row.ok()) {
        const Status& s = row.status();
        // A busy database or a constraint means nothing was written. Any other failure of a
        // write (an I/O error while committing) may have left it applied.
        if (writes && s.code() != StatusCode::kUnavailable &&
            s.code() != StatusCode::kAlreadyExists && s.code() != StatusCode::kPermissionDenied) {
          return Status::CommitStateUnknown(s.message());
        }
        return s;
      }
      if (!*row) break;
      std::vector<SqlValue> values;
      for (int c = 0; c < st.ColumnCount(); ++c) {
        if (st.IsNull(c)) {
          values.emplace_back(std::nullopt);
        } else {
          values.emplace_back(std::string(st.Text(c)));
        }
      }
      out.rows.push_back(std::move(values));
    }
    out.changed = writes ? db_->Changes() : 0;
    return out;
  }

  Status Reconnect() override { return Status::OK(); }  // nothing to reconnect

  std::string Describe() const override { return "sqlite:" + db_->path(); }

 private:
  std::unique_ptr<sqlite::Database> db_;
};

}  // namespace

Result<std::unique_ptr<SqlConnection>> OpenSqliteCatalogConnection(const std::string& path) {
  FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(path)));
  FERRY_ASSIGN_OR_RETURN(auto db,
                         sqlite::Database::Open(path, sqlite::Database::Mode::kReadWriteCreate));
  FERRY_RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  return std::unique_ptr<SqlConnection>(new SqliteCatalogConnection(std::move(db)));
}

}  // namespace ferry::lake
