#include "ferry/lake/table_scan.h"

#include <algorithm>
#include <cctype>

namespace ferry::lake {
namespace {

// Position delete files: Iceberg's reserved field ids.
constexpr int32_t kDeleteFilePathId = 2147483546;
constexpr int32_t kDeletePosId = 2147483545;

Status CheckSequenceNumbers(const ManifestEntry& e, const std::string& manifest) {
  if (!e.sequence_number) {
    return Status::Corruption("manifest " + manifest + " lists " + e.file.path +
                              " without a data sequence number");
  }
  return Status::OK();
}

// A value's bytes in an equality key: a validity byte, then the fixed-width bytes or length +
// bytes. Both sides of a comparison have the same types (the table schema's).
void AppendKeyPart(const Column& col, size_t row, std::string* key) {
  if (!col.IsValid(row)) {
    key->push_back('\0');
    return;
  }
  key->push_back('\1');
  const int w = col.type().FixedWidth();
  if (w > 0) {
    key->append(reinterpret_cast<const char*>(col.fixed_data()) + row * static_cast<size_t>(w),
                static_cast<size_t>(w));
  } else {
    std::string_view v = col.GetBytes(row);
    const auto len = static_cast<uint32_t>(v.size());
    key->append(reinterpret_cast<const char*>(&len), 4);
    key->append(v);
  }
}

}  // namespace

Result<SnapshotFiles> ReadSnapshotFiles(FileIO& io, const TableMetadata& meta,
                                        int64_t snapshot_id) {
  const Json* snap = meta.FindSnapshot(snapshot_id);
  if (snap == nullptr || !snap->contains("manifest-list")) {
    return Status::Corruption("table metadata has no snapshot " + std::to_string(snapshot_id) +
                              " with a manifest list");
  }
  SnapshotFiles out;
  FERRY_ASSIGN_OR_RETURN(out.manifests, ReadManifestList(io, (*snap)["manifest-list"]));
  for (const auto& m : out.manifests) {
    FERRY_ASSIGN_OR_RETURN(auto entries, ReadManifest(io, m));
    for (const auto& e : entries) {
      if (e.status == EntryStatus::kDeleted) continue;
      FERRY_RETURN_IF_ERROR(CheckSequenceNumbers(e, m.path));
      (e.file.content == FileContent::kData ? out.data : out.deletes).push_back(e);
    }
    out.entries[m.path] = std::move(entries);
  }
  return out;
}

Result<std::unique_ptr<parquet::Reader>> OpenTableFile(FileIO& io, const DataFile& file,
                                                       std::shared_ptr<const Schema> schema) {
  std::optional<uint64_t> size;
  if (file.file_size_bytes > 0) size = static_cast<uint64_t>(file.file_size_bytes);
  FERRY_ASSIGN_OR_RETURN(auto f, io.OpenFile(file.path, size));
  return parquet::Reader::Open(std::move(f), std::move(schema));
}

// ---- deletes ----

Result<DeleteIndex> DeleteIndex::Load(FileIO& io, const Schema& schema,
                                      const std::vector<ManifestEntry>& delete_files) {
  DeleteIndex d;
  std::map<std::pair<std::vector<int32_t>, std::string>, size_t> set_of;
  for (const auto& e : delete_files) {
    const int64_t seq = *e.sequence_number;
    const DataFile& f = e.file;
    if (f.content == FileContent::kEqualityDeletes) {
      if (f.equality_ids.empty()) {
        return Status::Corruption("equality delete file " + f.path + " has no equality_ids");
      }
      auto key_schema = std::make_shared<Schema>();
      std::vector<size_t> data_columns;
      for (int32_t id : f.equality_ids) {
        const Field* field = schema.FindById(id);
        if (field == nullptr) {
          return Status::NotSupported(
              "equality delete file " + f.path + " deletes by field id " + std::to_string(id) +
              ", which the table's current schema no longer has; ferry cannot apply it");
        }
        Field k = *field;
        k.required = false;  // a NULL key matches IS NULL
        key_schema->fields.push_back(k);
        for (size_t i = 0; i < schema.fields.size(); ++i) {
          if (schema.fields[i].id == id) data_columns.push_back(i);
        }
      }
      const std::string scope = DeleteScope(f);
      auto [it, inserted] =
          set_of.emplace(std::make_pair(f.equality_ids, scope), d.equality_.size());
      if (inserted) {
        auto s = std::make_unique<EqualitySet>();
        s->ids = f.equality_ids;
        s->scope = scope;
        s->data_columns = data_columns;
        d.equality_.push_back(std::move(s));
      }
      EqualitySet& set = *d.equality_[it->second];
      set.highest_seq = std::max(set.highest_seq, seq);
      FERRY_ASSIGN_OR_RETURN(auto reader, OpenTableFile(io, f, key_schema));
      Batch b(key_schema);
      std::string key;
      for (size_t g = 0; g < reader->num_row_groups(); ++g) {
        FERRY_RETURN_IF_ERROR(reader->ReadRowGroup(g, &b));
        for (size_t r = 0; r < b.num_rows(); ++r) {
          key.clear();
          for (size_t c = 0; c < b.num_columns(); ++c) AppendKeyPart(b.column(c), r, &key);
          int64_t& m = set.max_seq[key];
          m = std::max(m, seq);
        }
      }
    } else if (f.content == FileContent::kPositionDeletes) {
      auto pos_schema = std::make_shared<Schema>();
      pos_schema->fields = {{kDeleteFilePathId, "file_path", DataType::String(), true, ""},
                            {kDeletePosId, "pos", DataType::Int64(), true, ""}};
      FERRY_ASSIGN_OR_RETURN(auto reader, OpenTableFile(io, f, pos_schema));
      Batch b(pos_schema);
      std::set<std::string>& targets = d.position_targets_[f.path];
      for (size_t g = 0; g < reader->num_row_groups(); ++g) {
        FERRY_RETURN_IF_ERROR(reader->ReadRowGroup(g, &b));
        for (size_t r = 0; r < b.num_rows(); ++r) {
          std::string target(b.column(0).GetBytes(r));
          int64_t& m = d.positions_[target][b.column(1).values<int64_t>()[r]];
          m = std::max(m, seq);
          targets.insert(std::move(target));
        }
      }
    } else {
      return Status::Internal("a data file among the delete files: " + f.path);
    }
  }
  return d;
}

std::string DeleteScope(const DataFile& file) {
  if (file.partition.empty()) return std::string();
  return std::to_string(file.spec_id) + ":" + PartitionKey(file.partition);
}

bool DeleteIndex::AnyApplies(const DataFile& file, int64_t seq) const {
  const std::string scope = DeleteScope(file);
  for (const auto& s : equality_) {
    if (s->highest_seq > seq && (s->scope.empty() || s->scope == scope)) return true;
  }
  auto it = positions_.find(file.path);
  if (it == positions_.end()) return false;
  for (const auto& [pos, dseq] : it->second) {
    if (dseq >= seq) return true;
  }
  return false;
}

const std::set<std::string>* DeleteIndex::PositionTargets(const std::string& delete_file) const {
  auto it = position_targets_.find(delete_file);
  return it == position_targets_.end() ? nullptr : &it->second;
}

DeleteIndex::FileFilter DeleteIndex::ForFile(const DataFile& file, int64_t seq) const {
  FileFilter f;
  f.seq_ = seq;
  const std::string scope = DeleteScope(file);
  for (const auto& s : equality_) {
    if (s->highest_seq > seq && (s->scope.empty() || s->scope == scope)) {
      f.equality_.push_back(s.get());
    }
  }
  if (auto it = positions_.find(file.path); it != positions_.end()) f.positions_ = &it->second;
  return f;
}

bool DeleteIndex::FileFilter::Deleted(const Batch& batch, size_t row, int64_t pos) const {
  if (positions_ != nullptr) {
    auto p = positions_->find(pos);
    if (p != positions_->end() && p->second >= seq_) return true;
  }
  for (const EqualitySet* s : equality_) {
    key_.clear();
    for (size_t c : s->data_columns) AppendKeyPart(batch.column(c), row, &key_);
    auto m = s->max_seq.find(key_);
    if (m != s->max_seq.end() && m->second > seq_) return true;
  }
  return false;
}

// ---- the scan ----

Result<std::unique_ptr<TableScan>> TableScan::Open(FileIO& io, const TableMetadata& meta,
                                                   std::optional<int64_t> snapshot_id) {
  std::unique_ptr<TableScan> scan(new TableScan(&io));
  FERRY_ASSIGN_OR_RETURN(Schema current, meta.CurrentSchema());
  scan->schema_ = std::make_shared<const Schema>(std::move(current));
  scan->snapshot_id_ = snapshot_id ? snapshot_id : meta.BranchHead("main");
  if (!scan->snapshot_id_) return scan;
  FERRY_ASSIGN_OR_RETURN(scan->files_, ReadSnapshotFiles(io, meta, *scan->snapshot_id_));
  for (const auto& e : scan->files_.data) {
    std::string format = e.file.format;
    std::transform(format.begin(), format.end(), format.begin(), ::toupper);
    if (format != "PARQUET") {
      return Status::NotSupported("data file " + e.file.path + " is in format " + e.file.format +
                                  "; ferry reads Parquet data files only");
    }
  }
  FERRY_ASSIGN_OR_RETURN(scan->deletes_,
                         DeleteIndex::Load(io, *scan->schema_, scan->files_.deletes));
  return scan;
}

Status TableScan::Read(const std::function<Status(const Batch&)>& emit) {
  Batch in(schema_);
  Batch kept(schema_);
  for (const auto& e : files_.data) {
    FERRY_ASSIGN_OR_RETURN(auto reader, OpenTableFile(*io_, e.file, schema_));
    const DeleteIndex::FileFilter filter = deletes_.ForFile(e.file, *e.sequence_number);
    int64_t row_base = 0;
    for (size_t rg = 0; rg < reader->num_row_groups(); ++rg) {
      FERRY_RETURN_IF_ERROR(reader->ReadRowGroup(rg, &in).WithContext("reading " + e.file.path));
      const size_t n = in.num_rows();
      if (filter.empty()) {
        FERRY_RETURN_IF_ERROR(emit(in));
      } else {
        kept.Clear();
        for (size_t r = 0; r < n; ++r) {
          if (filter.Deleted(in, r, row_base + static_cast<int64_t>(r))) continue;
          for (size_t c = 0; c < in.num_columns(); ++c) {
            parquet::AppendValue(in.column(c), r, &kept.column(c));
          }
        }
        FERRY_RETURN_IF_ERROR(emit(kept));
      }
      row_base += static_cast<int64_t>(n);
    }
    if (row_base != e.file.record_count) {
      return Status::Corruption("data file " + e.file.path + " holds " + std::to_string(row_base) +
                                " rows; its manifest says " + std::to_string(e.file.record_count));
    }
  }
  return Status::OK();
}

}  // namespace ferry::lake
