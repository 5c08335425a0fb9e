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
  auto it = partitioning_.find(table);
  auto spec =
      PrepareSpec(**t, writer_schema, it == partitioning_.end() ? std::nullopt : it->second);
  if (!spec.ok()) return spec.status().WithContext("table " + ident.ToString());
  auto partitioner = lake::Partitioner::Make(spec->first, writer_schema);
  if (!partitioner.ok()) {
    return partitioner.status().WithContext(
        "table " + ident.ToString() + " is partitioned by " + spec->first.Describe(writer_schema) +
        ", which its columns no longer allow; run a full refresh with partition_by set");
  }
  auto schema = std::make_shared<const Schema>(std::move(writer_schema));
  return std::unique_ptr<SinkStream>(new IcebergStream(this, std::move(*t), std::move(schema),
                                                       std::move(*partitioner), spec->second));
}

Status IcebergSink::SetPartitioning(const std::string& stream,
                                    const std::optional<std::vector<std::string>>& terms) {
  partitioning_[stream] = terms;
  return Status::OK();
}

namespace {

// The source's columns with ids of their own (the table's are assigned when it is opened).
Schema WithOwnIds(const Schema& source_schema) {
  Schema schema = source_schema;
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    schema.fields[i].id = static_cast<int32_t>(i + 1);
  }
  return schema;
}

}  // namespace

Result<std::string> IcebergSink::DescribeTerms(const std::string& table,
                                               const std::vector<std::string>& terms,
                                               const Schema& source_schema) {
  const Schema schema = WithOwnIds(source_schema);
  auto spec = lake::ParsePartitionBy(terms, schema);
  if (!spec.ok()) return spec.status().WithContext("table " + table);
  return spec->Describe(schema);
}

Result<std::string> IcebergSink::DescribePartitioning(const std::string& table,
                                                      const Schema& source_schema) {
  auto it = partitioning_.find(table);
  if (it != partitioning_.end() && it->second) {
    return DescribeTerms(TableName(table), *it->second, source_schema);
  }
  auto t = warehouse_->LoadTable(table);
  if (!t.ok()) {
    if (t.status().code() == StatusCode::kNotFound) return std::string("unpartitioned");
    return t.status();
  }
  auto spec = (*t)->metadata().DefaultSpec();
  if (!spec.ok()) return spec.status().WithContext("table " + TableName(table));
  auto current = (*t)->metadata().CurrentSchema();
  return spec->Describe(current.ok() ? *current : WithOwnIds(source_schema)) + " (the table's)";
}

