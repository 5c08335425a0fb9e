#include "ferry/sink/iceberg/iceberg_sink.h"

#include <algorithm>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/lake/parquet_file.h"
#include "ferry/lake/table_scan.h"

namespace ferry::sink {

Result<std::unique_ptr<IcebergSink>> IcebergSink::Open(config::DestinationConfig& cfg,
                                                       const std::string& pipeline) {
  std::unique_ptr<IcebergSink> s(new IcebergSink());
  s->pipeline_ = pipeline;
  FERRY_ASSIGN_OR_RETURN(s->warehouse_, IcebergWarehouse::Open(cfg, pipeline));
  return s;
}

std::string IcebergSink::Describe() const { return warehouse_->Describe(); }

Result<std::string> IcebergSink::TableLocationOf(const std::string& table) {
  return warehouse_->TableLocationOf(table);
}

Result<std::unique_ptr<SinkStream>> IcebergSink::OpenStream(const std::string& table,
                                                            const Schema& source_schema,
                                                            bool replacing) {
  const IcebergOptions& opts = options();
  lake::TableIdent ident{opts.ns, table};
  std::map<std::string, std::string> props = {
      {"write.format.default", "parquet"},
      {"write.parquet.compression-codec",
       opts.parquet.compression == parquet::Compression::kZstd     ? "zstd"
       : opts.parquet.compression == parquet::Compression::kSnappy ? "snappy"
                                                                   : "uncompressed"},
      {"write.metadata.delete-after-commit.enabled", "true"},
  };
  auto t = warehouse_->LoadOrCreateTable(table, source_schema, props);
  if (!t.ok()) return t.status().WithContext("opening Iceberg table " + ident.ToString());
  FERRY_ASSIGN_OR_RETURN(Schema writer_schema, (*t)->AssignFieldIds(source_schema, replacing));
  auto schema = std::make_shared<const Schema>(std::move(writer_schema));
  return std::unique_ptr<SinkStream>(new IcebergStream(this, std::move(*t), std::move(schema)));
}

namespace {

class IcebergReader : public TableReader {
 public:
  IcebergReader(std::unique_ptr<lake::Table> table, std::unique_ptr<lake::TableScan> scan)
      : table_(std::move(table)), scan_(std::move(scan)) {}
  const std::shared_ptr<const Schema>& schema() const override { return scan_->schema(); }
  std::string Version() const override {
    return scan_->snapshot_id() ? "snapshot " + std::to_string(*scan_->snapshot_id())
                                : "no snapshot";
  }
  Status Read(const std::function<Status(const Batch&)>& each) override {
    return scan_->Read(each);
  }

