// Avro object container files, as Iceberg uses them for manifests and manifest lists.
//
// Writing: the caller encodes each datum with an Encoder, following the writer schema it passed
// (given as JSON text, stored verbatim in the header so that attributes such as "field-id"
// survive). Reading: a generic, schema-driven decoder turns each datum into JSON (records become
// objects keyed by field name, unions become the branch's value or null, bytes/fixed become
// strings of raw bytes, maps with "logicalType":"map" arrays stay arrays of {key,value} records).
// Codecs: "null" and "deflate" (raw deflate, RFC 1951, as the Avro spec requires).
//
// Thread-safety: none; one thread per writer or reader.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ferry/base/io.h"
#include "ferry/base/status.h"

namespace ferry::avro {

// Binary encoding of Avro primitives into a growing buffer.
class Encoder {
 public:
  void WriteNull() {}
  void WriteBool(bool v) { buf_.push_back(v ? 1 : 0); }
  void WriteInt(int32_t v) { WriteLong(v); }
  void WriteLong(int64_t v);  // zig-zag varint
  void WriteFloat(float v);
  void WriteDouble(double v);
  void WriteBytes(std::string_view v);  // long length + bytes
  void WriteString(std::string_view v) { WriteBytes(v); }
  void WriteFixed(std::string_view v) { buf_.append(v); }
  void WriteUnionIndex(int64_t branch) { WriteLong(branch); }
  // Arrays and maps: WriteBlockCount(n) before n items (n > 0), then WriteBlockCount(0) to end.
  void WriteBlockCount(int64_t n) { WriteLong(n); }

  std::string& buffer() { return buf_; }
  void Clear() { buf_.clear(); }

 private:
  std::string buf_;
};

enum class Codec { kNull, kDeflate };

class ContainerWriter {
 public:
  // `schema_json` is the writer schema; `metadata` adds user keys (avro.schema/avro.codec are set
  // here). Writes the header at once. kInvalidArgument: the schema is not JSON or not a schema
  // ReadContainer could decode, or a user key starts with "avro." (reserved); errors of `out`
  // (kIOError) pass through.
  static Result<std::unique_ptr<ContainerWriter>> Open(
      std::unique_ptr<OutputStream> out, const std::string& schema_json,
      const std::map<std::string, std::string>& metadata, Codec codec = Codec::kDeflate);

  // Encode one datum into datum(), then call EndDatum().
  Encoder& datum() { return datum_; }
  Status EndDatum();
  // Flushes the last block and closes the stream; returns the file's length in bytes. The stream
  // stays alive until the writer is destroyed, so a caller holding a raw pointer to a
  // StringOutputStream can take the bytes after Close().
  Result<uint64_t> Close();

 private:
  ContainerWriter() = default;
  Status FlushBlock();

  std::unique_ptr<OutputStream> out_;
  Codec codec_ = Codec::kDeflate;
  std::string sync_;
  Encoder datum_;
  std::string block_;
  int64_t block_count_ = 0;
  bool closed_ = false;
};

struct ContainerFile {
  nlohmann::json schema;                        // the writer schema from the header
  std::map<std::string, std::string> metadata;  // every header key, avro.* included
  std::vector<nlohmann::json> records;          // every datum, decoded by the writer schema
};

// Parses a whole container file. kCorruption names what is wrong (bad magic, truncated block,
// sync marker mismatch, unknown codec, datum that does not match the schema); kNotSupported means
// a valid file whose codec ferry does not read (snappy, zstandard, bzip2, xz). Bytes and fixed
// values are JSON strings holding the raw bytes (not necessarily UTF-8: dump such a json with
// error_handler_t::replace or read the std::string back). Field order within a record object is
// not kept (nlohmann::json sorts keys); the schema says the order.
Result<ContainerFile> ReadContainer(std::string_view bytes);

}  // namespace ferry::avro
