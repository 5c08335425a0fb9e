// libFuzzer target: arbitrary bytes as a COPY (FORMAT binary) stream of a table with one column of
// every wire form and arrays of some. The decoder must return a Status for anything, never crash or
// over-read. The first input byte picks where the stream is split into two Feed calls.
#include <cstddef>
#include <cstdint>

#include "ferry/clients/postgres/copy_binary.h"

using ferry::DataType;
using ferry::pg::CopyBinaryDecoder;
using ferry::pg::CopyField;
using ferry::pg::PgArrayOf;
using ferry::pg::PgWire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::pair<PgWire, DataType>> kColumns = {
      {PgWire::kBool, DataType::Boolean()},
      {PgWire::kInt2, DataType::Int32()},
      {PgWire::kInt4, DataType::Int32()},
      {PgWire::kInt8, DataType::Int64()},
      {PgWire::kOid, DataType::Int64()},
      {PgWire::kFloat4, DataType::Float32()},
      {PgWire::kFloat8, DataType::Float64()},
      {PgWire::kNumericDecimal, DataType::Decimal(38, 10)},
      {PgWire::kNumericText, DataType::String()},
      {PgWire::kText, DataType::String()},
      {PgWire::kBytea, DataType::Binary()},
      {PgWire::kJsonb, DataType::String()},
      {PgWire::kDate, DataType::Date()},
      {PgWire::kTime, DataType::Time()},
      {PgWire::kTimeTz, DataType::String()},
      {PgWire::kTimestamp, DataType::Timestamp()},
      {PgWire::kTimestampTz, DataType::TimestampTz()},
      {PgWire::kInterval, DataType::String()},
      {PgWire::kUuid, DataType::Uuid()},
      {PgWire::kNumericDecimal, DataType::Decimal(4, 4)},
      // Arrays (array_send) of a fixed-width, a variable-width and a checked element type.
      {PgArrayOf(PgWire::kInt4), DataType::List(DataType::Int32(), false, 100)},
      {PgArrayOf(PgWire::kText), DataType::List(DataType::String(), false, 101)},
      {PgArrayOf(PgWire::kNumericDecimal), DataType::List(DataType::Decimal(10, 2), false, 102)},
      {PgArrayOf(PgWire::kUuid), DataType::List(DataType::Uuid(), false, 103)},
  };
  if (size == 0) return 0;
  auto schema = std::make_shared<ferry::Schema>();
  std::vector<CopyField> fields = {{"ctid", PgWire::kTid, -1}};
  for (size_t i = 0; i < kColumns.size(); ++i) {
    schema->fields.push_back(ferry::Field{int32_t(i + 1), "c", kColumns[i].second, false, ""});
    fields.push_back({"c", kColumns[i].first, int(i)});
  }
  ferry::Batch batch(schema);
  CopyBinaryDecoder dec(fields);
  size_t split = data[0] % size;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  split = split > in.size() ? in.size() : split;
  if (dec.Feed(in.substr(0, split), &batch).ok() && dec.Feed(in.substr(split), &batch).ok()) {
    (void)dec.Finish();
  }
  // Every column holds one value per decoded row (or a partial tuple ended in an error).
  return 0;
}
