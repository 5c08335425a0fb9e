// Avro object container files: writer, schema compiler and generic reader.
//
// Layout of a container file (Avro specification, "Object Container Files"):
//   "Obj" 0x01 | metadata: map<bytes> | 16-byte sync marker | block*
//   block = long record count | long byte size | data (codec-compressed) | sync marker
#include "ferry/format/avro/avro.h"

#include <zlib.h>

#include <bit>
#include <cstring>
#include <exception>
#include <limits>
#include <random>
#include <utility>

namespace ferry::avro {
namespace {

constexpr std::string_view kMagic("Obj\x01", 4);
constexpr size_t kSyncSize = 16;
// A block is flushed once its encoded data reaches this size (the Java writer's default).
constexpr size_t kBlockTargetBytes = 64 * 1024;
// Schema nesting and datum recursion (recursive schemas) stop here, so the stack stays bounded.
constexpr int kMaxDepth = 128;
// Values that take no bytes (null, empty records) cannot be bounded by the input size; a file may
// decode at most this many of them.
constexpr uint64_t kMaxZeroWidthValues = uint64_t{1} << 20;
// A deflate block may not inflate beyond this (deflate's own ratio limit is about 1032:1).
constexpr size_t kMaxInflatedBlockBytes = size_t{256} << 20;

std::string ToStr(int64_t v) { return std::to_string(v); }

// ---------------------------------------------------------------------------------------------
// Schema

enum class Kind {
  kNull,
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kBytes,
  kString,
  kFixed,
  kEnum,
  kArray,
  kMap,
  kRecord,
  kUnion,
};

struct Node {
  Kind kind = Kind::kNull;
  std::string name;                      // full name of a record, enum or fixed
  int64_t fixed_size = 0;                // fixed
  std::vector<std::string> symbols;      // enum
  std::vector<const Node*> children;     // array items, map values, union branches, record fields
  std::vector<std::string> field_names;  // record, parallel to children
};

bool PrimitiveKind(std::string_view name, Kind* kind) {
  static constexpr std::pair<std::string_view, Kind> kPrimitives[] = {
      {"null", Kind::kNull},   {"boolean", Kind::kBoolean}, {"int", Kind::kInt},
      {"long", Kind::kLong},   {"float", Kind::kFloat},     {"double", Kind::kDouble},
      {"bytes", Kind::kBytes}, {"string", Kind::kString},
  };
  for (const auto& [n, k] : kPrimitives) {
    if (n == name) {
      *kind = k;
      return true;
    }
  }
  return false;
}

// Compiles schema JSON into a graph of Nodes. Named types may be referenced after their
// definition (also from inside themselves, for recursive records); names follow the spec's
// namespace rules: a dotted name is a full name, otherwise the enclosing namespace applies.
class Schema {
 public:
  Status Compile(const nlohmann::json& j) {
    FERRY_ASSIGN_OR_RETURN(root_, CompileNode(j, "", 0));
    return Status::OK();
  }
  const Node* root() const { return root_; }

 private:
  Node* NewNode(Kind kind) {
    nodes_.push_back(std::make_unique<Node>());
    nodes_.back()->kind = kind;
    return nodes_.back().get();
  }

  Result<const Node*> Resolve(const std::string& name, const std::string& ns) {
    if (name.find('.') == std::string::npos && !ns.empty()) {
      auto it = named_.find(ns + "." + name);
      if (it != named_.end()) return it->second;
    }
    auto it = named_.find(name);
    if (it != named_.end()) return it->second;
    return Status::Corruption("schema references unknown type '" + name + "'");
  }

