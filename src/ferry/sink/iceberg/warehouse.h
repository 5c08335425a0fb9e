// An Iceberg destination's warehouse, opened from the pipeline file's destination keys: its
// options, the FileIO its location's scheme selects, and its catalog. The Iceberg sink writes
// through it, and `ferry maintain` opens it alone (without a sink): both load every table through
// LoadTable, so a table's files are always reached through the warehouse's FileIO.
//
// Thread-safety: LoadTable and ListTables may be called from several threads (the catalog
// serializes); each Table is used by one thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/config/config.h"
#include "ferry/format/parquet/writer.h"
#include "ferry/lake/catalog.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/s3_settings.h"
#include "ferry/lake/table.h"

namespace ferry::sink {

struct IcebergOptions {
  std::string warehouse;  // the warehouse's location, a URI ("file:///abs/folder"); empty when
                          // a REST catalog's warehouse is a name (rest_warehouse_name)
  std::string rest_warehouse_name;
  std::string ns;
  std::string catalog_uri;
  std::string catalog_name = "ferry";
  parquet::WriterOptions parquet;
  uint64_t target_file_bytes = 512ull << 20;
  // Partitioned tables: data files open at once, and the buffers they may hold together.
  int64_t max_open_files = 128;
  uint64_t write_buffer_bytes = 256ull << 20;
};

// The location ferry gives table `table` of namespace `ns` in the warehouse at `warehouse` (a
// URI): <warehouse>/<ns>/<table>, each name a safe folder name (a plain name as it is; another
// with '_' for its unsafe characters and a hash of the name, so that distinct names stay apart).
// The sink's tables and those `ferry catalog serve` creates without a location are placed here.
std::string DefaultTableLocation(const std::string& warehouse, const std::string& ns,
                                 const std::string& table);

class IcebergWarehouse {
 public:
  // Reads the destination keys: warehouse, namespace, catalog, catalog_name, compression,
  // zstd_level, target_file_size, row_group_size, page_size, max_open_files, write_buffer,
  // and for an s3:// warehouse the
  // s3.* keys (endpoint, region, path_style, part_size, upload_concurrency, retries,
  // connect_timeout, timeout); `pipeline` names the default namespace. Errors: kInvalidArgument
  // for a bad key, for a warehouse whose scheme ferry cannot write (naming the scheme and the
  // fix; nothing is created then), for missing S3 credentials and for an s3:// warehouse without
  // a `catalog`; the catalog's errors (lake::OpenSqlCatalog).
  static Result<std::unique_ptr<IcebergWarehouse>> Open(config::DestinationConfig& cfg,
                                                        const std::string& pipeline);

  const IcebergOptions& options() const { return opts_; }
  lake::Catalog* catalog() { return catalog_.get(); }
  const std::shared_ptr<lake::FileIO>& io() const { return io_; }
  // "Iceberg warehouse <folder>, namespace <ns>, <catalog>" (an s3:// warehouse adds its
  // endpoint, region and where the credentials came from, never their values).
  std::string Describe() const;
  // For `check`: lists the warehouse, writes, reads back and deletes a probe file
  // (lake::ProbeStorage: its errors, which name the missing permission or bucket).
  Status ProbeStorage();

  // The location of table `table` of the namespace: <warehouse>/<namespace>/<table>, each name
  // made a safe folder name.
  std::string TableLocationOf(const std::string& table) const;
  // Loads table `table` of the namespace; kNotFound when the catalog does not have it.
  Result<std::unique_ptr<lake::Table>> LoadTable(const std::string& table);
  // Loads it, creating it (and the namespace) with `schema` and `properties` when missing.
  Result<std::unique_ptr<lake::Table>> LoadOrCreateTable(
      const std::string& table, const Schema& schema,
      const std::map<std::string, std::string>& properties);
  // The names of the namespace's tables.
  Result<std::vector<std::string>> ListTables();

 private:
  IcebergWarehouse() = default;
  // Gives a table the FileIO its location needs: one with the credentials its catalog vends for
  // it, else the warehouse's (or, for a REST catalog's table elsewhere, one for its scheme).
  Status ChooseStorage(lake::Table& t);

  IcebergOptions opts_;
  lake::S3Config s3_config_;  // the destination's s3: settings
  std::mutex s3_mu_;
  std::shared_ptr<lake::FileIO> s3_io_;  // GUARDED_BY(s3_mu_): tables on S3 of a named warehouse
  std::shared_ptr<lake::FileIO> io_;
  std::unique_ptr<lake::Catalog> catalog_;
};

}  // namespace ferry::sink
