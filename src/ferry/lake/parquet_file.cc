#include "ferry/lake/parquet_file.h"

namespace ferry::lake {

DataFile DataFileOf(const std::string& uri, const parquet::FileMetrics& m) {
  DataFile f;
  f.path = uri;
  f.record_count = static_cast<int64_t>(m.record_count);
  f.file_size_bytes = static_cast<int64_t>(m.file_size_bytes);
  for (const auto& c : m.columns) {
    f.column_sizes[c.field_id] = static_cast<int64_t>(c.compressed_bytes);
    f.value_counts[c.field_id] = static_cast<int64_t>(c.value_count);
    f.null_value_counts[c.field_id] = static_cast<int64_t>(c.null_count);
    if (c.nan_count) f.nan_value_counts[c.field_id] = static_cast<int64_t>(*c.nan_count);
    if (c.lower_bound) f.lower_bounds[c.field_id] = *c.lower_bound;
    if (c.upper_bound) f.upper_bounds[c.field_id] = *c.upper_bound;
  }
  f.split_offsets = m.split_offsets;
  return f;
}

}  // namespace ferry::lake