  // Computes the full name of a named type and the namespace its children inherit.
  Result<std::string> FullName(const nlohmann::json& j, const std::string& ns,
                               std::string* child_ns) {
    auto name_it = j.find("name");
    if (name_it == j.end() || !name_it->is_string() ||
        name_it->get_ref<const std::string&>().empty()) {
      return Status::Corruption("schema: a named type has no \"name\"");
    }
    const std::string& name = name_it->get_ref<const std::string&>();
    std::string full;
    if (name.find('.') != std::string::npos) {
      full = name;
    } else {
      std::string space = ns;
      auto ns_it = j.find("namespace");
      if (ns_it != j.end() && ns_it->is_string()) space = ns_it->get<std::string>();
      full = space.empty() ? name : space + "." + name;
    }
    size_t dot = full.rfind('.');
    *child_ns = dot == std::string::npos ? "" : full.substr(0, dot);
    if (named_.count(full) != 0) {
      return Status::Corruption("schema defines type '" + full + "' twice");
    }
    return full;
  }

  Result<const Node*> CompileNode(const nlohmann::json& j, const std::string& ns, int depth) {
    if (depth > kMaxDepth) {
      return Status::Corruption("schema nests deeper than " + std::to_string(kMaxDepth) +
                                " levels");
    }
    if (j.is_string()) {
      const std::string& name = j.get_ref<const std::string&>();
      Kind kind = Kind::kNull;
      if (PrimitiveKind(name, &kind)) return static_cast<const Node*>(NewNode(kind));
      return Resolve(name, ns);
    }
    if (j.is_array()) {
      if (j.empty()) return Status::Corruption("schema has a union with no branches");
      Node* u = NewNode(Kind::kUnion);
      for (const auto& branch : j) {
        FERRY_ASSIGN_OR_RETURN(const Node* b, CompileNode(branch, ns, depth + 1));
        u->children.push_back(b);
      }
      return static_cast<const Node*>(u);
    }
    if (!j.is_object()) {
      return Status::Corruption("schema element is neither a type name, a union nor an object: " +
                                j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    auto type_it = j.find("type");
    if (type_it == j.end()) return Status::Corruption("schema object has no \"type\"");
    if (!type_it->is_string()) {
      // {"type": {...}} or {"type": [...]}: not canonical, but unambiguous.
      return CompileNode(*type_it, ns, depth + 1);
    }
    const std::string& type = type_it->get_ref<const std::string&>();
    Kind kind = Kind::kNull;
    // Logical types ("date", "timestamp-micros", "decimal", ...) are read as their underlying type.
    if (PrimitiveKind(type, &kind)) return static_cast<const Node*>(NewNode(kind));

    if (type == "record" || type == "error") {
      std::string child_ns;
      FERRY_ASSIGN_OR_RETURN(std::string full, FullName(j, ns, &child_ns));
      Node* r = NewNode(Kind::kRecord);
      r->name = full;
      named_[full] = r;  // before the fields, so that a field may refer to its own record
      auto fields = j.find("fields");
      if (fields == j.end() || !fields->is_array()) {
        return Status::Corruption("schema: record '" + full + "' has no \"fields\" array");
      }
      for (const auto& f : *fields) {
        auto fname = f.is_object() ? f.find("name") : f.end();
        if (!f.is_object() || fname == f.end() || !fname->is_string()) {
          return Status::Corruption("schema: record '" + full + "' has a field without a name");
        }
        const std::string& field_name = fname->get_ref<const std::string&>();
        for (const auto& existing : r->field_names) {
          if (existing == field_name) {
            return Status::Corruption("schema: record '" + full + "' has two fields named '" +
                                      field_name + "'");
          }
        }
        auto ftype = f.find("type");
        if (ftype == f.end()) {
          return Status::Corruption("schema: field '" + full + "." + field_name +
                                    "' has no \"type\"");
        }
        auto compiled = CompileNode(*ftype, child_ns, depth + 1);
        if (!compiled.ok()) {
          return compiled.status().WithContext("field '" + full + "." + field_name + "'");
        }
        r->field_names.push_back(field_name);
        r->children.push_back(*compiled);
      }
      return static_cast<const Node*>(r);
    }
    if (type == "enum") {
      std::string child_ns;
      FERRY_ASSIGN_OR_RETURN(std::string full, FullName(j, ns, &child_ns));
      Node* e = NewNode(Kind::kEnum);
      e->name = full;
      auto symbols = j.find("symbols");
      if (symbols == j.end() || !symbols->is_array()) {
        return Status::Corruption("schema: enum '" + full + "' has no \"symbols\" array");
      }
      for (const auto& s : *symbols) {
        if (!s.is_string()) {
          return Status::Corruption("schema: enum '" + full +
                                    "' has a symbol that is not a string");
        }
        e->symbols.push_back(s.get<std::string>());
      }
      named_[full] = e;
      return static_cast<const Node*>(e);
    }
    if (type == "fixed") {
      std::string child_ns;
      FERRY_ASSIGN_OR_RETURN(std::string full, FullName(j, ns, &child_ns));
      auto size = j.find("size");
      if (size == j.end() || !size->is_number_integer() || size->get<int64_t>() < 0) {
        return Status::Corruption("schema: fixed '" + full +
                                  "' has no non-negative integer \"size\"");
      }
      Node* f = NewNode(Kind::kFixed);
      f->name = full;
      f->fixed_size = size->get<int64_t>();
      named_[full] = f;
      return static_cast<const Node*>(f);
    }
    if (type == "array" || type == "map") {
      const char* key = type == "array" ? "items" : "values";
      auto child = j.find(key);
      if (child == j.end()) {
        return Status::Corruption("schema: " + type + " has no \"" + key + "\"");
      }
      Node* n = NewNode(type == "array" ? Kind::kArray : Kind::kMap);
      FERRY_ASSIGN_OR_RETURN(const Node* c, CompileNode(*child, ns, depth + 1));
      n->children.push_back(c);
      return static_cast<const Node*>(n);
    }
    // {"type": "SomeNamedType"}
    return Resolve(type, ns);
  }

  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<std::string, const Node*> named_;
  const Node* root_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Decoding

// A bounds-checked read position over a byte range.
class Cursor {
 public:
  explicit Cursor(std::string_view data) : data_(data) {}
  size_t offset() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool empty() const { return pos_ == data_.size(); }

  Status ReadLong(int64_t* out) {
    uint64_t acc = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ >= data_.size()) return Status::Corruption("input ends inside a varint");
      if (shift > 63) return Status::Corruption("varint longer than 10 bytes");
      uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      if (shift == 63 && (b & 0x7e) != 0) return Status::Corruption("varint overflows 64 bits");
      acc |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    *out = static_cast<int64_t>((acc >> 1) ^ (~(acc & 1) + 1));
    return Status::OK();
  }

  Status ReadRaw(uint64_t n, std::string_view* out) {
    if (n > remaining()) {
      return Status::Corruption("needs " + std::to_string(n) + " bytes but only " +
                                std::to_string(remaining()) + " remain");
    }
    *out = data_.substr(pos_, n);
    pos_ += n;
    return Status::OK();
  }

  // A long length, then that many bytes.
  Status ReadBytes(std::string_view* out) {
    int64_t len;
    FERRY_RETURN_IF_ERROR(ReadLong(&len));
    if (len < 0) return Status::Corruption("negative length " + ToStr(len));
    return ReadRaw(static_cast<uint64_t>(len), out);
  }

  template <typename U>
  Status ReadLittleEndian(U* out) {
    std::string_view raw;
    FERRY_RETURN_IF_ERROR(ReadRaw(sizeof(U), &raw));
    U v = 0;
    for (size_t i = 0; i < sizeof(U); ++i) {
      v |= static_cast<U>(static_cast<uint8_t>(raw[i])) << (8 * i);
    }
    *out = v;
    return Status::OK();
  }

  // Reads the count of the next array/map block; 0 ends. A negative count is followed by the
  // block's size in bytes, which is checked and otherwise ignored.
  Status ReadBlockCount(int64_t* count) {
    FERRY_RETURN_IF_ERROR(ReadLong(count));
    if (*count < 0) {
      if (*count == std::numeric_limits<int64_t>::min()) {
        return Status::Corruption("block count out of range");
      }
      *count = -*count;
      int64_t size;
      FERRY_RETURN_IF_ERROR(ReadLong(&size));
      if (size < 0 || static_cast<uint64_t>(size) > remaining()) {
        return Status::Corruption("block size " + ToStr(size) + " exceeds the " +
                                  std::to_string(remaining()) + " remaining bytes");
      }
    }
    return Status::OK();
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

class Decoder {
 public:
  Status Decode(const Node& node, Cursor& c, int depth, nlohmann::json* out) {
    if (depth > kMaxDepth) {
      return Status::Corruption("datum nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    switch (node.kind) {
      case Kind::kNull:
        *out = nullptr;
        return Status::OK();
      case Kind::kBoolean: {
        std::string_view b;
        FERRY_RETURN_IF_ERROR(c.ReadRaw(1, &b));
        if (b[0] != 0 && b[0] != 1) {
          return Status::Corruption("boolean byte " + std::to_string(static_cast<uint8_t>(b[0])) +
                                    " is neither 0 nor 1");
        }
        *out = b[0] == 1;
        return Status::OK();
      }
      case Kind::kInt: {
        int64_t v;
        FERRY_RETURN_IF_ERROR(c.ReadLong(&v));
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          return Status::Corruption("int value " + ToStr(v) + " does not fit 32 bits");
        }
        *out = static_cast<int32_t>(v);
        return Status::OK();
      }
      case Kind::kLong: {
        int64_t v;
        FERRY_RETURN_IF_ERROR(c.ReadLong(&v));
        *out = v;
        return Status::OK();
      }
      case Kind::kFloat: {
        uint32_t bits = 0;
        FERRY_RETURN_IF_ERROR(c.ReadLittleEndian(&bits));
        *out = static_cast<double>(std::bit_cast<float>(bits));
        return Status::OK();
      }
      case Kind::kDouble: {
        uint64_t bits = 0;
        FERRY_RETURN_IF_ERROR(c.ReadLittleEndian(&bits));
        *out = std::bit_cast<double>(bits);
        return Status::OK();
      }
      case Kind::kBytes:
      case Kind::kString: {
        std::string_view v;
        FERRY_RETURN_IF_ERROR(c.ReadBytes(&v));
        *out = std::string(v);
        return Status::OK();
      }
      case Kind::kFixed: {
        std::string_view v;
        FERRY_RETURN_IF_ERROR(c.ReadRaw(static_cast<uint64_t>(node.fixed_size), &v));
        *out = std::string(v);
        return Status::OK();
      }
      case Kind::kEnum: {
        int64_t i;
        FERRY_RETURN_IF_ERROR(c.ReadLong(&i));
        if (i < 0 || static_cast<uint64_t>(i) >= node.symbols.size()) {
          return Status::Corruption("enum '" + node.name + "' index " + ToStr(i) +
                                    " out of range [0, " + std::to_string(node.symbols.size()) +
                                    ")");
        }
        *out = node.symbols[static_cast<size_t>(i)];
        return Status::OK();
      }
      case Kind::kUnion: {
        int64_t i;
        FERRY_RETURN_IF_ERROR(c.ReadLong(&i));
        if (i < 0 || static_cast<uint64_t>(i) >= node.children.size()) {
          return Status::Corruption("union index " + ToStr(i) + " out of range [0, " +
                                    std::to_string(node.children.size()) + ")");
        }
        return Decode(*node.children[static_cast<size_t>(i)], c, depth + 1, out);
      }
      case Kind::kRecord: {
        *out = nlohmann::json::object();
        for (size_t f = 0; f < node.children.size(); ++f) {
          nlohmann::json v;
          Status s = Decode(*node.children[f], c, depth + 1, &v);
          if (!s.ok()) return s.WithContext("field '" + node.field_names[f] + "'");
          (*out)[node.field_names[f]] = std::move(v);
        }
        return Status::OK();
      }
      case Kind::kArray:
      case Kind::kMap: {
        const bool is_map = node.kind == Kind::kMap;
        *out = is_map ? nlohmann::json::object() : nlohmann::json::array();
        for (;;) {
          int64_t count;
          FERRY_RETURN_IF_ERROR(c.ReadBlockCount(&count));
          if (count == 0) break;
          // No reserve(count): items are appended as they decode, so memory follows the input.
          for (int64_t i = 0; i < count; ++i) {
            size_t before = c.offset();
            std::string_view key;
            if (is_map) FERRY_RETURN_IF_ERROR(c.ReadBytes(&key));
            nlohmann::json v;
            Status s = Decode(*node.children[0], c, depth + 1, &v);
            if (!s.ok()) {
              return s.WithContext(is_map ? "map value '" + std::string(key) + "'"
                                          : "array item " + ToStr(i));
            }
            FERRY_RETURN_IF_ERROR(ChargeIfEmpty(before, c));
            if (is_map) {
              (*out)[std::string(key)] = std::move(v);
            } else {
              out->push_back(std::move(v));
            }
          }
        }
        return Status::OK();
      }
    }
    return Status::Internal("unknown schema node kind");
  }

  // Values that consumed no input count against a per-file budget, so that a huge declared count
  // of nulls cannot loop or allocate without bound.
  Status ChargeIfEmpty(size_t before, const Cursor& c) {
    if (c.offset() != before) return Status::OK();
    if (++zero_width_values_ > kMaxZeroWidthValues) {
      return Status::Corruption("more than " + std::to_string(kMaxZeroWidthValues) +
                                " values that take no bytes");
    }
    return Status::OK();
  }

 private:
  uint64_t zero_width_values_ = 0;
};

Status Inflate(std::string_view in, std::string* out) {
  if (in.size() > std::numeric_limits<uInt>::max()) {
    return Status::NotSupported("deflate blocks of 4 GiB or more are not supported");
  }
  z_stream zs{};
  if (inflateInit2(&zs, -15) != Z_OK) return Status::Internal("inflateInit2 failed");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  out->clear();
  std::string chunk(64 * 1024, '\0');
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
    zs.avail_out = static_cast<uInt>(chunk.size());
    int ret = inflate(&zs, Z_NO_FLUSH);
    if (ret == Z_DATA_ERROR || ret == Z_NEED_DICT) {
      return Status::Corruption(std::string("invalid deflate data: ") +
                                (zs.msg != nullptr ? zs.msg : "unknown error"));
    }
    if (ret == Z_MEM_ERROR) return Status::Internal("inflate ran out of memory");
    out->append(chunk.data(), chunk.size() - zs.avail_out);
    if (out->size() > kMaxInflatedBlockBytes) {
      return Status::Corruption("deflate block inflates beyond " +
                                std::to_string(kMaxInflatedBlockBytes) + " bytes");
    }
    if (ret == Z_STREAM_END) return Status::OK();  // bytes after the end are ignored, as Java does
    if (ret == Z_BUF_ERROR || (ret == Z_OK && zs.avail_in == 0 && zs.avail_out != 0)) {
      return Status::Corruption("deflate data ends before the end of its stream");
    }
  }
}

Status Deflate(std::string_view in, std::string* out) {
  if (in.size() > std::numeric_limits<uInt>::max() / 2) {
    return Status::InvalidArgument("avro writer: a single datum of " + std::to_string(in.size()) +
                                   " bytes is too large for one deflate block");
  }
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Status::Internal("deflateInit2 failed");
  }
  struct End {
    z_stream* zs;
    ~End() { deflateEnd(zs); }
  } end{&zs};
  out->resize(deflateBound(&zs, static_cast<uLong>(in.size())));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out->data());
  zs.avail_out = static_cast<uInt>(out->size());
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) return Status::Internal("deflate did not finish");
  out->resize(zs.total_out);
  return Status::OK();
}

Result<ContainerFile> ReadContainerImpl(std::string_view bytes) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return Status::Corruption("not an Avro container file: bad magic (expected \"Obj\\x01\")");
  }
  Cursor c(bytes.substr(kMagic.size()));
  ContainerFile file;

