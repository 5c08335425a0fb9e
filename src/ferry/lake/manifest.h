// Iceberg manifests and manifest lists (format v2, unpartitioned tables), written as Avro
// container files whose embedded schemas carry every "field-id", and read back by field id so
// that files from other writers (older Java field names) are understood too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/file_io.h"
#include "ferry/types/data_type.h"

namespace ferry::lake {

enum class FileContent : int32_t { kData = 0, kPositionDeletes = 1, kEqualityDeletes = 2 };

struct DataFile {
  FileContent content = FileContent::kData;
  std::string path;  // URI
  std::string format = "PARQUET";
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
};

// Writes a manifest of `entries` (all data files, or all delete files) for `snapshot_id`.
Result<ManifestFile> WriteManifest(FileIO& io, const std::string& uri, const Schema& schema,
                                   int64_t snapshot_id, int32_t content,
                                   const std::vector<ManifestEntry>& entries);

// Writes a manifest list. New manifests (sequence_number -1) get `sequence_number`, and so does
// their min_sequence_number unless it is set (>= 0).
Result<int64_t> WriteManifestList(FileIO& io, const std::string& uri, int64_t snapshot_id,
                                  std::optional<int64_t> parent_snapshot_id,
                                  int64_t sequence_number, std::vector<ManifestFile> manifests);

Result<std::vector<ManifestFile>> ReadManifestList(FileIO& io, const std::string& uri);
// Entries with sequence numbers resolved (inherited ones filled from `manifest`).
Result<std::vector<ManifestEntry>> ReadManifest(FileIO& io, const ManifestFile& manifest);

}  // namespace ferry::lake
