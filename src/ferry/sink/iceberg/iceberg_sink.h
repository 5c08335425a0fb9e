// The Iceberg sink: writes a stream's batches as Parquet data files and commits them, together
// with the pipeline's progress marker, in ONE catalog commit (the marker is a table property,
// keyed by pipeline, set in the same metadata update, and mirrored in the snapshot summary).
//
// Guarantee: exactly-once. A commit either lands with its marker or not at all; on restart the
// engine compares markers with the state file and skips what landed.
//
// Partitioned tables: rows go to one open data file per partition of the table's default spec
// (at most max_open_files open at once, the least recently written closed first; while the open
// files' buffers exceed write_buffer, the least recently written flush a row group); equality
// deletes are written with the table's unpartitioned spec, so they apply to every partition and a
// row whose update moves it to another partition loses its old version wherever it lives.
// `partition_by` terms that differ from the default spec add a new spec (partition evolution):
// files already written keep theirs.
//
// Thread-safety: an IcebergSink may be shared by stream writers on several threads (the catalog
// serializes); each IcebergStream is used by one thread.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/config/config.h"
#include "ferry/format/parquet/writer.h"
#include "ferry/lake/table.h"
#include "ferry/sink/iceberg/file_closer.h"
#include "ferry/sink/iceberg/warehouse.h"
#include "ferry/sink/sink.h"

namespace ferry::sink {

class IcebergStream;

class IcebergSink : public Sink {
 public:
  // Opens the destination's warehouse (IcebergWarehouse::Open: its keys, its errors).
  static Result<std::unique_ptr<IcebergSink>> Open(config::DestinationConfig& cfg,
                                                   const std::string& pipeline);

  const IcebergOptions& options() const { return warehouse_->options(); }
  std::string Describe() const override;
  std::string Guarantee() const override {
    return "exactly-once (data and progress marker in one Iceberg catalog commit)";
  }
  std::string TableName(const std::string& stream) const override {
    return options().ns + "." + stream;
  }
  lake::Catalog* catalog() { return warehouse_->catalog(); }
  // The table property holding this pipeline's marker.
  std::string MarkerKey() const { return "ferry.marker." + pipeline_; }
  const std::string& pipeline() const { return pipeline_; }

  // Loads the table for `table` (creating it with `source_schema` when missing) and returns a
  // writer whose schema carries the table's field ids.
  // `replacing`: the stream's commits replace the table's rows (full refresh), so any schema
  // change is allowed; otherwise only Iceberg's evolutions are (see lake::Table::AssignFieldIds).
  Status SetPartitioning(const std::string& stream,
                         const std::optional<std::vector<std::string>>& terms) override;
  // How `terms` lay out the table of `table` over `source_schema`'s columns ("unpartitioned" for
  // none); kInvalidArgument naming the table and the term that does not fit.
  static Result<std::string> DescribeTerms(const std::string& table,
                                           const std::vector<std::string>& terms,
                                           const Schema& source_schema);
  Result<std::string> DescribePartitioning(const std::string& table,
                                           const Schema& source_schema) override;
  Result<std::unique_ptr<SinkStream>> OpenStream(const std::string& table,
                                                 const Schema& source_schema,
                                                 bool replacing) override;
  // The marker of this pipeline in `table`, or null when the table or marker does not exist.
  Result<Json> ReadMarker(const std::string& table) override;
  // Reads main's head, as any Iceberg reader sees it (deletes applied).
  Result<std::unique_ptr<TableReader>> OpenReader(const std::string& table) override;
  Result<std::string> TableLocationOf(const std::string& table);
  Status ProbeStorage() override { return warehouse_->ProbeStorage(); }

 private:
  IcebergSink() = default;
  // Makes the spec `terms` ask for (or the table's own) the table's default, and makes sure an
  // unpartitioned spec exists for global equality deletes; returns {write spec, delete spec}.
  Result<std::pair<lake::PartitionSpec, int32_t>> PrepareSpec(
      lake::Table& table, const Schema& schema,
      const std::optional<std::vector<std::string>>& terms);

  std::unique_ptr<IcebergWarehouse> warehouse_;
  std::string pipeline_;
  std::map<std::string, std::optional<std::vector<std::string>>> partitioning_;  // by stream
};

class IcebergStream : public SinkStream {
 public:
  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  lake::Table& table() { return *table_; }
  // The marker as of the last load of the table.
  Json Marker() const override;

