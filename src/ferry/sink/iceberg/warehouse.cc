#include "ferry/sink/iceberg/warehouse.h"

#include <cctype>
#include <cstdio>

#include "ferry/base/fs.h"

namespace ferry::sink {
namespace {

// A folder name for a table: the name itself when it is plain, else a readable, unique form.
std::string TableFolder(const std::string& table) {
  std::string out;
  bool changed = false;
  for (unsigned char c : table) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      out += static_cast<char>(c);
    } else {
      out += '_';
      changed = true;
    }
  }
  if (out.empty() || out == "." || out == "..") {
    out = "t" + out;
    changed = true;
  }
  if (changed) {
    uint32_t h = 2166136261u;  // FNV-1a keeps distinct names apart
    for (unsigned char c : table) h = (h ^ c) * 16777619u;
    char buf[16];
    std::snprintf(buf, sizeof buf, "-%08x", h);
    out += buf;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<IcebergWarehouse>> IcebergWarehouse::Open(config::DestinationConfig& cfg,
                                                                 const std::string& pipeline) {
  std::unique_ptr<IcebergWarehouse> w(new IcebergWarehouse());
  IcebergOptions& opts = w->opts_;
  config::Options& o = cfg.options;
  FERRY_ASSIGN_OR_RETURN(opts.warehouse, o.TakeLocation("warehouse"));
  // The storage first: a warehouse ferry cannot write stops here, before anything is created.
  auto io = lake::OpenFileIO(opts.warehouse);
  if (!io.ok()) return io.status().WithContext(o.Where("warehouse"));
  w->io_ = std::move(*io);
  opts.ns = o.TakeOptionalString("namespace").value_or(pipeline);
  if (opts.ns.empty()) return Status::InvalidArgument("destination.namespace is empty");
  if (auto c = o.TakeOptionalString("catalog")) {
    std::string uri = *c;
    if (uri.rfind("sqlite:", 0) == 0) {
      std::string p = uri.substr(7);
      if (!p.empty() && p[0] != '/') p = AbsolutePath(JoinPath(o.base_dir(), p));
      uri = "sqlite:" + p;
    }
    opts.catalog_uri = uri;
  } else {
    // The embedded catalog beside the tables (a local warehouse: OpenFileIO accepted it).
    FERRY_ASSIGN_OR_RETURN(std::string folder, lake::LocalPath(opts.warehouse));
    opts.catalog_uri = "sqlite:" + JoinPath(folder, "catalog.db");
  }
  opts.catalog_name = o.TakeOptionalString("catalog_name").value_or("ferry");
  if (auto comp = o.TakeOptionalString("compression")) {
    auto c = parquet::ParseCompression(*comp);
    if (!c.ok()) return c.status().WithContext(o.Where("compression"));
    opts.parquet.compression = *c;
  }
  FERRY_ASSIGN_OR_RETURN(int64_t level, o.TakeInt("zstd_level", 3, 1, 22));
  opts.parquet.zstd_level = static_cast<int>(level);
  FERRY_ASSIGN_OR_RETURN(int64_t target, o.TakeBytes("target_file_size", 512ll << 20));
  FERRY_ASSIGN_OR_RETURN(int64_t rg, o.TakeBytes("row_group_size", 128ll << 20));
  FERRY_ASSIGN_OR_RETURN(int64_t page, o.TakeBytes("page_size", 1ll << 20));
  if (page > rg) {
    return Status::InvalidArgument("destination.page_size (" + std::to_string(page) +
                                   ") must not exceed row_group_size (" + std::to_string(rg) + ")");
  }
  opts.target_file_bytes = static_cast<uint64_t>(target);
  opts.parquet.row_group_bytes = static_cast<uint64_t>(rg);
  opts.parquet.page_bytes = static_cast<uint64_t>(page);
  FERRY_RETURN_IF_ERROR(
      o.CheckAllUsed({"warehouse", "namespace", "catalog", "catalog_name", "compression",
                      "zstd_level", "target_file_size", "row_group_size", "page_size"}));
  auto catalog = lake::OpenSqlCatalog(opts.catalog_uri, opts.catalog_name);
  if (!catalog.ok()) return catalog.status().WithContext("opening the Iceberg catalog");
  w->catalog_ = std::move(*catalog);
  return w;
}

std::string IcebergWarehouse::Describe() const {
  auto folder = lake::LocalPath(opts_.warehouse);
  return "Iceberg warehouse " + (folder.ok() ? *folder : opts_.warehouse) + ", namespace " +
         opts_.ns + ", " + catalog_->Describe();
}

std::string IcebergWarehouse::TableLocationOf(const std::string& table) const {
  return lake::JoinLocation(lake::JoinLocation(opts_.warehouse, TableFolder(opts_.ns)),
                            TableFolder(table));
}

Result<std::unique_ptr<lake::Table>> IcebergWarehouse::LoadTable(const std::string& table) {
  return lake::Table::Load(catalog_.get(), io_, lake::TableIdent{opts_.ns, table});
}

Result<std::unique_ptr<lake::Table>> IcebergWarehouse::LoadOrCreateTable(
    const std::string& table, const Schema& schema,
    const std::map<std::string, std::string>& properties) {
  return lake::Table::LoadOrCreate(catalog_.get(), io_, lake::TableIdent{opts_.ns, table},
                                   TableLocationOf(table), schema, properties);
}

Result<std::vector<std::string>> IcebergWarehouse::ListTables() {
  FERRY_ASSIGN_OR_RETURN(auto listed, catalog_->ListTables(opts_.ns));
  std::vector<std::string> names;
  for (const auto& t : listed) names.push_back(t.name);
  return names;
}

}  // namespace ferry::sink
