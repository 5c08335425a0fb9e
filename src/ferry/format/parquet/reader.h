// Parquet file reader: turns the files ferry's writer produces back into columnar Batches, one
// row group at a time, so that memory stays bounded by one row group (its column chunks' bytes and
// its decoded values) whatever the file's size. Compaction reads data and delete files with it.
//
// What it reads: primitive columns and 3-level LIST groups of primitive elements (as the writer
// writes them; the list group is matched by its field id, its element's id must be the table's);
// data pages v1 and v2;
// PLAIN, PLAIN_DICTIONARY and RLE_DICTIONARY values (and RLE booleans); RLE/bit-packed hybrid
// definition levels (and repetition levels of lists); uncompressed, Snappy and zstd pages.
// Anything else — another codec or encoding, other nested columns (structs, maps, 2-level lists),
// an external column chunk — is kNotSupported naming the column and what
// it uses. Bytes that do not parse (a truncated or corrupted file) are kCorruption naming the file
// and what was wrong; the reader never reads outside the file's bytes and never crashes on them.
//
// Columns are matched by Parquet field_id against the requested Schema's field ids, never by
// name. A field the file does not have reads as NULL (a column added to the table after the file
// was written); a required field the file lacks is kCorruption. Values convert to the field's
// type where Iceberg allows the change without rewriting: INT32 into long, FLOAT into double, any
// decimal storage (INT32, INT64, FIXED_LEN_BYTE_ARRAY, BYTE_ARRAY) into a decimal of the same
// scale; MILLIS and NANOS timestamps are converted to micros. Other combinations are
// kNotSupported naming the column, the file's type and the table's type.
//
// Thread-safety: a Reader is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/base/io.h"
#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::parquet {

// Files are read through ferry::RandomAccessFile (base/io.h): whoever opens the file (lake::FileIO
// for a table's files) decides where the bytes come from.

// Bytes in memory (tests, fuzzing).
std::unique_ptr<RandomAccessFile> MemoryFile(std::string data, std::string name = "(memory)");

struct ReaderOptions {
  // Limits that turn absurd sizes in a corrupted header into kCorruption instead of an attempt
  // to allocate them: the uncompressed bytes of one page, and the values one page may claim.
  uint64_t max_page_bytes = 1ull << 31;
  uint64_t max_page_values = 1ull << 31;
  // Rows one row group may declare (a column the file lacks is filled with that many NULLs).
  uint64_t max_row_group_rows = 1ull << 31;
};

class Reader {
 public:
  // Reads and checks the footer, and resolves `schema`'s fields against the file's columns.
  static Result<std::unique_ptr<Reader>> Open(std::unique_ptr<RandomAccessFile> file,
                                              std::shared_ptr<const Schema> schema,
                                              ReaderOptions options = {});
  virtual ~Reader() = default;

  virtual const std::shared_ptr<const Schema>& schema() const = 0;
  virtual uint64_t num_rows() const = 0;
  virtual size_t num_row_groups() const = 0;
  virtual uint64_t row_group_rows(size_t index) const = 0;
  virtual const std::vector<std::pair<std::string, std::string>>& key_value_metadata() const = 0;

  // Replaces the rows of *batch (whose schema must be the reader's) with row group `index`'s.
  // Reading one row group reads only its column chunks' bytes.
  virtual Status ReadRowGroup(size_t index, Batch* batch) = 0;
};

// Appends row `row` of src (its value, or NULL) to dst; both columns have the same type.
void AppendValue(const Column& src, size_t row, Column* dst);

}  // namespace ferry::parquet
