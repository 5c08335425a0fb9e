// Parquet file writer for Iceberg data and delete files.
//
// Writes Parquet format 2 files readable by any engine: every schema node carries the Iceberg
// field id; REQUIRED/OPTIONAL follow Field::required; logical types follow the Iceberg spec's
// Parquet mapping (see ../shared reference: string -> BINARY+STRING, timestamp -> INT64
// TIMESTAMP(MICROS), decimal -> INT32/INT64/FIXED_LEN_BYTE_ARRAY by precision, uuid ->
// FLBA(16)+UUID). Values come in as columnar Batches (ferry/types/batch.h); memory is bounded by
// the row-group size, whatever the number of rows written.
//
// Thread-safety: a Writer is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ferry/base/io.h"
#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::parquet {

enum class Compression { kUncompressed, kSnappy, kZstd };

Result<Compression> ParseCompression(const std::string& name);  // "zstd" | "snappy" | "none"

// What the files of one table learn about its columns' values, shared by their writers through
// WriterOptions::hints: a column whose values were nearly all distinct in a chunk (keys,
// timestamps, amounts) starts its next chunks PLAIN — in whichever file of the table comes next —
// instead of building a dictionary only to drop it. That matters for partitioned tables, whose
// many small files would each build one. After each give-up the next 2 chunks start PLAIN, then
// 4, 8 … up to kMaxPlainChunks while retries keep confirming it; a chunk whose dictionary is
// worth keeping ends the streak. They also keep how well each column compressed, for the size
// estimate of a file none of whose pages is written yet. A writer without shared hints keeps its
// own. Thread-safe.
class EncodingHints {
 public:
  static constexpr int kMaxPlainChunks = 64;
  // Whether the next chunk of the column (by field id) starts PLAIN; counts that chunk.
  bool StartPlain(int32_t field_id);
  // A chunk of the column found its values nearly all distinct (or too many for a dictionary).
  void GaveUp(int32_t field_id);
  // A chunk of the column found a dictionary worth having.
  void Kept(int32_t field_id);
  // A chunk of the column was written: its pages' bytes before and after compression.
  void Compressed(int32_t field_id, uint64_t raw, uint64_t packed);
  // packed / raw over the column's written chunks (1.0 before any): what a file whose own pages
  // are all still open can expect of them (Writer::EstimatedSize).
  double Ratio(int32_t field_id);

 private:
  struct Column {
    int plain_left = 0;  // chunks still to start PLAIN
    int streak = 0;      // the length of the last run of PLAIN starts
    uint64_t raw = 0, packed = 0;
  };
  std::mutex mu_;
  std::unordered_map<int32_t, Column> columns_;
};

struct WriterOptions {
  Compression compression = Compression::kZstd;
  int zstd_level = 3;
  // A row group is flushed once its buffered, encoded size reaches this many bytes.
  uint64_t row_group_bytes = 128ull << 20;
  // A data page is cut once its encoded values reach this many bytes.
  uint64_t page_bytes = 1ull << 20;
  // Dictionary encoding (a DICTIONARY_PAGE of the chunk's distinct values in PLAIN, then
  // RLE_DICTIONARY data pages of indices) for every type but boolean. Each column chunk starts
  // with a dictionary; once it would exceed dictionary_page_bytes (its PLAIN size) the chunk falls
  // back to PLAIN for its remaining pages, as Arrow and parquet-mr do. Capped at 1 GiB.
  bool dictionary = true;
  uint64_t dictionary_page_bytes = 1ull << 20;
  // Key/value metadata written into the footer.
  std::vector<std::pair<std::string, std::string>> key_value_metadata;
  // Shared by the writers of one table's files (see EncodingHints); null: the file's own.
  std::shared_ptr<EncodingHints> hints;
};

// Per-column metrics in the form Iceberg manifests want them.
struct ColumnMetrics {
  int32_t field_id = 0;
  uint64_t value_count = 0;  // values including NULLs
  uint64_t null_count = 0;
  std::optional<uint64_t> nan_count;  // float/double columns only
  // Iceberg single-value binary serialization (little-endian ints/floats, UTF-8 strings truncated
  // to 16 code points with the upper bound incremented, big-endian decimals). Absent when the
  // column has no non-NULL, non-NaN value, or when a string upper bound cannot be incremented.
  std::optional<std::string> lower_bound;
  std::optional<std::string> upper_bound;
  uint64_t compressed_bytes = 0;  // sum of the column chunks' total_compressed_size
};

struct FileMetrics {
  uint64_t record_count = 0;
  uint64_t file_size_bytes = 0;
  std::vector<ColumnMetrics> columns;  // in schema order
  std::vector<int64_t> split_offsets;  // row-group start offsets, ascending
};

class Writer {
 public:
  // Writes the magic bytes; the schema's field ids and types define the file schema.
  static Result<std::unique_ptr<Writer>> Open(std::unique_ptr<OutputStream> out,
                                              std::shared_ptr<const Schema> schema,
                                              WriterOptions options = {});
  virtual ~Writer() = default;

  // Appends every row of `batch`, whose schema must be the writer's.
  virtual Status Write(const Batch& batch) = 0;
  // Bytes written so far plus what is buffered, its open pages and dictionaries counted at the
  // compression the column got so far: the file's size if closed now (approximately).
  virtual uint64_t EstimatedSize() const = 0;
  virtual uint64_t rows_written() const = 0;
  // Heap bytes the writer holds for buffers (capacity, not size), its stream's included: stays
  // bounded by about row_group_bytes + columns x (page_bytes + 6 x dictionary_page_bytes) plus
  // what the stream buffers, whatever the number of rows written. The zstd context is one per
  // thread, shared by every writer on it, and not counted. For memory accounting and tests.
  virtual uint64_t BufferedMemoryBytes() const { return 0; }
  // Flushes the open row group (however small) and frees the buffers, so that a writer kept open
  // while others are written (one per partition) holds almost nothing until its next Write.
  virtual Status FlushAndRelease() = 0;
  // Flushes the last row group, writes the footer, closes the stream (durably).
  virtual Result<FileMetrics> Close() = 0;
};

}  // namespace ferry::parquet
