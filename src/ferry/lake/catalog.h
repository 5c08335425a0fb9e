// Iceberg catalogs: the one place where a table's current metadata is recorded, and the commit
// that makes every change to a table atomic.
//
// Two kinds, one interface:
// - the SQL catalog (sql_catalog.cc): the schema shared by Java (JdbcCatalog), Python
//   (SqlCatalog), Rust and C++ Iceberg — tables iceberg_tables and iceberg_namespace_properties —
//   in a SQLite file ("sqlite:/path/catalog.db", the embedded default) or a PostgreSQL database
//   ("postgresql://user:pass@host:port/db", "postgres://...", or "postgresql:<key=value>"). It
//   reads and writes the metadata files itself (through the FileIO it is given) and commits by a
//   compare-and-swap of the metadata location.
// - the REST catalog (rest_catalog.h): the Iceberg REST protocol; the server writes the metadata.
//
// A commit is a TableCommit (table_commit.h): requirements the current metadata must meet and
// updates that make the next one. Error contract of CommitTable / CommitTables:
//   OK                  the table now has the updates applied.
//   kCommitFailed       a requirement does not hold (another writer committed first); nothing
//                       changed; reload, rebuild the commit and retry.
//   kCommitStateUnknown the outcome is not known (the connection failed after the request was
//                       sent); the caller must reload the table and decide from what it finds
//                       (its snapshot there, or its marker) before anything else.
//   kInvalidArgument    the commit is malformed or contradicts the table; a bug of the writer.
// Thread-safety: a Catalog may be shared; calls are serialized internally (SQL) or independent
// (REST).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/metadata.h"

namespace ferry::lake {

class FileIO;
struct TableCommit;

// A namespace is a list of levels; ferry's settings write it with dots ("sales.eu"), as the SQL
// catalog stores it.
struct TableIdent {
  std::string ns;
  std::string name;
  std::string ToString() const { return ns + "." + name; }
};

// A table as the catalog hands it out.
struct LoadedTable {
  std::string metadata_location;
  TableMetadata metadata;
  // Settings for the table's files that the catalog gives (REST: storage endpoint, vended
  // credentials and their expiry); empty for the SQL catalog.
  std::map<std::string, std::string> config;
};

class Catalog {
 public:
  virtual ~Catalog() = default;

  // --- namespaces ---
  // Creates it with `properties`; OK and nothing changed if it exists.
  virtual Status CreateNamespace(const std::string& ns,
                                 const std::map<std::string, std::string>& properties = {}) = 0;
  // The namespaces below `parent` ("" for the top level), one level deeper, as full names.
  virtual Result<std::vector<std::string>> ListNamespaces(const std::string& parent) = 0;
  // Its properties; nullopt when it does not exist.
  virtual Result<std::optional<std::map<std::string, std::string>>> LoadNamespace(
      const std::string& ns) = 0;
  // Sets and removes properties; kNotFound when the namespace does not exist.
  virtual Status UpdateNamespace(const std::string& ns,
                                 const std::map<std::string, std::string>& set,
                                 const std::vector<std::string>& remove) = 0;
  // kNotFound when it does not exist; kAlreadyExists (as "not empty") while it holds tables.
  virtual Status DropNamespace(const std::string& ns) = 0;

  // --- tables ---
  virtual Result<std::vector<TableIdent>> ListTables(const std::string& ns) = 0;
  // nullopt when the table does not exist.
  virtual Result<std::optional<LoadedTable>> LoadTable(const TableIdent& t) = 0;
  // Creates the table from `initial` (its schema, default spec and sort order, location and
  // properties; a REST server may assign its own uuid and ids). kAlreadyExists when the name is
  // taken; kNotFound when the namespace does not exist.
  virtual Result<LoadedTable> CreateTable(const TableIdent& t, const TableMetadata& initial) = 0;
  virtual Result<LoadedTable> CommitTable(const TableCommit& commit) = 0;
  // Several tables' commits, all or none. kNotSupported when the catalog cannot (a REST server
  // that does not offer the transactions endpoint).
  virtual Status CommitTables(const std::vector<TableCommit>& commits) = 0;
  // Removes the table from the catalog (its files stay); kNotFound when it does not exist.
  virtual Status DropTable(const TableIdent& t) = 0;
  // kNotFound when `from` does not exist, kAlreadyExists when `to` does.
  virtual Status RenameTable(const TableIdent& from, const TableIdent& to) = 0;

  // The storage settings the catalog gives for the table's files now (fresh vended credentials):
  // by default those of a new LoadTable. kNotFound when the table does not exist.
  virtual Result<std::map<std::string, std::string>> LoadStorageConfig(const TableIdent& t) {
    FERRY_ASSIGN_OR_RETURN(auto loaded, LoadTable(t));
    if (!loaded) return Status::NotFound("table " + t.ToString() + " does not exist");
    return loaded->config;
  }

  // "SQL catalog sqlite:/w/catalog.db", "REST catalog https://host/path": never a secret.
  virtual std::string Describe() const = 0;
};

// uri: "sqlite:<path>" (created when missing) or a PostgreSQL URI / "postgresql:<dsn>"; the
// catalog tables are created when missing. catalog_name: the catalog_name column's value. `io`
// reads and writes the metadata files. Errors never contain the password: kInvalidArgument
// (unsupported or malformed URI), kUnavailable (server unreachable), kPermissionDenied (login
// refused, or no right to create or use the catalog tables), kNotFound (no such database).
Result<std::unique_ptr<Catalog>> OpenSqlCatalog(const std::string& uri,
                                                const std::string& catalog_name,
                                                std::shared_ptr<FileIO> io);

// Whether `uri` names a REST catalog ("rest+http://...", "rest+https://...").
bool IsRestCatalogUri(const std::string& uri);

}  // namespace ferry::lake
