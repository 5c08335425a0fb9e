// Iceberg catalogs: the one place where a table's current metadata file is recorded, and the
// compare-and-swap that makes every commit atomic.
//
// The SQL catalog uses the schema shared by Java (JdbcCatalog), Python (SqlCatalog), Rust and C++
// Iceberg: tables iceberg_tables and iceberg_namespace_properties, so that any of them can open
// a warehouse ferry wrote. Embedded default: a SQLite file ("sqlite:/path/catalog.db"); or a
// PostgreSQL database ("postgresql://user:pass@host:port/db", "postgres://...", or
// "postgresql:<key=value libpq string>"). Both run the same catalog logic (sql_connection.h).
//
// Error contract of SwapMetadataLocation:
//   OK                  the table now points at the new metadata file.
//   kCommitFailed       another writer committed first; nothing changed; refresh and retry.
//   kCommitStateUnknown the outcome is not known (the connection failed during the update);
//                       the caller must re-read the table (and its marker) before anything else,
//                       and must not delete the new metadata file.
// Thread-safety: a Catalog may be shared; calls are serialized internally.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"

namespace ferry::lake {

struct TableIdent {
  std::string ns;
  std::string name;
  std::string ToString() const { return ns + "." + name; }
};

class Catalog {
 public:
  virtual ~Catalog() = default;
  virtual Status CreateNamespace(const std::string& ns) = 0;  // no-op if it exists
  virtual Result<std::vector<TableIdent>> ListTables(const std::string& ns) = 0;
  // nullopt when the table does not exist.
  virtual Result<std::optional<std::string>> LoadMetadataLocation(const TableIdent& t) = 0;
  // kAlreadyExists when another writer created it first.
  virtual Status CreateTable(const TableIdent& t, const std::string& metadata_location) = 0;
  virtual Status SwapMetadataLocation(const TableIdent& t, const std::string& expected,
                                      const std::string& next) = 0;
  virtual std::string Describe() const = 0;
};

// uri: "sqlite:<path>" (created when missing) or a PostgreSQL URI / "postgresql:<dsn>"; the
// catalog tables are created when missing. catalog_name: the catalog_name column's value.
// Errors never contain the password: kInvalidArgument (unsupported or malformed URI),
// kUnavailable (server unreachable), kPermissionDenied (login refused, or no right to create or
// use the catalog tables), kNotFound (no such database).
Result<std::unique_ptr<Catalog>> OpenSqlCatalog(const std::string& uri,
                                                const std::string& catalog_name);

}  // namespace ferry::lake
