#include "ferry/sink/iceberg/warehouse.h"

#include <cctype>
#include <cstdio>

#include "ferry/base/fs.h"
#include "ferry/lake/rest_catalog.h"
#include "ferry/lake/s3_file_io.h"
#include "ferry/lake/s3_settings.h"

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

constexpr const char* kS3Keys[] = {"endpoint",           "region",  "path_style",      "part_size",
                                   "upload_concurrency", "retries", "connect_timeout", "timeout"};

// The destination's `s3:` keys (dotted: "s3.region").
Result<lake::S3Config> TakeS3Config(config::Options& o) {
  lake::S3Config c;
  c.endpoint = o.TakeOptionalString("s3.endpoint");
  c.region = o.TakeOptionalString("s3.region");
  if (auto style = o.TakeOptionalString("s3.path_style"); style && *style != "auto") {
    if (*style == "true" || *style == "yes" || *style == "on") {
      c.path_style = true;
    } else if (*style == "false" || *style == "no" || *style == "off") {
      c.path_style = false;
    } else {
      return Status::InvalidArgument(o.Where("s3.path_style") +
                                     " must be auto, true (http://host/bucket/key) or false "
                                     "(http://bucket.host/key), not '" +
                                     *style + "'");
    }
  }
  FERRY_ASSIGN_OR_RETURN(int64_t part, o.TakeBytes("s3.part_size", 8ll << 20));
  if (static_cast<uint64_t>(part) < lake::kS3MinPartBytes ||
      static_cast<uint64_t>(part) > lake::kS3MaxPartBytes) {
    return Status::InvalidArgument(o.Where("s3.part_size") +
                                   " must be from 5MiB to 5GiB (S3's limits for a part), not " +
                                   std::to_string(part) + " bytes");
  }
  c.part_size_bytes = static_cast<uint64_t>(part);
  FERRY_ASSIGN_OR_RETURN(int64_t concurrency, o.TakeInt("s3.upload_concurrency", 4, 1, 64));
  c.upload_concurrency = static_cast<int>(concurrency);
  FERRY_ASSIGN_OR_RETURN(int64_t retries, o.TakeInt("s3.retries", 7, 0, 100));
  c.max_attempts = static_cast<int>(retries) + 1;
  FERRY_ASSIGN_OR_RETURN(c.connect_timeout_ms, o.TakeDuration("s3.connect_timeout", 10000, 100));
  FERRY_ASSIGN_OR_RETURN(c.timeout_ms, o.TakeDuration("s3.timeout", 60000, 1000));
  return c;
}

constexpr const char* kRestKeys[] = {
    "token",        "credential",        "scope",           "oauth2-server-uri", "signing_region",
    "signing_name", "access_delegation", "connect_timeout", "timeout",           "retries"};

// Whether a REST catalog's `warehouse` names a place (a URI or a path) rather than a warehouse
// the server knows by name.
bool LooksLikeLocation(const std::string& w) {
  if (w.empty()) return false;
  if (w[0] == '/' || w.rfind("./", 0) == 0 || w.rfind("../", 0) == 0 || w == ".") return true;
  return w.find("://") != std::string::npos || w.rfind("file:", 0) == 0;
}

// The destination's `rest:` keys (dotted: "rest.token"); the header map `rest.headers`.
Result<lake::RestCatalogOptions> TakeRestOptions(config::Options& o, const IcebergOptions& opts) {
  lake::RestCatalogOptions r;
  r.uri = opts.catalog_uri;
  r.warehouse = opts.warehouse.empty() ? opts.rest_warehouse_name : opts.warehouse;
  r.token = o.TakeOptionalString("rest.token").value_or("");
  r.credential = o.TakeOptionalString("rest.credential").value_or("");
  if (auto scope = o.TakeOptionalString("rest.scope")) r.scope = *scope;
  r.oauth2_server_uri = o.TakeOptionalString("rest.oauth2-server-uri").value_or("");
  r.signing_region = o.TakeOptionalString("rest.signing_region").value_or("");
  r.signing_name = o.TakeOptionalString("rest.signing_name").value_or("");
  r.access_delegation = o.TakeOptionalString("rest.access_delegation").value_or("");
  if (!r.access_delegation.empty() && r.access_delegation != "vended-credentials" &&
      r.access_delegation != "remote-signing") {
    return Status::InvalidArgument(o.Where("rest.access_delegation") +
                                   " must be vended-credentials or remote-signing, not '" +
                                   r.access_delegation + "'");
  }
  r.headers = o.TakeMap("rest.headers");
  FERRY_ASSIGN_OR_RETURN(r.connect_timeout_ms, o.TakeDuration("rest.connect_timeout", 10000, 100));
  FERRY_ASSIGN_OR_RETURN(r.timeout_ms, o.TakeDuration("rest.timeout", 120000, 1000));
  FERRY_ASSIGN_OR_RETURN(int64_t retries, o.TakeInt("rest.retries", 5, 0, 100));
  r.max_attempts = static_cast<int>(retries) + 1;
  return r;
}

}  // namespace

