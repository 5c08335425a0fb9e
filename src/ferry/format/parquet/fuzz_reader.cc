// libFuzzer target: arbitrary bytes as a Parquet file read with a schema of one optional column of
// every type (field ids 1..13, as a file the writer made from that schema has them). The reader
// must return a Status for anything, never crash, over-read or allocate without bound.
// Seed it with files written by the writer (e.g. from reader_test's round trips).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ferry/format/parquet/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ferry::DataType;
  static const std::shared_ptr<const ferry::Schema> kSchema = [] {
    auto s = std::make_shared<ferry::Schema>();
    const DataType types[] = {DataType::Boolean(),     DataType::Int32(),   DataType::Int64(),
                              DataType::Float32(),     DataType::Float64(), DataType::Decimal(9, 2),
                              DataType::Date(),        DataType::Time(),    DataType::Timestamp(),
                              DataType::TimestampTz(), DataType::String(),  DataType::Binary(),
                              DataType::Uuid()};
    int32_t id = 1;
    for (const auto& t : types) s->fields.push_back(ferry::Field{id++, "c", t, false, ""});
    return s;
  }();
  ferry::parquet::ReaderOptions opts;
  opts.max_page_bytes = 16u << 20;  // corrupted sizes beyond this are refused, not allocated
  opts.max_page_values = 1u << 20;
  opts.max_row_group_rows = 1u << 20;
  auto reader = ferry::parquet::Reader::Open(
      ferry::parquet::MemoryFile(std::string(reinterpret_cast<const char*>(data), size)), kSchema,
      opts);
  if (!reader.ok()) return 0;
  ferry::Batch batch(kSchema);
  for (size_t g = 0; g < (*reader)->num_row_groups() && g < 64; ++g) {
    if (!(*reader)->ReadRowGroup(g, &batch).ok()) break;
  }
  return 0;
}