  // Header metadata: a map of bytes.
  for (;;) {
    int64_t count;
    Status s = c.ReadBlockCount(&count);
    if (!s.ok()) return s.WithContext("header metadata");
    if (count == 0) break;
    for (int64_t i = 0; i < count; ++i) {
      std::string_view key, value;
      s = c.ReadBytes(&key);
      if (s.ok()) s = c.ReadBytes(&value);
      if (!s.ok()) return s.WithContext("header metadata");
      file.metadata[std::string(key)] = std::string(value);
    }
  }
  std::string_view sync;
  if (Status s = c.ReadRaw(kSyncSize, &sync); !s.ok()) {
    return s.WithContext("header sync marker");
  }

  auto schema_it = file.metadata.find("avro.schema");
  if (schema_it == file.metadata.end()) {
    return Status::Corruption("header has no avro.schema");
  }
  file.schema = nlohmann::json::parse(schema_it->second, nullptr, /*allow_exceptions=*/false);
  if (file.schema.is_discarded()) return Status::Corruption("header avro.schema is not JSON");
  Schema schema;
  if (Status s = schema.Compile(file.schema); !s.ok()) return s.WithContext("header avro.schema");

  bool deflate = false;
  if (auto codec = file.metadata.find("avro.codec"); codec != file.metadata.end()) {
    const std::string& name = codec->second;
    if (name == "deflate") {
      deflate = true;
    } else if (name == "snappy" || name == "zstandard" || name == "bzip2" || name == "xz") {
      return Status::NotSupported("Avro codec '" + name +
                                  "' is not supported; ferry reads \"null\" and \"deflate\"");
    } else if (name != "null") {
      return Status::Corruption("header names unknown Avro codec '" + name + "'");
    }
  }