Result<std::unique_ptr<IcebergWarehouse>> IcebergWarehouse::Open(config::DestinationConfig& cfg,
                                                                 const std::string& pipeline) {
  std::unique_ptr<IcebergWarehouse> w(new IcebergWarehouse());
  IcebergOptions& opts = w->opts_;
  config::Options& o = cfg.options;
  const std::optional<std::string> catalog_setting = o.TakeOptionalString("catalog");
  const bool rest = catalog_setting && lake::IsRestCatalogUri(*catalog_setting);
  if (rest) {
    // A REST catalog's warehouse is what its server calls one: a location, or a name the server
    // maps to one (Polaris' catalog, Lakekeeper's warehouse).
    const std::string w_raw = o.TakeOptionalString("warehouse").value_or("");
    if (LooksLikeLocation(w_raw)) {
      o.Set("warehouse", w_raw, 0);
      FERRY_ASSIGN_OR_RETURN(opts.warehouse, o.TakeLocation("warehouse"));
    } else {
      opts.rest_warehouse_name = w_raw;
    }
  } else {
    FERRY_ASSIGN_OR_RETURN(opts.warehouse, o.TakeLocation("warehouse"));
  }
  // A REST warehouse known by name has no location of its own: each table's is its server's,
  // and ChooseStorage opens what the table needs (with these s3: settings for an s3:// one).
  const bool named = opts.warehouse.empty();
  const std::string scheme = lake::SchemeOf(opts.warehouse);
  const bool on_s3 = scheme == "s3" || scheme == "s3a";
  FERRY_ASSIGN_OR_RETURN(lake::S3Config s3, TakeS3Config(o));
  if (!on_s3 && !named) {
    for (const char* key : kS3Keys) {
      if (o.Has(std::string("s3.") + key)) {
        return Status::InvalidArgument(o.Where(std::string("s3.") + key) +
                                       " applies to an s3:// warehouse only; this one is " +
                                       opts.warehouse + ": remove the s3: section");
      }
    }
  }
  if (on_s3 && !catalog_setting) {
    return Status::InvalidArgument(
        "destination.catalog is required for an s3:// warehouse (" + opts.warehouse +
        "): the SQL catalog cannot live on an object store. Set catalog: sqlite:./catalog.db (a "
        "local file), a postgresql:// URL or a REST catalog (rest+https://host/path)");
  }
  // The storage first: a warehouse ferry cannot write stops here, before anything is created.
  w->s3_config_ = s3;
  if (named) {
    w->io_ = lake::LocalFileIO();
  } else {
    auto io = lake::OpenFileIO(opts.warehouse, s3);
    if (!io.ok()) return io.status().WithContext(o.Where("warehouse"));
    w->io_ = std::move(*io);
  }
  opts.ns = o.TakeOptionalString("namespace").value_or(pipeline);
  if (opts.ns.empty()) return Status::InvalidArgument("destination.namespace is empty");
  if (rest) {
    opts.catalog_uri = *catalog_setting;
  } else if (auto c = catalog_setting) {
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
  FERRY_ASSIGN_OR_RETURN(opts.max_open_files, o.TakeInt("max_open_files", 128, 1, 10000));
  FERRY_ASSIGN_OR_RETURN(int64_t buffer, o.TakeBytes("write_buffer", 256ll << 20));
  if (buffer < (1ll << 20)) {
    return Status::InvalidArgument(o.Where("write_buffer") +
                                   ": write_buffer is at least 1MB (the buffers of the data "
                                   "files a partitioned table keeps open)");
  }
  opts.write_buffer_bytes = static_cast<uint64_t>(buffer);
  opts.target_file_bytes = static_cast<uint64_t>(target);
  opts.parquet.row_group_bytes = static_cast<uint64_t>(rg);
  opts.parquet.page_bytes = static_cast<uint64_t>(page);
  lake::RestCatalogOptions rest_opts;
  if (rest) {
    FERRY_ASSIGN_OR_RETURN(rest_opts, TakeRestOptions(o, opts));
  } else {
    for (const char* key : kRestKeys) {
      if (o.Has(std::string("rest.") + key)) {
        return Status::InvalidArgument(o.Where(std::string("rest.") + key) +
                                       " applies to a REST catalog only (catalog: "
                                       "rest+https://...); remove the rest: section");
      }
    }
  }
  std::vector<std::string> known = {"warehouse",        "namespace",      "catalog",
                                    "catalog_name",     "compression",    "zstd_level",
                                    "target_file_size", "row_group_size", "page_size",
                                    "max_open_files",   "write_buffer"};
  for (const char* key : kS3Keys) known.push_back(std::string("s3.") + key);
  for (const char* key : kRestKeys) known.push_back(std::string("rest.") + key);
  FERRY_RETURN_IF_ERROR(o.CheckAllUsed(known));
  auto catalog = rest ? lake::OpenRestCatalog(rest_opts)
                      : lake::OpenSqlCatalog(opts.catalog_uri, opts.catalog_name, w->io_);
  if (!catalog.ok()) return catalog.status().WithContext("opening the Iceberg catalog");
  w->catalog_ = std::move(*catalog);
  return w;
}

std::string IcebergWarehouse::Describe() const {
  if (opts_.warehouse.empty()) {
    return "Iceberg warehouse '" + opts_.rest_warehouse_name + "' of the " + catalog_->Describe() +
           ", namespace " + opts_.ns;
  }
  auto folder = lake::LocalPath(opts_.warehouse);
  if (folder.ok()) {
    return "Iceberg warehouse " + *folder + ", namespace " + opts_.ns + ", " + catalog_->Describe();
  }
  return "Iceberg warehouse " + opts_.warehouse + " on " + io_->Describe() + ", namespace " +
         opts_.ns + ", " + catalog_->Describe();
}

Status IcebergWarehouse::ProbeStorage() {
  // A warehouse known by name: its tables' places are the catalog's to say.
  if (opts_.warehouse.empty()) return Status::OK();
  return lake::ProbeStorage(*io_, opts_.warehouse)
      .WithContext("probing the warehouse " + opts_.warehouse);
}

std::string DefaultTableLocation(const std::string& warehouse, const std::string& ns,
                                 const std::string& table) {
  return lake::JoinLocation(lake::JoinLocation(warehouse, TableFolder(ns)), TableFolder(table));
}

std::string IcebergWarehouse::TableLocationOf(const std::string& table) const {
  if (opts_.warehouse.empty()) return "";  // a REST catalog's named warehouse: its server places
  return DefaultTableLocation(opts_.warehouse, opts_.ns, table);
}

Result<std::unique_ptr<lake::Table>> IcebergWarehouse::LoadTable(const std::string& table) {
  FERRY_ASSIGN_OR_RETURN(auto t,
                         lake::Table::Load(catalog_.get(), io_, lake::TableIdent{opts_.ns, table}));
  FERRY_RETURN_IF_ERROR(ChooseStorage(*t));
  return t;
}

Result<std::unique_ptr<lake::Table>> IcebergWarehouse::LoadOrCreateTable(
    const std::string& table, const Schema& schema,
    const std::map<std::string, std::string>& properties) {
  FERRY_ASSIGN_OR_RETURN(
      auto t, lake::Table::LoadOrCreate(catalog_.get(), io_, lake::TableIdent{opts_.ns, table},
                                        TableLocationOf(table), schema, properties));
  FERRY_RETURN_IF_ERROR(ChooseStorage(*t));
  return t;
}

Status IcebergWarehouse::ChooseStorage(lake::Table& t) {
  const std::string location = t.metadata().location();
  const std::string scheme = lake::SchemeOf(location);
  const bool on_s3 = scheme == "s3" || scheme == "s3a";
  if (auto vended = lake::VendedS3Of(t.config()); vended && on_s3) {
    lake::Catalog* catalog = catalog_.get();
    const lake::TableIdent ident = t.ident();
    auto refresh = [catalog, ident]() -> Result<lake::VendedS3> {
      FERRY_ASSIGN_OR_RETURN(auto config, catalog->LoadStorageConfig(ident));
      auto v = lake::VendedS3Of(config);
      if (!v) {
        return Status::PermissionDenied("the catalog no longer vends storage credentials for " +
                                        ident.ToString());
      }
      return *v;
    };
    auto io = lake::OpenVendedS3FileIO(location, s3_config_, *vended, refresh);
    if (!io.ok()) return io.status().WithContext("table " + ident.ToString());
    t.SetIO(std::move(*io));
    return Status::OK();
  }
  const bool io_on_s3 = lake::S3SettingsOf(*io_).has_value();
  if (on_s3 == io_on_s3) return Status::OK();
  // A table of a REST catalog placed where the warehouse's own FileIO does not reach (a
  // warehouse known by name): its storage with the destination's own settings.
  if (!on_s3) {
    if (scheme != "file" && !(scheme.empty() && !location.empty() && location[0] == '/')) {
      return Status::NotSupported("table " + t.ident().ToString() + " lives at " + location +
                                  ", which ferry cannot write: Iceberg tables go to local "
                                  "folders or S3-compatible object stores");
    }
    t.SetIO(lake::LocalFileIO());
    return Status::OK();
  }
  std::lock_guard<std::mutex> lock(s3_mu_);
  if (!s3_io_) {
    auto io = lake::OpenFileIO(location, s3_config_);
    if (!io.ok()) return io.status().WithContext("table " + t.ident().ToString());
    s3_io_ = std::move(*io);
  }
  t.SetIO(s3_io_);
  return Status::OK();
}

Result<std::vector<std::string>> IcebergWarehouse::ListTables() {
  FERRY_ASSIGN_OR_RETURN(auto listed, catalog_->ListTables(opts_.ns));
  std::vector<std::string> names;
  for (const auto& t : listed) names.push_back(t.name);
  return names;
}

}  // namespace ferry::sink
