// Internal to lake: the small statement interface the SQL catalog runs on, so that the catalog's
// logic (schema, compare-and-swap, resolving failures) is written once for every database that
// holds a catalog: SQLite (embedded) and PostgreSQL.
//
// Statements are written once, with numbered parameters $1, $2, ... (each connection translates
// them to its own form); values are always bound, never spliced into the SQL text. Every value
// travels and returns as text (NULL as nullopt).
//
// Error contract of Execute (the catalog decides what to retry from these alone):
//   kUnavailable         the statement was not executed (no connection, the connection was lost
//                        before the statement was sent, the database is locked or the server
//                        aborted it for a conflict); Reconnect() and run it again.
//   kCommitStateUnknown  the statement was sent, but the connection failed before its outcome
//                        came back: a write may or may not have been applied.
//   kAlreadyExists       a primary-key or unique violation (or the object exists); not applied.
//   any other error      the database refused the statement; nothing was applied.
// Thread-safety: none; the catalog serializes calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/catalog.h"

namespace ferry::lake {

using SqlValue = std::optional<std::string>;
using SqlParams = std::vector<SqlValue>;

struct SqlRows {
  std::vector<std::vector<SqlValue>> rows;
  int64_t changed = 0;  // rows inserted/updated/deleted by the statement
};

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  virtual Result<SqlRows> Execute(const std::string& sql, const SqlParams& params) = 0;
  // Drops the connection (if any) and opens a new one. kUnavailable when the database cannot be
  // reached; OK and nothing done for embedded databases.
  virtual Status Reconnect() = 0;
  // "sqlite:/w/catalog.db", "postgresql://ferry@db:5432/lake": never a password.
  virtual std::string Describe() const = 0;
};

// `path` is created when missing.
Result<std::unique_ptr<SqlConnection>> OpenSqliteCatalogConnection(const std::string& path);
// `dsn`: a postgresql:// (or postgres://) URI or a key=value libpq connection string.
Result<std::unique_ptr<SqlConnection>> OpenPostgresCatalogConnection(const std::string& dsn);

// The SQL catalog over any connection: creates the catalog tables when they are missing. `io`
// reads and writes the tables' metadata files.
Result<std::unique_ptr<Catalog>> NewSqlCatalog(std::unique_ptr<SqlConnection> connection,
                                               const std::string& catalog_name,
                                               std::shared_ptr<FileIO> io);

}  // namespace ferry::lake