  // Appends rows to the open data file, rolling to a new file at the target size.
  // A load's files go to the branch named after its run, created by its first commit.
  Status StartLoad(const std::string&) override { return Status::OK(); }
  Status Write(const Batch& batch) override;
  // Upserts: rows that replace any row with the same key already in the table. The rows go to
  // the data file and their keys to an equality-delete file committed in the same snapshot, so
  // older versions disappear and these rows stay. A key must appear at most once per commit.
  // kInvalidArgument when the table has no identifier fields (no primary key).
  Status WriteUpserts(const Batch& batch) override;
  // Deletes by key: only the key columns of `batch` are read (the rest may be NULL); they go to
  // the equality-delete file of the next commit.
  Status WriteDeleteKeys(const Batch& batch) override;
  uint64_t pending_rows() const override;
  // Once the open file holds half the target size (target_file_size): the files of a load are
  // then between half and all of it, and a crash reads again at most 1.5 times it.
  bool LoadCommitDue() const override;
  // Rows or deletes written since the last commit.
  bool HasPending() const override {
    return !open_.empty() || delete_writer_ || !pending_.empty() || !pending_deletes_.empty();
  }

  // Closes the open files and commits them: a load's on the branch named after its run (the
  // load stays invisible to readers of main), changes on main.
  Result<CommitResult> Commit(const std::string& load, const Json& marker,
                              const std::map<std::string, std::string>& summary,
                              const MarkerCheck& already_landed) override;
  // Makes the load's branch the table's main, sets the marker, removes the branch.
  Result<CommitResult> Publish(const std::string& load, const Json& marker,
                               const MarkerCheck& already_landed) override;
  // Deletes files written but not committed (after a failed commit or a cancelled chunk).
  void DiscardPending() override;
  Totals totals() const override { return totals_; }

 private:
  friend class IcebergSink;
  IcebergStream(IcebergSink* sink, std::unique_ptr<lake::Table> t, std::shared_ptr<const Schema> s,
                lake::Partitioner partitioner, int32_t delete_spec_id)
      : sink_(sink),
        table_(std::move(t)),
        schema_(std::move(s)),
        partitioner_(std::move(partitioner)),
        delete_spec_id_(delete_spec_id) {}
  // A data file open for one partition (the only one, of an unpartitioned spec).
  struct OpenFile {
    DataFileInProgress file;
    std::list<std::string>::iterator lru;  // its place in lru_
  };
  // Writes `batch`, all of whose rows are in partition `key` (`tuple`).
  Status WriteToPartition(const std::string& key, const lake::PartitionTuple& tuple,
                          const Batch& batch);
  // While the open files' buffers exceed write_buffer: flushes the row groups of the least
  // recently written, then (an object store's parts) closes them. After each batch.
  Status KeepWithinBuffer();
  // Closes the file of partition `key`: hands it to closer_ when `hand_over` and its buffers
  // are small (a partition's file the rows have left), else here.
  Status CloseFile(const std::string& key, bool hand_over);
  Status CloseOpenFile();  // every open data file, here; then waits for closer_'s
  Status CloseDeleteFile();
  std::map<std::string, std::string> MarkerProperty(const Json& marker) const;
  std::string BranchOf(const std::string& load) const;
  lake::LandedCheck LandedFrom(const MarkerCheck& check) const;

  IcebergSink* sink_;
  std::unique_ptr<lake::Table> table_;
  std::shared_ptr<const Schema> schema_;
  lake::Partitioner partitioner_;  // of the table's default spec, which the files are written in
  int32_t delete_spec_id_ = 0;     // an unpartitioned spec: equality deletes apply everywhere
  // What the table's data files learnt about its columns (parquet::EncodingHints): a partitioned
  // table's many small files do not each build a dictionary of distinct keys to drop it.
  std::shared_ptr<parquet::EncodingHints> hints_ = std::make_shared<parquet::EncodingHints>();
  std::unordered_map<std::string, OpenFile> open_;  // by lake::PartitionKey
  std::list<std::string> lru_;                      // keys of open_, most recently written first
  // Write's scratch: a row's tuple, the rows of each partition of a batch, and a batch of them.
  struct RowGroup {
    lake::PartitionTuple tuple;
    std::string key;
    uint64_t hash = 0;  // integer-valued specs: of the tuple's values (GroupHash)
    std::vector<uint32_t> rows;
  };
  lake::PartitionTuple row_tuple_;
  std::vector<int64_t> row_ints_;  // integer-valued specs: the batch's tuples, field by field
  std::vector<uint8_t> row_int_nulls_;
  std::vector<int32_t> group_slots_;  // integer-valued specs: groups_ by hash (-1: free)
  std::vector<RowGroup> groups_;
  std::unique_ptr<Batch> part_;
  std::vector<lake::DataFile> pending_;
  // Closes the files of partitions the rows have left while the next rows are written (a table
  // with many partitions closes thousands of small files in a load). Started at the first.
  std::unique_ptr<FileCloser> closer_;
  std::shared_ptr<const Schema> key_schema_;  // identifier fields only
  std::vector<size_t> key_columns_;           // their positions in schema_
  std::unique_ptr<parquet::Writer> delete_writer_;
  std::string delete_uri_;
  std::vector<lake::DataFile> pending_deletes_;
  Totals totals_;
};

}  // namespace ferry::sink