Result<std::pair<lake::PartitionSpec, int32_t>> IcebergSink::PrepareSpec(
    lake::Table& table, const Schema& schema,
    const std::optional<std::vector<std::string>>& terms) {
  auto current = table.metadata().DefaultSpec();
  if (!current.ok()) {
    return current.status().WithContext(
        "its default partition spec cannot be written by ferry (a table of another engine); "
        "set partition_by to the layout ferry should write and it becomes a new spec");
  }
  lake::PartitionSpec want = *current;
  if (terms) {
    auto parsed = lake::ParsePartitionBy(*terms, schema);
    if (!parsed.ok()) return parsed.status();
    want = std::move(*parsed);
  }
  auto unpartitioned_id = [](const lake::TableMetadata& m) -> std::optional<int32_t> {
    for (const auto& js : m.doc().value("partition-specs", lake::Json::array())) {
      if (js.contains("fields") && js["fields"].is_array() && js["fields"].empty()) {
        return js.value("spec-id", 0);
      }
    }
    return std::nullopt;
  };
  const bool same = want.SameLayout(*current);
  if (!same || !unpartitioned_id(table.metadata())) {
    auto r = table.CommitUpdate(
        [&](lake::TableMetadata& next, int) -> Status {
          const int32_t id = next.AddSpec(want);
          next.SetDefaultSpec(id);
          next.AddSpec(lake::PartitionSpec{});  // global equality deletes need one
          return Status::OK();
        },
        nullptr);
    if (!r.ok()) return r.status().WithContext("adding partition spec " + want.Describe(schema));
    FERRY_LOG(kInfo) << "table " << table.ident().ToString() << ": partition spec "
                     << want.Describe(schema)
                     << (same ? "" : " is now the default (files written before keep theirs)");
  }
  FERRY_ASSIGN_OR_RETURN(lake::PartitionSpec spec, table.metadata().DefaultSpec());
  const std::optional<int32_t> deletes = unpartitioned_id(table.metadata());
  if (!deletes) return Status::Internal("no unpartitioned spec after adding one");
  return std::make_pair(std::move(spec), *deletes);
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
  if (partitioner_.spec().fields.empty()) return WriteToPartition("", {}, batch);
  // Rows grouped by partition, in the order they came within each. A row of the partition of the
  // row before it (rows in time order) costs one comparison. Integer-valued specs (days, hours,
  // buckets of keys) are computed a column at a time, and a row's group is found by a hash of its
  // integers in an open-addressing table; other specs search a few groups in place and build a
  // map by PartitionKey only for many.
  const size_t rows = batch.num_rows();
  const size_t fields = partitioner_.spec().fields.size();
  const bool ints = partitioner_.int_valued();
  if (ints) partitioner_.IntsOf(batch, &row_ints_, &row_int_nulls_);
  auto matches = [&](size_t r, const RowGroup& g) {
    if (!ints) return g.tuple == row_tuple_;
    for (size_t f = 0; f < fields; ++f) {
      const size_t at = f * rows + r;
      const bool null = row_int_nulls_[at] != 0;
      if (g.tuple[f].null != null || (!null && g.tuple[f].i != row_ints_[at])) return false;
    }
    return true;
  };
  auto hash_of = [&](size_t r) {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (size_t f = 0; f < fields; ++f) {
      const size_t at = f * rows + r;
      const uint64_t v =
          row_int_nulls_[at] != 0 ? 0x5BD1E9955BD1E995ULL : static_cast<uint64_t>(row_ints_[at]);
      h = (h ^ v) * 0xFF51AFD7ED558CCDULL;
      h ^= h >> 32;
    }
    return h;
  };
  // The slot of the group of row r (hash h) in group_slots_: its group's, or the free one where
  // it goes.
  auto slot_of = [&](size_t r, uint64_t h) {
    const size_t mask = group_slots_.size() - 1;
    for (size_t at = h & mask;; at = (at + 1) & mask) {
      const int32_t g = group_slots_[at];
      if (g < 0) return at;
      const RowGroup& group = groups_[static_cast<size_t>(g)];
      if (group.hash == h && matches(r, group)) return at;
    }
  };
  if (ints) group_slots_.assign(64, -1);
  groups_.resize(std::max(groups_.size(), size_t{1}));
  size_t used = 0;
  size_t current = 0;
  std::unordered_map<std::string, size_t> group_of;
  for (size_t r = 0; r < rows; ++r) {
    if (!ints) partitioner_.Into(batch, r, &row_tuple_);
    if (used > 0 && matches(r, groups_[current])) {
      groups_[current].rows.push_back(static_cast<uint32_t>(r));
      continue;
    }
    size_t g = used;
    uint64_t h = 0;
    size_t slot = 0;
    if (ints) {
      h = hash_of(r);
      slot = slot_of(r, h);
      if (group_slots_[slot] >= 0) g = static_cast<size_t>(group_slots_[slot]);
    } else if (used <= 16) {
      for (size_t i = 0; i < used; ++i) {
        if (matches(r, groups_[i])) {
          g = i;
          break;
        }
      }
    } else {
      if (group_of.empty()) {
        for (size_t i = 0; i < used; ++i) group_of.emplace(groups_[i].key, i);
      }
      auto it = group_of.find(lake::PartitionKey(row_tuple_));
      if (it != group_of.end()) g = it->second;
    }
    if (g == used) {
      if (ints) partitioner_.IntsTuple(row_ints_, row_int_nulls_, rows, r, &row_tuple_);
      if (groups_.size() == used) groups_.emplace_back();
      RowGroup& n = groups_[used++];
      n.tuple = row_tuple_;
      n.key = lake::PartitionKey(row_tuple_);
      n.hash = h;
      n.rows.clear();
      if (!group_of.empty()) group_of.emplace(n.key, g);
      if (ints) {
        group_slots_[slot] = static_cast<int32_t>(g);
        if (used * 2 > group_slots_.size()) {  // at most half full
          group_slots_.assign(group_slots_.size() * 2, -1);
          const size_t mask = group_slots_.size() - 1;
          for (size_t i = 0; i < used; ++i) {
            size_t at = groups_[i].hash & mask;
            while (group_slots_[at] >= 0) at = (at + 1) & mask;
            group_slots_[at] = static_cast<int32_t>(i);
          }
        }
      }
    }
    groups_[g].rows.push_back(static_cast<uint32_t>(r));
    current = g;
  }
  if (used == 1) {
    FERRY_RETURN_IF_ERROR(WriteToPartition(groups_[0].key, groups_[0].tuple, batch));
    return KeepWithinBuffer();
  }
  if (!part_ || part_->schema() != batch.schema()) part_ = std::make_unique<Batch>(batch.schema());
  for (size_t g = 0; g < used; ++g) {
    part_->Clear();
    const std::vector<uint32_t>& picked = groups_[g].rows;
    for (size_t c = 0; c < batch.num_columns(); ++c) {
      part_->column(c).AppendRowsOf(batch.column(c), picked.data(), picked.size());
    }
    FERRY_RETURN_IF_ERROR(WriteToPartition(groups_[g].key, groups_[g].tuple, *part_));
  }
  return KeepWithinBuffer();
}

