// Iceberg manifests and manifest lists (format v2), written as Avro container files whose
// embedded schemas carry every "field-id", and read back by field id so that files from other
// writers (older Java field names) are understood too. A manifest holds the files of one
// partition spec: each entry's partition tuple is a record typed by the spec's result types, and
// the manifest list carries each manifest's partition field summaries (null and NaN flags, lower
// and upper bounds) so that engines prune manifests without opening them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/partition.h"
#include "ferry/types/data_type.h"

namespace ferry::lake {

enum class FileContent : int32_t { kData = 0, kPositionDeletes = 1, kEqualityDeletes = 2 };

struct DataFile {
  FileContent content = FileContent::kData;
  std::string path;  // URI
  std::string format = "PARQUET";
  int32_t spec_id = 0;       // the partition spec the file was written for
  PartitionTuple partition;  // one value per field of that spec
  int64_t record_count = 0;
  int64_t file_size_bytes = 0;
  std::map<int32_t, int64_t> column_sizes;
  std::map<int32_t, int64_t> value_counts;
  std::map<int32_t, int64_t> null_value_counts;
  std::map<int32_t, int64_t> nan_value_counts;
  std::map<int32_t, std::string> lower_bounds;
  std::map<int32_t, std::string> upper_bounds;
  std::vector<int64_t> split_offsets;
  std::vector<int32_t> equality_ids;
  std::optional<int32_t> sort_order_id;
};

enum class EntryStatus : int32_t { kExisting = 0, kAdded = 1, kDeleted = 2 };

struct ManifestEntry {
  EntryStatus status = EntryStatus::kAdded;
  std::optional<int64_t> snapshot_id;
  std::optional<int64_t> sequence_number;       // null for ADDED: inherited from the list
  std::optional<int64_t> file_sequence_number;  // likewise
  DataFile file;
};

// A manifest's summary of one partition field over its files.
struct FieldSummary {
  bool contains_null = false;
  std::optional<bool> contains_nan;
  std::optional<std::string> lower_bound;  // single-value serialization
  std::optional<std::string> upper_bound;
};

// One entry of a manifest list.
struct ManifestFile {
  std::string path;
  int64_t length = 0;
  int32_t partition_spec_id = 0;
  int32_t content = 0;               // 0 data, 1 deletes
  int64_t sequence_number = -1;      // -1: a new manifest; the commit assigns its number
  int64_t min_sequence_number = -1;  // likewise
  int64_t added_snapshot_id = 0;
  int32_t added_files_count = 0;
  int32_t existing_files_count = 0;
  int32_t deleted_files_count = 0;
  int64_t added_rows_count = 0;
  int64_t existing_rows_count = 0;
  int64_t deleted_rows_count = 0;
  std::vector<FieldSummary> partitions;  // one per field of the manifest's spec
};

// Writes a manifest of `entries` (all data files, or all delete files) for `snapshot_id`, every
// file of partition spec `spec` (whose result types `schema` gives). kInvalidArgument when a
// file's spec or tuple does not fit `spec`.
Result<ManifestFile> WriteManifest(FileIO& io, const std::string& uri, const Schema& schema,
                                   const PartitionSpec& spec, int64_t snapshot_id, int32_t content,
                                   const std::vector<ManifestEntry>& entries);

// Writes a manifest list. New manifests (sequence_number -1) get `sequence_number`, and so does
// their min_sequence_number unless it is set (>= 0).
Result<int64_t> WriteManifestList(FileIO& io, const std::string& uri, int64_t snapshot_id,
                                  std::optional<int64_t> parent_snapshot_id,
                                  int64_t sequence_number, std::vector<ManifestFile> manifests);

Result<std::vector<ManifestFile>> ReadManifestList(FileIO& io, const std::string& uri);
// Entries with sequence numbers resolved (inherited ones filled from `manifest`), each file's
// spec_id that of the manifest and its partition tuple read by the partition fields' ids.
Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io, const ManifestFile& manifest);

}  // namespace ferry::lake
