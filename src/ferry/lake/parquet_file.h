// The manifest entry of a Parquet file ferry wrote: its path, counts, sizes and the Iceberg column
// metrics (value, null and NaN counts, bounds) from the writer's footer.
#pragma once

#include <string>

#include "ferry/format/parquet/writer.h"
#include "ferry/lake/manifest.h"

namespace ferry::lake {

DataFile DataFileOf(const std::string& uri, const parquet::FileMetrics& metrics);

}  // namespace ferry::lake