Status IcebergStream::WriteToPartition(const std::string& key, const lake::PartitionTuple& tuple,
                                       const Batch& batch) {
  auto it = open_.find(key);
  if (it == open_.end()) {
    // Room for one more: the least recently written files are closed.
    while (!open_.empty() &&
           static_cast<int64_t>(open_.size()) >= sink_->options().max_open_files) {
      FERRY_RETURN_IF_ERROR(CloseFile(lru_.back(), /*hand_over=*/true));
    }
    OpenFile f;
    f.file.partition = tuple;
    f.file.spec_id = partitioner_.spec().spec_id;
    const std::string folder =
        partitioner_.spec().fields.empty() ? std::string() : partitioner_.Path(tuple) + "/";
    f.file.uri = table_->NewDataFileUri(folder + "data");
    FERRY_ASSIGN_OR_RETURN(auto out,
                           table_->io().NewFile(f.file.uri, lake::FileIO::Durability::kOnPersist));
    parquet::WriterOptions options = sink_->options().parquet;
    options.hints = hints_;
    FERRY_ASSIGN_OR_RETURN(f.file.writer,
                           parquet::Writer::Open(std::move(out), schema_, std::move(options)));
    lru_.push_front(key);
    f.lru = lru_.begin();
    it = open_.emplace(key, std::move(f)).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  parquet::Writer& writer = *it->second.file.writer;
  FERRY_RETURN_IF_ERROR(writer.Write(batch));
  if (writer.EstimatedSize() >= sink_->options().target_file_bytes) {
    return CloseFile(key, /*hand_over=*/true);
  }
  return Status::OK();
}

namespace {
// A writer holding less is flushed for memory only when those holding more did not free enough.
constexpr uint64_t kNotWorthFlushing = 256 << 10;
}  // namespace

Status IcebergStream::KeepWithinBuffer() {
  const IcebergOptions& o = sink_->options();
  if (open_.size() < 2) return Status::OK();
  // Over the buffer budget, the least recently written files flush their row groups and free
  // their buffers (the files stay open: no small files for memory's sake). Files of partitions
  // the rows have left (yesterday's day) go first; those being written, last.
  uint64_t buffered = closer_ ? closer_->queued_bytes() : 0;
  for (const auto& [k, f] : open_) buffered += f.file.writer->BufferedMemoryBytes();
  if (buffered <= o.write_buffer_bytes) return Status::OK();
  // Writers holding little are left for a second pass (a tiny row group costs more than it
  // frees), taken only when the first did not free enough (a small budget over many files).
  for (const uint64_t worth : {kNotWorthFlushing, uint64_t{1}}) {
    for (auto it = lru_.rbegin(); it != lru_.rend() && buffered > o.write_buffer_bytes / 2; ++it) {
      parquet::Writer& w = *open_.at(*it).file.writer;
      const uint64_t n = w.BufferedMemoryBytes();
      if (n < worth || w.rows_written() == 0) continue;
      FERRY_RETURN_IF_ERROR(w.FlushAndRelease());
      buffered -= std::min(buffered, n);
      buffered += w.BufferedMemoryBytes();
    }
  }
  // Still over: what the files' streams hold (an object store's parts, sent whole or on close).
  while (buffered > o.write_buffer_bytes && open_.size() > 1) {
    const std::string victim = lru_.back();
    buffered -= std::min(buffered, open_.at(victim).file.writer->BufferedMemoryBytes());
    FERRY_RETURN_IF_ERROR(CloseFile(victim, /*hand_over=*/false));  // frees its memory now
  }
  return Status::OK();
}

namespace {
// A file is closed by the closer only if its buffers are at most this share of write_buffer,
// and the files waiting for the closer hold at most twice that (what the closer adds to memory).
constexpr uint64_t kHandOverShare = 16;
}  // namespace

Status IcebergStream::CloseFile(const std::string& key, bool hand_over) {
  auto it = open_.find(key);
  if (it == open_.end()) return Status::OK();
  DataFileInProgress f = std::move(it->second.file);
  lru_.erase(it->second.lru);
  open_.erase(it);
  const uint64_t budget = sink_->options().write_buffer_bytes;
  if (hand_over && f.writer->BufferedMemoryBytes() <= budget / kHandOverShare) {
    if (!closer_)
      closer_ = std::make_unique<FileCloser>(&table_->io(), 2 * budget / kHandOverShare);
    return closer_->Submit(std::move(f));
  }
  FERRY_ASSIGN_OR_RETURN(lake::DataFile file, FinishDataFile(table_->io(), std::move(f)));
  pending_.push_back(std::move(file));
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
    FERRY_ASSIGN_OR_RETURN(auto out,
                           table_->io().NewFile(delete_uri_, lake::FileIO::Durability::kOnPersist));
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
  f.spec_id = delete_spec_id_;
  f.equality_ids = schema_->identifier_field_ids;
  pending_deletes_.push_back(std::move(f));
  return Status::OK();
}

uint64_t IcebergStream::pending_rows() const {
  uint64_t n = closer_ ? closer_->rows() : 0;
  for (const auto& [k, f] : open_) n += f.file.writer->rows_written();
  for (const auto& f : pending_) n += static_cast<uint64_t>(f.record_count);
  return n;
}

bool IcebergStream::LoadCommitDue() const {
  // The bytes written since the last commit: a partitioned table's spread over several files.
  uint64_t bytes = closer_ ? closer_->bytes() : 0;
  for (const auto& [k, f] : open_) bytes += f.file.writer->EstimatedSize();
  for (const auto& f : pending_) bytes += static_cast<uint64_t>(f.file_size_bytes);
  return open_.empty() || bytes >= sink_->options().target_file_bytes / 2;
}

Status IcebergStream::CloseOpenFile() {
  // Closed here while the closer finishes what it was handed.
  while (!open_.empty()) {
    FERRY_RETURN_IF_ERROR(CloseFile(open_.begin()->first, /*hand_over=*/false));
  }
  return closer_ ? closer_->Wait(&pending_) : Status::OK();
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
  // The files were placed unsynced: one flush for all of them before any metadata names them.
  std::vector<std::string> written;
  written.reserve(pending_.size() + pending_deletes_.size());
  for (const auto& f : pending_) written.push_back(f.path);
  for (const auto& f : pending_deletes_) written.push_back(f.path);
  FERRY_RETURN_IF_ERROR(table_->io().Persist(written));
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
  if (closer_) (void)closer_->Wait(&pending_);  // what it closed is deleted below
  for (auto& [k, f] : open_) {
    (void)f.file.writer->Close();
    (void)table_->io().Delete(f.file.uri);
  }
  open_.clear();
  lru_.clear();
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