  Decoder decoder;
  std::string inflated;
  for (int64_t block = 0; !c.empty(); ++block) {
    const size_t block_offset = kMagic.size() + c.offset();
    auto context = [&] {
      return "block " + ToStr(block) + " at offset " + std::to_string(block_offset);
    };
    int64_t count, size;
    Status s = c.ReadLong(&count);
    if (s.ok()) s = c.ReadLong(&size);
    if (!s.ok()) return s.WithContext(context());
    if (count < 0) return Status::Corruption(context() + ": negative record count " + ToStr(count));
    if (size < 0 || static_cast<uint64_t>(size) > c.remaining()) {
      return Status::Corruption(context() + ": declares " + ToStr(size) + " bytes but only " +
                                std::to_string(c.remaining()) + " remain (truncated file?)");
    }
    std::string_view data, block_sync;
    FERRY_RETURN_IF_ERROR(c.ReadRaw(static_cast<uint64_t>(size), &data));
    if (c.remaining() < kSyncSize) {
      return Status::Corruption(context() + ": file ends before the block's sync marker");
    }
    FERRY_RETURN_IF_ERROR(c.ReadRaw(kSyncSize, &block_sync));
    if (block_sync != sync) {
      return Status::Corruption(context() + ": sync marker does not match the header's");
    }
    if (deflate) {
      if (Status is = Inflate(data, &inflated); !is.ok()) return is.WithContext(context());
      data = inflated;
    }
    Cursor dc(data);
    for (int64_t i = 0; i < count; ++i) {
      size_t before = dc.offset();
      nlohmann::json datum;
      s = decoder.Decode(*schema.root(), dc, 0, &datum);
      if (s.ok()) s = decoder.ChargeIfEmpty(before, dc);
      if (!s.ok()) return s.WithContext(context() + ", record " + ToStr(i));
      file.records.push_back(std::move(datum));
    }
    if (!dc.empty()) {
      return Status::Corruption(context() + ": " + std::to_string(dc.remaining()) +
                                " bytes left after its " + ToStr(count) + " records");
    }
  }
  return file;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Encoder

void Encoder::WriteLong(int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    buf_.push_back(static_cast<char>((z & 0x7f) | 0x80));
    z >>= 7;
  }
  buf_.push_back(static_cast<char>(z));
}

