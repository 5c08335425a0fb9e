// libFuzzer target: arbitrary bytes into ReadContainer. Any result is fine; a crash, sanitizer
// report, hang or unbounded allocation is a bug. Built only with -DFERRY_FUZZ=ON under clang.
//
// Two modes, picked by the first byte, so that the datum decoder is reached without the fuzzer
// having to invent a valid header first:
//   even: the remaining bytes are the whole file;
//   odd:  a fixed header (a schema using every Avro type, recursion and named references; codec
//         from bit 1) followed by the remaining bytes as the blocks.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/format/avro/avro.h"

namespace {

constexpr std::string_view kSync = "fuzz-sync-marker";

const char* kSchema = R"({"type":"record","name":"Node","namespace":"f","fields":[
  {"name":"n","type":"null"},{"name":"b","type":"boolean"},{"name":"i","type":"int"},
  {"name":"l","type":"long"},{"name":"fl","type":"float"},{"name":"d","type":"double"},
  {"name":"by","type":"bytes"},{"name":"s","type":"string"},
  {"name":"fx","type":{"type":"fixed","name":"F3","size":3}},
  {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
  {"name":"a","type":{"type":"array","items":["null","F3","long"]}},
  {"name":"m","type":{"type":"map","values":{"type":"array","logicalType":"map","items":
    {"type":"record","name":"kv","fields":[{"name":"key","type":"int"},{"name":"value","type":"bytes"}]}}}},
  {"name":"next","type":["null","Node"]}]})";

std::string Header(bool deflate) {
  ferry::avro::Encoder e;
  e.buffer().append("Obj\x01", 4);
  e.WriteBlockCount(2);
  e.WriteString("avro.schema");
  e.WriteBytes(kSchema);
  e.WriteString("avro.codec");
  e.WriteBytes(deflate ? "deflate" : "null");
  e.WriteBlockCount(0);
  e.WriteFixed(kSync);
  return e.buffer();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string input;
  if (data[0] & 1) {
    input = Header((data[0] & 2) != 0);
    input.append(rest);
    rest = input;
  }
  auto file = ferry::avro::ReadContainer(rest);
  if (file.ok()) {
    // Touch the decoded values, as a caller would.
    size_t n = file->metadata.size();
    for (const auto& r : file->records) n += r.size();
    (void)n;
  }
  return 0;
}