 private:
  std::unique_ptr<lake::Table> table_;
  std::unique_ptr<lake::TableScan> scan_;
};

}  // namespace

Result<std::unique_ptr<TableReader>> IcebergSink::OpenReader(const std::string& table) {
  auto t = warehouse_->LoadTable(table);
  if (!t.ok()) {
    if (t.status().code() == StatusCode::kNotFound) return std::unique_ptr<TableReader>();
    return t.status();
  }
  FERRY_ASSIGN_OR_RETURN(auto scan, lake::TableScan::Open((*t)->io(), (*t)->metadata()));
  return std::unique_ptr<TableReader>(new IcebergReader(std::move(*t), std::move(scan)));
}

Result<Json> IcebergSink::ReadMarker(const std::string& table) {
  auto t = warehouse_->LoadTable(table);
  if (!t.ok()) {
    if (t.status().code() == StatusCode::kNotFound) return Json(nullptr);
    return t.status();
  }
  auto v = (*t)->metadata().Property(MarkerKey());
  if (!v) return Json(nullptr);
  Json j = Json::parse(*v, nullptr, false);
  if (j.is_discarded()) {
    return Status::Corruption("table " + TableName(table) + " has a marker property " +
                              MarkerKey() + " that is not JSON");
  }
  return j;
}

Json IcebergStream::Marker() const {
  auto v = table_->metadata().Property(sink_->MarkerKey());
  if (!v) return nullptr;
  Json j = Json::parse(*v, nullptr, false);
  return j.is_discarded() ? Json(nullptr) : j;
}

Status IcebergStream::Write(const Batch& batch) {
  if (!writer_) {
    writer_uri_ = table_->NewDataFileUri("data");
    FERRY_ASSIGN_OR_RETURN(auto out, table_->io().NewFile(writer_uri_));
    FERRY_ASSIGN_OR_RETURN(
        writer_, parquet::Writer::Open(std::move(out), schema_, sink_->options().parquet));
  }
  FERRY_RETURN_IF_ERROR(writer_->Write(batch));
  if (writer_->EstimatedSize() >= sink_->options().target_file_bytes) {
    FERRY_RETURN_IF_ERROR(CloseOpenFile());
  }
  return Status::OK();
}

Status IcebergStream::WriteUpserts(const Batch& batch) {
  FERRY_RETURN_IF_ERROR(WriteDeleteKeys(batch));
  return Write(batch);
}

Status IcebergStream::WriteDeleteKeys(const Batch& batch) {
  if (schema_->identifier_field_ids.empty()) {
    return Status::InvalidArgument(
        "table " + table_->ident().ToString() +
        " has no primary key (identifier fields), so rows cannot be upserted; declare a key on "
        "the source table (NOT NULL columns) or set the stream's primary_key");
  }
  if (!key_schema_) {
    auto ks = std::make_shared<Schema>();
    for (int32_t id : schema_->identifier_field_ids) {
      for (size_t i = 0; i < schema_->fields.size(); ++i) {
        if (schema_->fields[i].id == id) {
          ks->fields.push_back(schema_->fields[i]);
          key_columns_.push_back(i);
        }
      }
    }
    ks->identifier_field_ids = schema_->identifier_field_ids;
    key_schema_ = std::move(ks);
  }
  if (!delete_writer_) {
    delete_uri_ = table_->NewDataFileUri("eq-delete");
    FERRY_ASSIGN_OR_RETURN(auto out, table_->io().NewFile(delete_uri_));
    FERRY_ASSIGN_OR_RETURN(delete_writer_, parquet::Writer::Open(std::move(out), key_schema_,
                                                                 sink_->options().parquet));
  }
  Batch keys(key_schema_);
  for (size_t k = 0; k < key_columns_.size(); ++k) keys.column(k) = batch.column(key_columns_[k]);
  return delete_writer_->Write(keys);
}

Status IcebergStream::CloseDeleteFile() {
  if (!delete_writer_) return Status::OK();
  auto metrics = delete_writer_->Close();
  delete_writer_.reset();
  if (!metrics.ok()) return metrics.status().WithContext("closing delete file " + delete_uri_);
  lake::DataFile f = lake::DataFileOf(delete_uri_, *metrics);
  f.content = lake::FileContent::kEqualityDeletes;
  f.equality_ids = schema_->identifier_field_ids;
  pending_deletes_.push_back(std::move(f));
  return Status::OK();
}

uint64_t IcebergStream::pending_rows() const {
  uint64_t n = writer_ ? writer_->rows_written() : 0;
  for (const auto& f : pending_) n += static_cast<uint64_t>(f.record_count);
  return n;
}

bool IcebergStream::LoadCommitDue() const {
  return !writer_ || writer_->EstimatedSize() >= sink_->options().target_file_bytes / 2;
}

Status IcebergStream::CloseOpenFile() {
  if (!writer_) return Status::OK();
  auto metrics = writer_->Close();
  writer_.reset();
  if (!metrics.ok()) return metrics.status().WithContext("closing data file " + writer_uri_);
  pending_.push_back(lake::DataFileOf(writer_uri_, *metrics));
  return Status::OK();
}

std::map<std::string, std::string> IcebergStream::MarkerProperty(const Json& marker) const {
  return {{sink_->MarkerKey(), marker.dump()}};
}

// A load in flight lives on its own branch until it is published.
std::string IcebergStream::BranchOf(const std::string& load) const {
  return load.empty() ? "main" : "ferry-" + sink_->pipeline() + "-" + load;
}

lake::LandedCheck IcebergStream::LandedFrom(const MarkerCheck& check) const {
  std::string key = sink_->MarkerKey();
  return [check, key](const lake::TableMetadata& md) {
    auto v = md.Property(key);
    if (!v) return check(Json(nullptr));
    Json j = Json::parse(*v, nullptr, false);
    return check(j.is_discarded() ? Json(nullptr) : j);
  };
}

Result<CommitResult> IcebergStream::Commit(const std::string& load, const Json& marker,
                                           const std::map<std::string, std::string>& summary,
                                           const MarkerCheck& already_landed) {
  FERRY_RETURN_IF_ERROR(CloseOpenFile());
  FERRY_RETURN_IF_ERROR(CloseDeleteFile());
  FaultPoint("sink.data_written");
  lake::AppendRequest req;
  req.branch = BranchOf(load);
  req.schema = schema_.get();
  req.data_files = pending_;
  req.delete_files = pending_deletes_;
  req.set_properties = MarkerProperty(marker);
  req.summary = summary;
  req.already_landed = LandedFrom(already_landed);
  FaultPoint("sink.before_commit");
  auto r = table_->Append(req);
  if (!r.ok()) return r.status();
  if (r->already_landed) {
    DiscardPending();  // the same work landed earlier: these files are not referenced
  } else {
    for (const auto& f : pending_) {
      totals_.rows += static_cast<uint64_t>(f.record_count);
      totals_.bytes += static_cast<uint64_t>(f.file_size_bytes);
      ++totals_.files;
    }
    pending_.clear();
    pending_deletes_.clear();
  }
  FaultPoint("sink.after_commit");
  return CommitResult{r->already_landed};
}

Result<CommitResult> IcebergStream::Publish(const std::string& load, const Json& marker,
                                            const MarkerCheck& already_landed) {
  lake::PublishRequest req;
  req.branch = BranchOf(load);
  req.schema = schema_.get();
  req.set_properties = MarkerProperty(marker);
  req.already_landed = LandedFrom(already_landed);
  FaultPoint("sink.before_publish");
  auto r = table_->Publish(req);
  if (!r.ok()) return r.status();
  FaultPoint("sink.after_publish");
  return CommitResult{r->already_landed};
}

void IcebergStream::DiscardPending() {
  if (writer_) {
    (void)writer_->Close();
    writer_.reset();
    (void)table_->io().Delete(writer_uri_);
  }
  if (delete_writer_) {
    (void)delete_writer_->Close();
    delete_writer_.reset();
    (void)table_->io().Delete(delete_uri_);
  }
  for (const auto& f : pending_) (void)table_->io().Delete(f.path);
  for (const auto& f : pending_deletes_) (void)table_->io().Delete(f.path);
  pending_.clear();
  pending_deletes_.clear();
}

}  // namespace ferry::sink