void Encoder::WriteFloat(float v) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void Encoder::WriteDouble(double v) {
  uint64_t bits = std::bit_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void Encoder::WriteBytes(std::string_view v) {
  WriteLong(static_cast<int64_t>(v.size()));
  buf_.append(v);
}

// ---------------------------------------------------------------------------------------------
// ContainerWriter

Result<std::unique_ptr<ContainerWriter>> ContainerWriter::Open(
    std::unique_ptr<OutputStream> out, const std::string& schema_json,
    const std::map<std::string, std::string>& metadata, Codec codec) {
  if (out == nullptr) return Status::InvalidArgument("avro writer: no output stream");
  // The schema must be one the reader can decode; it is stored verbatim, not re-serialised, so
  // attributes such as "field-id" and the field order survive exactly as given.
  nlohmann::json parsed = nlohmann::json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return Status::InvalidArgument("avro writer: the schema is not valid JSON");
  }
  try {
    Schema schema;
    if (Status s = schema.Compile(parsed); !s.ok()) {
      return Status::InvalidArgument("avro writer: invalid schema: " + s.message());
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("avro writer: invalid schema: ") + e.what());
  }
  for (const auto& [key, value] : metadata) {
    if (key.starts_with("avro.")) {
      return Status::InvalidArgument("avro writer: metadata key '" + key +
                                     "' is reserved by Avro; choose a key without \"avro.\"");
    }
  }

  std::unique_ptr<ContainerWriter> w(new ContainerWriter());
  w->out_ = std::move(out);
  w->codec_ = codec;
  std::random_device rd;
  w->sync_.resize(kSyncSize);
  for (size_t i = 0; i < kSyncSize; i += 4) {
    uint32_t r = rd();
    std::memcpy(w->sync_.data() + i, &r, 4);
  }

  Encoder header;
  header.buffer().append(kMagic);
  header.WriteBlockCount(static_cast<int64_t>(metadata.size()) + 2);
  header.WriteString("avro.schema");
  header.WriteBytes(schema_json);
  header.WriteString("avro.codec");
  header.WriteBytes(codec == Codec::kDeflate ? "deflate" : "null");
  for (const auto& [key, value] : metadata) {
    header.WriteString(key);
    header.WriteBytes(value);
  }
  header.WriteBlockCount(0);
  header.WriteFixed(w->sync_);
  FERRY_RETURN_IF_ERROR(w->out_->Append(header.buffer()));
  return w;
}

Status ContainerWriter::EndDatum() {
  if (closed_) return Status::Internal("avro writer: EndDatum after Close");
  block_.append(datum_.buffer());
  datum_.Clear();
  ++block_count_;
  if (block_.size() >= kBlockTargetBytes) return FlushBlock();
  return Status::OK();
}

Status ContainerWriter::FlushBlock() {
  if (block_count_ == 0) return Status::OK();
  std::string compressed;
  std::string_view data = block_;
  if (codec_ == Codec::kDeflate) {
    FERRY_RETURN_IF_ERROR(Deflate(block_, &compressed));
    data = compressed;
  }
  Encoder head;
  head.WriteLong(block_count_);
  head.WriteLong(static_cast<int64_t>(data.size()));
  std::string out = std::move(head.buffer());
  out.append(data);
  out.append(sync_);
  FERRY_RETURN_IF_ERROR(out_->Append(out));
  block_.clear();
  block_count_ = 0;
  return Status::OK();
}

Result<uint64_t> ContainerWriter::Close() {
  if (closed_) return Status::Internal("avro writer: Close called twice");
  if (!datum_.buffer().empty()) {
    return Status::Internal("avro writer: a datum was encoded but not ended with EndDatum");
  }
  FERRY_RETURN_IF_ERROR(FlushBlock());
  closed_ = true;
  FERRY_RETURN_IF_ERROR(out_->Close());
  return out_->Tell();
}

// ---------------------------------------------------------------------------------------------
// Reader

Result<ContainerFile> ReadContainer(std::string_view bytes) {
  try {
    return ReadContainerImpl(bytes);
  } catch (const std::exception& e) {
    // Nothing above throws by design; this keeps a missed case from crossing the boundary.
    return Status::Internal(std::string("avro reader: unexpected exception: ") + e.what());
  }
}

}  // namespace ferry::avro
