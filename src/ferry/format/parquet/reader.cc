// Parquet reader: the footer is decoded with thrift::CompactReader into the few fields the reader
// needs; each row group's column chunks are read whole (one chunk at a time), their pages
// decompressed and decoded straight into the batch's columns. Every length and offset taken from
// the file is checked against the bytes actually there before it is used.
#include "ferry/format/parquet/reader.h"

#include <snappy.h>
#include <zstd.h>

#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "ferry/format/parquet/thrift_compact.h"

namespace ferry::parquet {

static_assert(std::endian::native == std::endian::little,
              "the Parquet reader copies little-endian values straight into the batch");

using thrift::CompactReader;
using thrift::CType;

namespace {

// Enumerations of parquet.thrift that the reader understands.
namespace pq {
enum Type : int32_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7,
};
enum Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum Encoding : int32_t { kPlain = 0, kPlainDictionary = 2, kRle = 3, kRleDictionary = 8 };
enum PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
enum Codec : int32_t { kUncompressed = 0, kSnappy = 1, kZstd = 6 };
enum ConvertedType : int32_t { kList = 3, kDecimal = 5, kTimeMillis = 7, kTimestampMillis = 9 };
}  // namespace pq

const char* PhysicalName(int32_t t) {
  switch (t) {
    case pq::kBoolean:
      return "BOOLEAN";
    case pq::kInt32:
      return "INT32";
    case pq::kInt64:
      return "INT64";
    case pq::kInt96:
      return "INT96";
    case pq::kFloat:
      return "FLOAT";
    case pq::kDouble:
      return "DOUBLE";
    case pq::kByteArray:
      return "BYTE_ARRAY";
    case pq::kFixedLenByteArray:
      return "FIXED_LEN_BYTE_ARRAY";
  }
  return "an unknown physical type";
}

class StringFile final : public RandomAccessFile {
 public:
  StringFile(std::string data, std::string name) : data_(std::move(data)), name_(std::move(name)) {}
  uint64_t size() const override { return data_.size(); }
  const std::string& name() const override { return name_; }
  Status ReadAt(uint64_t offset, uint64_t n, std::string* out) override {
    if (offset > data_.size() || n > data_.size() - offset) {
      return Status::Corruption("Parquet file " + name_ + ": a read of " + std::to_string(n) +
                                " bytes at offset " + std::to_string(offset) +
                                " runs past its end (" + std::to_string(data_.size()) + " bytes)");
    }
    out->assign(data_, static_cast<size_t>(offset), static_cast<size_t>(n));
    return Status::OK();
  }

 private:
  std::string data_;
  std::string name_;
};

// One leaf of the file's (flat) schema.
struct Leaf {
  std::string name;
  int32_t physical = -1;
  int32_t type_length = 0;
  int32_t repetition = pq::kRequired;
  std::optional<int32_t> field_id;
  std::optional<int32_t> scale;  // decimal annotation (logical or converted)
  // Multiplier/divisor to micros for TIME/TIMESTAMP annotated in another unit.
  int64_t micros_mul = 1;
  int64_t micros_div = 1;
  bool logical_list = false;  // annotated LIST (groups only)
  // The element of a 3-level LIST: the list group's name, field id and repetition.
  bool in_list = false;
  std::string list_name;
  std::optional<int32_t> list_field_id;
  bool list_optional = false;
  // Lists: the definition level of a present element (NULL list 0 when optional, empty list
  // list_optional, NULL element one below).
  int32_t max_def = 0;
};

struct ChunkInfo {
  int32_t physical = -1;
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t data_page_offset = -1;
  int64_t dictionary_page_offset = -1;
  int64_t total_compressed_size = -1;
  bool external = false;
};

struct RowGroupInfo {
  int64_t num_rows = -1;
  std::vector<ChunkInfo> chunks;
};

// ---- footer decoding ----

// Reads a TimeUnit struct: 1 MILLIS, 2 MICROS, 3 NANOS (each an empty struct).
void ReadTimeUnit(CompactReader& r, Leaf* leaf) {
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    if (id == 1) {
      leaf->micros_mul = 1000;
      leaf->micros_div = 1;
    } else if (id == 3) {
      leaf->micros_mul = 1;
      leaf->micros_div = 1000;
    } else if (id == 2) {
      leaf->micros_mul = leaf->micros_div = 1;
    }
    r.Skip(t);
  }
}

void ReadLogicalType(CompactReader& r, Leaf* leaf) {
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    if (t == thrift::kStruct && id == 5) {  // DECIMAL {1: scale, 2: precision}
      r.BeginStruct();
      int16_t id2;
      CType t2;
      while (r.NextField(&id2, &t2)) {
        if (id2 == 1 && t2 == thrift::kI32) {
          leaf->scale = r.I32();
        } else {
          r.Skip(t2);
        }
      }
    } else if (t == thrift::kStruct && id == 3) {  // LIST
      leaf->logical_list = true;
      r.Skip(t);
    } else if (t == thrift::kStruct && (id == 7 || id == 8)) {  // TIME, TIMESTAMP
      r.BeginStruct();
      int16_t id2;
      CType t2;
      while (r.NextField(&id2, &t2)) {
        if (id2 == 2 && t2 == thrift::kStruct) {
          ReadTimeUnit(r, leaf);
        } else {
          r.Skip(t2);
        }
      }
    } else {
      r.Skip(t);
    }
  }
}

struct SchemaElement {
  Leaf leaf;
  std::optional<int32_t> num_children;
  std::optional<int32_t> converted_type;
};

SchemaElement ReadSchemaElement(CompactReader& r) {
  SchemaElement e;
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    switch (id) {
      case 1:
        e.leaf.physical = r.I32();
        break;
      case 2:
        e.leaf.type_length = r.I32();
        break;
      case 3:
        e.leaf.repetition = r.I32();
        break;
      case 4:
        e.leaf.name = std::string(r.Binary());
        break;
      case 5:
        e.num_children = r.I32();
        break;
      case 6:
        e.converted_type = r.I32();
        break;
      case 7:
        if (!e.leaf.scale)
          e.leaf.scale = r.I32();
        else
          r.Skip(t);
        break;
      case 9:
        e.leaf.field_id = r.I32();
        break;
      case 10:
        if (t == thrift::kStruct)
          ReadLogicalType(r, &e.leaf);
        else
          r.Skip(t);
        break;
      default:
        r.Skip(t);
        break;
    }
  }
  if (e.converted_type == pq::kTimestampMillis || e.converted_type == pq::kTimeMillis) {
    e.leaf.micros_mul = 1000;
  }
  return e;
}

void ReadColumnMetaData(CompactReader& r, ChunkInfo* c) {
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    switch (id) {
      case 1:
        c->physical = r.I32();
        break;
      case 4:
        c->codec = r.I32();
        break;
      case 5:
        c->num_values = r.I64();
        break;
      case 7:
        c->total_compressed_size = r.I64();
        break;
      case 9:
        c->data_page_offset = r.I64();
        break;
      case 11:
        c->dictionary_page_offset = r.I64();
        break;
      default:
        r.Skip(t);
        break;
    }
  }
}

RowGroupInfo ReadRowGroupInfo(CompactReader& r) {
  RowGroupInfo g;
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    if (id == 1 && t == thrift::kList) {
      CType et;
      uint32_t n;
      if (!r.ListHeader(&et, &n)) break;
      for (uint32_t i = 0; i < n && r.ok(); ++i) {
        if (et != thrift::kStruct) {
          r.Fail("thrift: row group columns are not structs");
          break;
        }
        ChunkInfo c;
        r.BeginStruct();
        int16_t id2;
        CType t2;
        while (r.NextField(&id2, &t2)) {
          if (id2 == 1 && t2 == thrift::kBinary) {
            c.external = true;
            r.Skip(t2);
          } else if (id2 == 3 && t2 == thrift::kStruct) {
            ReadColumnMetaData(r, &c);
          } else {
            r.Skip(t2);
          }
        }
        g.chunks.push_back(c);
      }
    } else if (id == 3 && t == thrift::kI64) {
      g.num_rows = r.I64();
    } else {
      r.Skip(t);
    }
  }
  return g;
}

struct FileMeta {
  std::vector<SchemaElement> schema;
  int64_t num_rows = -1;
  std::vector<RowGroupInfo> row_groups;
  std::vector<std::pair<std::string, std::string>> kv;
};

FileMeta ReadFileMeta(CompactReader& r) {
  FileMeta m;
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    if (id == 2 && t == thrift::kList) {
      CType et;
      uint32_t n;
      if (!r.ListHeader(&et, &n)) break;
      if (et != thrift::kStruct && n > 0) {
        r.Fail("thrift: schema elements are not structs");
        break;
      }
      for (uint32_t i = 0; i < n && r.ok(); ++i) m.schema.push_back(ReadSchemaElement(r));
    } else if (id == 3 && t == thrift::kI64) {
      m.num_rows = r.I64();
    } else if (id == 4 && t == thrift::kList) {
      CType et;
      uint32_t n;
      if (!r.ListHeader(&et, &n)) break;
      if (et != thrift::kStruct && n > 0) {
        r.Fail("thrift: row groups are not structs");
        break;
      }
      for (uint32_t i = 0; i < n && r.ok(); ++i) m.row_groups.push_back(ReadRowGroupInfo(r));
    } else if (id == 5 && t == thrift::kList) {
      CType et;
      uint32_t n;
      if (!r.ListHeader(&et, &n)) break;
      for (uint32_t i = 0; i < n && r.ok(); ++i) {
        if (et != thrift::kStruct) {
          r.Fail("thrift: key/value metadata are not structs");
          break;
        }
        std::pair<std::string, std::string> kv;
        r.BeginStruct();
        int16_t id2;
        CType t2;
        while (r.NextField(&id2, &t2)) {
          if (id2 == 1 && t2 == thrift::kBinary) {
            kv.first = std::string(r.Binary());
          } else if (id2 == 2 && t2 == thrift::kBinary) {
            kv.second = std::string(r.Binary());
          } else {
            r.Skip(t2);
          }
        }
        m.kv.push_back(std::move(kv));
      }
    } else {
      r.Skip(t);
    }
  }
  return m;
}

struct PageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = -1;
  int32_t compressed_size = -1;
  int32_t num_values = -1;
  int32_t encoding = -1;
  int32_t def_level_encoding = pq::kRle;
  // v2
  int32_t num_nulls = -1;
  int32_t def_levels_bytes = 0;
  int32_t rep_levels_bytes = 0;
  bool is_compressed = true;
};

void ReadDataPageHeader(CompactReader& r, PageHeader* h, bool v2) {
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    if (t == thrift::kI32 && id == 1) {
      h->num_values = r.I32();
    } else if (!v2 && t == thrift::kI32 && id == 2) {
      h->encoding = r.I32();
    } else if (!v2 && t == thrift::kI32 && id == 3) {
      h->def_level_encoding = r.I32();
    } else if (v2 && t == thrift::kI32 && id == 2) {
      h->num_nulls = r.I32();
    } else if (v2 && t == thrift::kI32 && id == 4) {
      h->encoding = r.I32();
    } else if (v2 && t == thrift::kI32 && id == 5) {
      h->def_levels_bytes = r.I32();
    } else if (v2 && t == thrift::kI32 && id == 6) {
      h->rep_levels_bytes = r.I32();
    } else if (v2 && id == 7 && (t == thrift::kBoolTrue || t == thrift::kBoolFalse)) {
      h->is_compressed = CompactReader::BoolField(t);
    } else {
      r.Skip(t);
    }
  }
}

PageHeader ReadPageHeader(CompactReader& r) {
  PageHeader h;
  r.BeginStruct();
  int16_t id;
  CType t;
  while (r.NextField(&id, &t)) {
    if (id == 1 && t == thrift::kI32) {
      h.type = r.I32();
    } else if (id == 2 && t == thrift::kI32) {
      h.uncompressed_size = r.I32();
    } else if (id == 3 && t == thrift::kI32) {
      h.compressed_size = r.I32();
    } else if (id == 5 && t == thrift::kStruct) {
      ReadDataPageHeader(r, &h, false);
    } else if (id == 7 && t == thrift::kStruct) {  // DictionaryPageHeader
      r.BeginStruct();
      int16_t id2;
      CType t2;
      while (r.NextField(&id2, &t2)) {
        if (id2 == 1 && t2 == thrift::kI32) {
          h.num_values = r.I32();
        } else if (id2 == 2 && t2 == thrift::kI32) {
          h.encoding = r.I32();
        } else {
          r.Skip(t2);
        }
      }
    } else if (id == 8 && t == thrift::kStruct) {
      ReadDataPageHeader(r, &h, true);
    } else {
      r.Skip(t);
    }
  }
  return h;
}

// ---- value decoding ----

// Decodes `count` values of the RLE/bit-packed hybrid encoding of `bit_width` (0..32) bits.
// false when the bytes end early or a run is malformed.
bool DecodeRleHybrid(std::string_view in, int bit_width, size_t count, uint32_t* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  const size_t n = in.size();
  const size_t value_bytes = static_cast<size_t>(bit_width + 7) / 8;
  const uint64_t max_value = bit_width == 32 ? 0xFFFFFFFFull : (1ull << bit_width) - 1;
  size_t pos = 0, got = 0;
  while (got < count) {
    uint64_t header = 0;
    int shift = 0;
    for (;;) {
      if (pos >= n || shift > 63) return false;
      const uint8_t b = p[pos++];
      header |= static_cast<uint64_t>(b & 0x7F) << shift;
      shift += 7;
      if ((b & 0x80) == 0) break;
    }
    if (header & 1) {
      const uint64_t groups = header >> 1;
      if (groups == 0 || groups > n) return false;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(groups * 8, count - got));
      const uint64_t run_bytes = groups * static_cast<uint64_t>(bit_width);
      // Values beyond `take` (padding of the last group) need not be present.
      const uint64_t need = (static_cast<uint64_t>(take) * bit_width + 7) / 8;
      if (need > n - pos) return false;
      uint64_t bit = 0;
      for (size_t i = 0; i < take; ++i) {
        uint64_t v = 0;
        for (int b = 0; b < bit_width; ++b, ++bit) {
          v |= static_cast<uint64_t>((p[pos + bit / 8] >> (bit % 8)) & 1) << b;
        }
        out[got++] = static_cast<uint32_t>(v);
      }
      pos += static_cast<size_t>(std::min<uint64_t>(run_bytes, n - pos));
    } else {
      const uint64_t run = header >> 1;
      if (run == 0 || value_bytes > n - pos) return false;
      uint64_t v = 0;
      for (size_t b = 0; b < value_bytes; ++b) v |= static_cast<uint64_t>(p[pos + b]) << (8 * b);
      pos += value_bytes;
      if (v > max_value) return false;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(run, count - got));
      for (size_t i = 0; i < take; ++i) out[got++] = static_cast<uint32_t>(v);
    }
  }
  return true;
}

int128_t BigEndianToInt128(const uint8_t* p, size_t n) {
  // Sign-extend from the first byte, then shift in the rest.
  auto v = static_cast<int128_t>(static_cast<int8_t>(p[0]));
  for (size_t i = 1; i < n; ++i) {
    v = static_cast<int128_t>(static_cast<unsigned __int128>(v) << 8) | p[i];
  }
  return v;
}

template <typename T>
T LoadLE(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Where a list column's decoding stands between pages: whether a list row is open (its
// elements continue with repetition level 1).
struct ListState {
  Column* list = nullptr;  // the list column; its child receives the values
  bool open = false;
  void Close() {
    if (open) list->AppendListEnd();
    open = false;
  }
};

// Interleaves NULLs (definition level 0) with the values a page decodes. For a list's element it
// also turns repetition and definition levels (checked beforehand by CheckListLevels) into list
// rows: NULL lists, empty lists, NULL elements and the rows' ends.
class LevelCursor {
 public:
  LevelCursor(Column* col, const std::vector<uint32_t>* levels) : col_(col), levels_(levels) {}
  LevelCursor(Column* child, const std::vector<uint32_t>* def, const std::vector<uint32_t>* rep,
              const Leaf& leaf, ListState* state)
      : col_(child),
        levels_(def),
        rep_(rep),
        state_(state),
        outer_(leaf.list_optional ? 1u : 0u),
        max_def_(static_cast<uint32_t>(leaf.max_def)) {}
  void BeforeValue() {
    if (levels_ == nullptr) return;
    if (rep_ != nullptr) {
      while (i_ < levels_->size() && !ListEntry(i_)) ++i_;
      ++i_;
      return;
    }
    while (i_ < levels_->size() && (*levels_)[i_] == 0) {
      col_->AppendNull();
      ++i_;
    }
    ++i_;
  }
  void Finish() {
    if (levels_ == nullptr) return;
    if (rep_ != nullptr) {
      for (; i_ < levels_->size(); ++i_) ListEntry(i_);
      return;
    }
    while (i_ < levels_->size()) {
      col_->AppendNull();
      ++i_;
    }
  }
  Column* col() { return col_; }

 private:
  // Applies entry i; true when it is a present element (whose value the caller appends).
  bool ListEntry(size_t i) {
    const uint32_t def = (*levels_)[i];
    if ((*rep_)[i] == 0) {
      state_->Close();
      if (def < outer_) {
        state_->list->AppendNull();
        return false;
      }
      if (def == outer_) {
        state_->list->AppendListEnd();
        return false;
      }
      state_->open = true;
    }
    if (def == max_def_) return true;
    col_->AppendNull();
    return false;
  }

  Column* col_;
  const std::vector<uint32_t>* levels_;
  const std::vector<uint32_t>* rep_ = nullptr;
  ListState* state_ = nullptr;
  uint32_t outer_ = 0;
  uint32_t max_def_ = 0;
  size_t i_ = 0;
};

// Bits of an RLE/bit-packed level of at most max_level.
int LevelBitWidth(int32_t max_level) {
  int w = 0;
  while ((1 << w) <= max_level) ++w;
  return w;
}

class ReaderImpl final : public Reader {
 public:
  ReaderImpl(std::unique_ptr<RandomAccessFile> file, std::shared_ptr<const Schema> schema,
             ReaderOptions options)
      : file_(std::move(file)), schema_(std::move(schema)), options_(options) {}
  ~ReaderImpl() override {
    if (dctx_ != nullptr) ZSTD_freeDCtx(dctx_);
  }
  ReaderImpl(const ReaderImpl&) = delete;
  ReaderImpl& operator=(const ReaderImpl&) = delete;

  // The bytes [offset, offset + n) of the file, checked against its size here: a corrupted offset
  // is kCorruption whatever the storage would make of a read past the end.
  Status ReadRange(uint64_t offset, uint64_t n, std::string* out) {
    const uint64_t size = file_->size();
    if (offset > size || n > size - offset) {
      return Status::Corruption("Parquet file " + file_->name() + ": a read of " +
                                std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                                " runs past its end (" + std::to_string(size) + " bytes)");
    }
    return file_->ReadAt(offset, n, out);
  }

  Status Init() {
    const uint64_t size = file_->size();
    if (size < 12) return Corrupt("is " + std::to_string(size) + " bytes, too short for Parquet");
    std::string buf;
    FERRY_RETURN_IF_ERROR(ReadRange(0, 4, &buf));
    if (buf != "PAR1") return Corrupt("does not start with the Parquet magic bytes PAR1");
    FERRY_RETURN_IF_ERROR(ReadRange(size - 8, 8, &buf));
    if (buf.compare(4, 4, "PAR1") != 0) {
      return Corrupt("does not end with the Parquet magic bytes PAR1 (truncated or encrypted)");
    }
    const uint32_t footer_len = LoadLE<uint32_t>(buf.data());
    if (footer_len > size - 12) {
      return Corrupt("declares a footer of " + std::to_string(footer_len) +
                     " bytes, more than the file holds");
    }
    data_end_ = size - 8 - footer_len;
    FERRY_RETURN_IF_ERROR(ReadRange(data_end_, footer_len, &buf));
    CompactReader r(buf);
    FileMeta meta = ReadFileMeta(r);
    if (!r.ok()) return Corrupt("has a footer that does not decode: " + r.error());
    FERRY_RETURN_IF_ERROR(ResolveSchema(meta));
    FERRY_RETURN_IF_ERROR(CheckRowGroups(meta));
    num_rows_ = meta.num_rows < 0 ? 0 : static_cast<uint64_t>(meta.num_rows);
    row_groups_ = std::move(meta.row_groups);
    kv_ = std::move(meta.kv);
    return Status::OK();
  }

  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  uint64_t num_rows() const override { return num_rows_; }
  size_t num_row_groups() const override { return row_groups_.size(); }
  uint64_t row_group_rows(size_t index) const override {
    return index < row_groups_.size() ? static_cast<uint64_t>(row_groups_[index].num_rows) : 0;
  }
  const std::vector<std::pair<std::string, std::string>>& key_value_metadata() const override {
    return kv_;
  }

  Status ReadRowGroup(size_t index, Batch* batch) override {
    if (index >= row_groups_.size()) {
      return Status::InvalidArgument("Parquet file " + file_->name() + " has " +
                                     std::to_string(row_groups_.size()) + " row groups; no " +
                                     std::to_string(index));
    }
    if (batch->num_columns() != schema_->fields.size()) {
      return Status::InvalidArgument("Parquet reader: the batch's schema is not the reader's");
    }
    batch->Clear();
    const RowGroupInfo& g = row_groups_[index];
    const auto rows = static_cast<uint64_t>(g.num_rows);
    for (size_t f = 0; f < schema_->fields.size(); ++f) {
      const Field& field = schema_->fields[f];
      Column& col = batch->column(f);
      const int leaf = field_leaf_[f];
      if (leaf < 0) {
        for (uint64_t i = 0; i < rows; ++i) col.AppendNull();
        continue;
      }
      if (field.type.is_list()) {
        const Field elem = ElementOf(field);
        ListState state;
        state.list = &col;
        FERRY_RETURN_IF_ERROR(ReadChunk(g.chunks[static_cast<size_t>(leaf)],
                                        leaves_[static_cast<size_t>(leaf)], elem, &col.list_child(),
                                        &state));
        state.Close();
        if (elem.required && col.list_child().null_count() > 0) {
          return Corrupt("list " + leaves_[static_cast<size_t>(leaf)].list_name +
                         " holds NULL elements but the table's field " + field.name +
                         " has required elements");
        }
      } else {
        FERRY_RETURN_IF_ERROR(ReadChunk(g.chunks[static_cast<size_t>(leaf)],
                                        leaves_[static_cast<size_t>(leaf)], field, &col, nullptr));
      }
      if (col.size() != rows) {
        return Corrupt("row group " + std::to_string(index) + ": column " +
                       leaves_[static_cast<size_t>(leaf)].name + " holds " +
                       std::to_string(col.size()) + " values for " + std::to_string(rows) +
                       " rows");
      }
      if (field.required && col.null_count() > 0) {
        return Corrupt("column " + leaves_[static_cast<size_t>(leaf)].name + " (field id " +
                       std::to_string(field.id) + ") holds NULLs but the table's field " +
                       field.name + " is required");
      }
    }
    return Status::OK();
  }

 private:
  Status Corrupt(const std::string& what) const {
    return Status::Corruption("Parquet file " + file_->name() + " " + what);
  }

  Status ResolveSchema(const FileMeta& meta) {
    if (meta.schema.empty()) return Corrupt("has no schema");
    const SchemaElement& root = meta.schema[0];
    const int64_t children = root.num_children.value_or(0);
    if (children < 0) return Corrupt("has a root with " + std::to_string(children) + " children");
    std::map<int32_t, int> by_id;
    size_t i = 1;
    for (int64_t top = 0; top < children; ++top, ++i) {
      if (i >= meta.schema.size()) return Corrupt("has fewer schema elements than it declares");
      SchemaElement e = meta.schema[i];
      if (e.num_children.has_value() && *e.num_children > 0) {
        FERRY_ASSIGN_OR_RETURN(e, ListElementOf(meta, &i));
      }
      if (e.leaf.repetition == pq::kRepeated) {
        return Status::NotSupported("Parquet file " + file_->name() + " column " + e.leaf.name +
                                    " is repeated; ferry reads flat schemas only");
      }
      if (e.leaf.repetition != pq::kRequired && e.leaf.repetition != pq::kOptional) {
        return Corrupt("column " + e.leaf.name + " has an unknown repetition " +
                       std::to_string(e.leaf.repetition));
      }
      leaves_.push_back(e.leaf);
      const std::optional<int32_t> id = e.leaf.in_list ? e.leaf.list_field_id : e.leaf.field_id;
      if (id) {
        if (!by_id.emplace(*id, static_cast<int>(leaves_.size() - 1)).second) {
          return Corrupt("has two columns with field id " + std::to_string(*id));
        }
      }
    }
    if (i != meta.schema.size()) {
      return Corrupt("has " + std::to_string(meta.schema.size() - i) +
                     " schema elements outside its root");
    }
    for (const Field& f : schema_->fields) {
      auto it = by_id.find(f.id);
      if (it == by_id.end()) {
        if (f.required) {
          return Corrupt("has no column with field id " + std::to_string(f.id) +
                         " for the required field " + f.name);
        }
        field_leaf_.push_back(-1);
        continue;
      }
      const Leaf& leaf = leaves_[static_cast<size_t>(it->second)];
      if (leaf.in_list != f.type.is_list()) {
        return Status::NotSupported(
            "Parquet file " + file_->name() + " column " +
            (leaf.in_list ? leaf.list_name : leaf.name) + " (field id " + std::to_string(f.id) +
            ") is " + (leaf.in_list ? "a list" : "not a list") +
            ", which cannot be read as the table's " + f.type.ToIceberg() + " field " + f.name);
      }
      if (leaf.in_list) {
        const Field elem = ElementOf(f);
        if (leaf.field_id && *leaf.field_id != elem.id) {
          return Status::NotSupported("Parquet file " + file_->name() + " list " + leaf.list_name +
                                      " has element field id " + std::to_string(*leaf.field_id) +
                                      ", the table's field " + f.name + " element id " +
                                      std::to_string(elem.id));
        }
        FERRY_RETURN_IF_ERROR(CheckConvertible(leaf, elem));
      } else {
        FERRY_RETURN_IF_ERROR(CheckConvertible(leaf, f));
      }
      field_leaf_.push_back(it->second);
    }
    return Status::OK();
  }

  // The table's list element as a field of its own.
  static Field ElementOf(const Field& list) {
    Field e;
    e.id = list.type.list().id;
    e.name = list.name + ".element";
    e.type = list.type.list().type;
    e.required = list.type.list().required;
    return e;
  }

  // The element leaf of the 3-level LIST group at schema index *i (advanced to the leaf):
  // <required|optional> group (LIST) { repeated group { <required|optional> primitive } }.
  Result<SchemaElement> ListElementOf(const FileMeta& meta, size_t* i) const {
    const SchemaElement& g = meta.schema[*i];
    const std::string& name = g.leaf.name;
    auto unsupported = [&](const std::string& what) {
      return Status::NotSupported("Parquet file " + file_->name() + " column " + name + " " + what +
                                  "; ferry reads primitive columns and 3-level LIST groups of "
                                  "primitive elements only");
    };
    const bool annotated = g.converted_type == pq::kList || g.leaf.logical_list;
    if (!annotated || g.num_children != 1) return unsupported("is a group that is not a list");
    if (g.leaf.repetition != pq::kRequired && g.leaf.repetition != pq::kOptional) {
      return unsupported("is a repeated list group");
    }
    if (*i + 2 >= meta.schema.size())
      return Corrupt("has a list group " + name + " without children");
    const SchemaElement& mid = meta.schema[*i + 1];
    if (mid.leaf.repetition != pq::kRepeated || mid.num_children != 1) {
      return unsupported("is a list in the 2-level (legacy) form");
    }
    SchemaElement e = meta.schema[*i + 2];
    if (e.num_children.has_value() && *e.num_children > 0) {
      return unsupported("is a list of groups");
    }
    if (e.leaf.repetition != pq::kRequired && e.leaf.repetition != pq::kOptional) {
      return unsupported("has a repeated element");
    }
    e.leaf.in_list = true;
    e.leaf.list_name = name;
    e.leaf.list_field_id = g.leaf.field_id;
    e.leaf.list_optional = g.leaf.repetition == pq::kOptional;
    e.leaf.max_def =
        (e.leaf.list_optional ? 1 : 0) + 1 + (e.leaf.repetition == pq::kOptional ? 1 : 0);
    e.leaf.name = name + ".list." + e.leaf.name;
    *i += 2;
    return e;
  }

  Status CheckConvertible(const Leaf& leaf, const Field& f) const {
    const int32_t p = leaf.physical;
    const TypeKind k = f.type.kind();
    bool ok = false;
    switch (k) {
      case TypeKind::kBoolean:
        ok = p == pq::kBoolean;
        break;
      case TypeKind::kInt32:
      case TypeKind::kDate:
        ok = p == pq::kInt32;
        break;
      case TypeKind::kInt64:
        ok = p == pq::kInt64 || p == pq::kInt32;
        break;
      case TypeKind::kTime:
      case TypeKind::kTimestamp:
      case TypeKind::kTimestampTz:
        ok = p == pq::kInt64;
        break;
      case TypeKind::kFloat32:
        ok = p == pq::kFloat;
        break;
      case TypeKind::kFloat64:
        ok = p == pq::kDouble || p == pq::kFloat;
        break;
      case TypeKind::kDecimal:
        ok = p == pq::kInt32 || p == pq::kInt64 || p == pq::kByteArray ||
             (p == pq::kFixedLenByteArray && leaf.type_length >= 1 && leaf.type_length <= 16);
        if (ok && leaf.scale && *leaf.scale != f.type.scale()) {
          return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                      " is a decimal of scale " + std::to_string(*leaf.scale) +
                                      " but the table's field " + f.name + " is " +
                                      f.type.ToIceberg());
        }
        break;
      case TypeKind::kString:
        ok = p == pq::kByteArray;
        break;
      case TypeKind::kBinary:
        ok = p == pq::kByteArray || (p == pq::kFixedLenByteArray && leaf.type_length >= 0);
        break;
      case TypeKind::kUuid:
        ok = p == pq::kFixedLenByteArray && leaf.type_length == 16;
        break;
      case TypeKind::kList:  // lists of lists are not read
        ok = false;
        break;
    }
    if (!ok) {
      return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                  " (field id " + std::to_string(f.id) + ") is " + PhysicalName(p) +
                                  ", which cannot be read as the table's " + f.type.ToIceberg() +
                                  " field " + f.name);
    }
    if (p == pq::kFixedLenByteArray && leaf.type_length < 0) {
      return Corrupt("column " + leaf.name + " has a negative type_length");
    }
    return Status::OK();
  }

  Status CheckRowGroups(const FileMeta& meta) {
    for (size_t g = 0; g < meta.row_groups.size(); ++g) {
      const RowGroupInfo& rg = meta.row_groups[g];
      const std::string where = "row group " + std::to_string(g);
      if (rg.num_rows < 0 || static_cast<uint64_t>(rg.num_rows) > options_.max_row_group_rows) {
        return Corrupt(where + " declares " + std::to_string(rg.num_rows) + " rows");
      }
      if (rg.chunks.size() != leaves_.size()) {
        return Corrupt(where + " has " + std::to_string(rg.chunks.size()) + " column chunks for " +
                       std::to_string(leaves_.size()) + " columns");
      }
      for (size_t c = 0; c < rg.chunks.size(); ++c) {
        const ChunkInfo& ch = rg.chunks[c];
        const std::string col = where + " column " + leaves_[c].name;
        if (ch.external) {
          return Status::NotSupported("Parquet file " + file_->name() + " " + col +
                                      " is stored in another file; ferry reads self-contained "
                                      "files only");
        }
        if (ch.physical != leaves_[c].physical) {
          return Corrupt(col + " has physical type " + std::to_string(ch.physical) +
                         " in its chunk and " + std::to_string(leaves_[c].physical) +
                         " in the schema");
        }
        const int64_t start = ChunkStart(ch);
        if (start < 4 || ch.total_compressed_size < 0 || ch.num_values < 0 ||
            static_cast<uint64_t>(start) > data_end_ ||
            static_cast<uint64_t>(ch.total_compressed_size) >
                data_end_ - static_cast<uint64_t>(start)) {
          return Corrupt(col + " has a chunk (offset " + std::to_string(start) + ", " +
                         std::to_string(ch.total_compressed_size) +
                         " bytes) outside the file's data");
        }
        if (leaves_[c].in_list ? ch.num_values < rg.num_rows : ch.num_values != rg.num_rows) {
          return Corrupt(col + " has " + std::to_string(ch.num_values) + " values for " +
                         std::to_string(rg.num_rows) + " rows");
        }
      }
    }
    return Status::OK();
  }

  static int64_t ChunkStart(const ChunkInfo& c) {
    if (c.dictionary_page_offset > 0 && c.dictionary_page_offset < c.data_page_offset) {
      return c.dictionary_page_offset;
    }
    return c.data_page_offset;
  }

  // Decompresses `in` into *out (or points *view at it when uncompressed).
  Status Decompress(int32_t codec, std::string_view in, uint64_t uncompressed, const Leaf& leaf,
                    std::string_view* view) {
    switch (codec) {
      case pq::kUncompressed:
        if (in.size() != uncompressed) {
          return Corrupt("column " + leaf.name + ": an uncompressed page of " +
                         std::to_string(in.size()) + " bytes declares " +
                         std::to_string(uncompressed));
        }
        *view = in;
        return Status::OK();
      case pq::kSnappy: {
        size_t len = 0;
        if (!snappy::GetUncompressedLength(in.data(), in.size(), &len) || len != uncompressed) {
          return Corrupt("column " + leaf.name + ": a Snappy page does not decode to its " +
                         std::to_string(uncompressed) + " declared bytes");
        }
        page_.resize(static_cast<size_t>(uncompressed));
        if (!snappy::RawUncompress(in.data(), in.size(), page_.data())) {
          return Corrupt("column " + leaf.name + ": a Snappy page does not decode");
        }
        *view = page_;
        return Status::OK();
      }
      case pq::kZstd: {
        if (dctx_ == nullptr) dctx_ = ZSTD_createDCtx();
        if (dctx_ == nullptr) return Status::Internal("zstd: could not create a context");
        page_.resize(static_cast<size_t>(uncompressed));
        const size_t r =
            ZSTD_decompressDCtx(dctx_, page_.data(), page_.size(), in.data(), in.size());
        if (ZSTD_isError(r) || r != uncompressed) {
          return Corrupt("column " + leaf.name + ": a zstd page does not decode to its " +
                         std::to_string(uncompressed) + " declared bytes" +
                         (ZSTD_isError(r) ? std::string(" (") + ZSTD_getErrorName(r) + ")" : ""));
        }
        *view = page_;
        return Status::OK();
      }
      default:
        return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                    " uses compression codec " + std::to_string(codec) +
                                    "; ferry reads uncompressed, Snappy and zstd pages");
    }
  }

  // Decodes `count` PLAIN values from `in` into the cursor's column (converted to f's type).
  Status DecodePlain(std::string_view in, size_t count, const Leaf& leaf, const Field& f,
                     LevelCursor* cur) {
    Column* col = cur->col();
    const TypeKind k = f.type.kind();
    auto need = [&](uint64_t bytes) -> Status {
      if (bytes > in.size()) {
        return Corrupt("column " + leaf.name + ": a page holds " + std::to_string(in.size()) +
                       " value bytes, " + std::to_string(bytes) + " needed");
      }
      return Status::OK();
    };
    switch (leaf.physical) {
      case pq::kBoolean: {
        FERRY_RETURN_IF_ERROR(need((static_cast<uint64_t>(count) + 7) / 8));
        const auto* p = reinterpret_cast<const uint8_t*>(in.data());
        for (size_t i = 0; i < count; ++i) {
          cur->BeforeValue();
          col->AppendBool(((p[i / 8] >> (i % 8)) & 1) != 0);
        }
        return Status::OK();
      }
      case pq::kInt32: {
        FERRY_RETURN_IF_ERROR(need(static_cast<uint64_t>(count) * 4));
        for (size_t i = 0; i < count; ++i) {
          const auto v = LoadLE<int32_t>(in.data() + i * 4);
          cur->BeforeValue();
          if (k == TypeKind::kInt64) {
            col->AppendInt64(v);
          } else if (k == TypeKind::kDecimal) {
            col->AppendDecimal(v);
          } else {
            col->AppendInt32(v);
          }
        }
        return Status::OK();
      }
      case pq::kInt64: {
        FERRY_RETURN_IF_ERROR(need(static_cast<uint64_t>(count) * 8));
        for (size_t i = 0; i < count; ++i) {
          auto v = LoadLE<int64_t>(in.data() + i * 8);
          cur->BeforeValue();
          if (k == TypeKind::kDecimal) {
            col->AppendDecimal(v);
            continue;
          }
          if (leaf.micros_div != 1) {
            // Floor division, so that a time before the epoch stays before it.
            int64_t q = v / leaf.micros_div;
            if ((v % leaf.micros_div) < 0) --q;
            v = q;
          } else if (leaf.micros_mul != 1) {
            if (__builtin_mul_overflow(v, leaf.micros_mul, &v)) {
              return Corrupt("column " + leaf.name + " holds a time beyond the microsecond range");
            }
          }
          col->AppendInt64(v);
        }
        return Status::OK();
      }
      case pq::kFloat: {
        FERRY_RETURN_IF_ERROR(need(static_cast<uint64_t>(count) * 4));
        for (size_t i = 0; i < count; ++i) {
          const auto v = LoadLE<float>(in.data() + i * 4);
          cur->BeforeValue();
          if (k == TypeKind::kFloat64) {
            col->AppendDouble(static_cast<double>(v));
          } else {
            col->AppendFloat(v);
          }
        }
        return Status::OK();
      }
      case pq::kDouble: {
        FERRY_RETURN_IF_ERROR(need(static_cast<uint64_t>(count) * 8));
        for (size_t i = 0; i < count; ++i) {
          cur->BeforeValue();
          col->AppendDouble(LoadLE<double>(in.data() + i * 8));
        }
        return Status::OK();
      }
      case pq::kByteArray: {
        size_t pos = 0;
        for (size_t i = 0; i < count; ++i) {
          if (in.size() - pos < 4) return need(pos + 4);
          const uint32_t len = LoadLE<uint32_t>(in.data() + pos);
          pos += 4;
          if (len > in.size() - pos) return need(static_cast<uint64_t>(pos) + len);
          cur->BeforeValue();
          FERRY_RETURN_IF_ERROR(AppendByteValue(in.substr(pos, len), leaf, f, col));
          pos += len;
        }
        return Status::OK();
      }
      case pq::kFixedLenByteArray: {
        const auto w = static_cast<size_t>(leaf.type_length);
        FERRY_RETURN_IF_ERROR(need(static_cast<uint64_t>(count) * w));
        for (size_t i = 0; i < count; ++i) {
          cur->BeforeValue();
          FERRY_RETURN_IF_ERROR(AppendByteValue(in.substr(i * w, w), leaf, f, col));
        }
        return Status::OK();
      }
      default:
        return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                    " has physical type " + PhysicalName(leaf.physical) +
                                    ", which ferry does not read");
    }
  }

  Status AppendByteValue(std::string_view v, const Leaf& leaf, const Field& f, Column* col) {
    switch (f.type.kind()) {
      case TypeKind::kUuid:
        col->AppendUuid(reinterpret_cast<const uint8_t*>(v.data()));
        return Status::OK();
      case TypeKind::kDecimal:
        if (v.empty() || v.size() > 16) {
          return Corrupt("column " + leaf.name + " holds a decimal of " + std::to_string(v.size()) +
                         " bytes");
        }
        col->AppendDecimal(BigEndianToInt128(reinterpret_cast<const uint8_t*>(v.data()), v.size()));
        return Status::OK();
      default:
        if (col->bytes().size() + v.size() > std::numeric_limits<uint32_t>::max()) {
          return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                      ": a row group holds more than 4 GiB of its values");
        }
        col->AppendBytes(v);
        return Status::OK();
    }
  }

  // Reads definition levels (bit width 1) for `count` values; returns the non-NULL count.
  Result<size_t> DecodeLevels(std::string_view in, size_t count, const Leaf& leaf) {
    levels_.resize(count);
    if (!DecodeRleHybrid(in, 1, count, levels_.data())) {
      return Corrupt("column " + leaf.name + ": the definition levels of a page do not decode");
    }
    size_t present = 0;
    for (uint32_t l : levels_) present += l;
    return present;
  }

  // Lists: reads `count` repetition and definition levels, checks that they describe list rows
  // (level 1 only inside an open list, no level above its maximum) and returns the present
  // elements' count.
  Result<size_t> DecodeListLevels(std::string_view rep, std::string_view def, size_t count,
                                  const Leaf& leaf, const ListState& state) {
    rep_levels_.resize(count);
    levels_.resize(count);
    if (!DecodeRleHybrid(rep, 1, count, rep_levels_.data()) ||
        !DecodeRleHybrid(def, LevelBitWidth(leaf.max_def), count, levels_.data())) {
      return Corrupt("column " + leaf.name + ": the levels of a page do not decode");
    }
    const uint32_t outer = leaf.list_optional ? 1 : 0;
    const auto max_def = static_cast<uint32_t>(leaf.max_def);
    bool open = state.open;
    size_t present = 0;
    for (size_t i = 0; i < count; ++i) {
      const uint32_t r = rep_levels_[i], d = levels_[i];
      if (r > 1 || d > max_def || (r == 1 && (!open || d <= outer))) {
        return Corrupt("column " + leaf.name + ": a page has repetition level " +
                       std::to_string(r) + " with definition level " + std::to_string(d) +
                       " where they describe no list");
      }
      if (r == 0) open = d > outer;
      present += d == max_def ? 1 : 0;
    }
    return present;
  }

  Status DecodeValues(int32_t encoding, std::string_view values, size_t present, const Leaf& leaf,
                      const Field& f, const Column* dict, bool optional, Column* col,
                      ListState* list) {
    LevelCursor cur = list != nullptr ? LevelCursor(col, &levels_, &rep_levels_, leaf, list)
                                      : LevelCursor(col, optional ? &levels_ : nullptr);
    if (encoding == pq::kPlain) {
      FERRY_RETURN_IF_ERROR(DecodePlain(values, present, leaf, f, &cur));
    } else if (encoding == pq::kRleDictionary || encoding == pq::kPlainDictionary) {
      if (dict == nullptr) {
        return Corrupt("column " + leaf.name + ": a dictionary-encoded page has no dictionary");
      }
      if (present > 0) {
        if (values.empty()) {
          return Corrupt("column " + leaf.name + ": a dictionary page has no bit width");
        }
        const int bit_width = static_cast<uint8_t>(values[0]);
        if (bit_width > 32) {
          return Corrupt("column " + leaf.name + ": dictionary indices of " +
                         std::to_string(bit_width) + " bits");
        }
        indices_.resize(present);
        if (!DecodeRleHybrid(values.substr(1), bit_width, present, indices_.data())) {
          return Corrupt("column " + leaf.name +
                         ": the dictionary indices of a page do not decode");
        }
        for (uint32_t idx : indices_) {
          if (idx >= dict->size()) {
            return Corrupt("column " + leaf.name + ": dictionary index " + std::to_string(idx) +
                           " beyond the dictionary's " + std::to_string(dict->size()) + " entries");
          }
          cur.BeforeValue();
          AppendValue(*dict, idx, col);
        }
      }
    } else if (encoding == pq::kRle && leaf.physical == pq::kBoolean) {
      // RLE booleans: a 4-byte length, then the hybrid encoding of bit width 1.
      if (values.size() < 4) return Corrupt("column " + leaf.name + ": a boolean RLE page is cut");
      const uint32_t len = LoadLE<uint32_t>(values.data());
      if (len > values.size() - 4)
        return Corrupt("column " + leaf.name + ": a boolean RLE page is cut");
      indices_.resize(present);
      if (!DecodeRleHybrid(values.substr(4, len), 1, present, indices_.data())) {
        return Corrupt("column " + leaf.name + ": a boolean RLE page does not decode");
      }
      for (uint32_t b : indices_) {
        cur.BeforeValue();
        col->AppendBool(b != 0);
      }
    } else {
      return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                  " uses encoding " + std::to_string(encoding) +
                                  "; ferry reads PLAIN and dictionary-encoded pages");
    }
    cur.Finish();
    return Status::OK();
  }

  Status ReadChunk(const ChunkInfo& ch, const Leaf& leaf, const Field& f, Column* col,
                   ListState* list) {
    const int64_t start = ChunkStart(ch);
    FERRY_RETURN_IF_ERROR(ReadRange(static_cast<uint64_t>(start),
                                    static_cast<uint64_t>(ch.total_compressed_size), &chunk_));
    const bool optional = leaf.repetition == pq::kOptional;
    std::optional<Column> dict;
    const std::string_view bytes(chunk_);
    size_t pos = 0;
    int64_t values_read = 0;
    while (values_read < ch.num_values) {
      if (pos >= bytes.size()) {
        return Corrupt("column " + leaf.name + ": the chunk ends after " +
                       std::to_string(values_read) + " of its " + std::to_string(ch.num_values) +
                       " values");
      }
      CompactReader r(bytes.substr(pos));
      const PageHeader h = ReadPageHeader(r);
      if (!r.ok()) {
        return Corrupt("column " + leaf.name + ": a page header does not decode: " + r.error());
      }
      pos += r.pos();
      if (h.compressed_size < 0 || static_cast<size_t>(h.compressed_size) > bytes.size() - pos) {
        return Corrupt("column " + leaf.name + ": a page of " + std::to_string(h.compressed_size) +
                       " bytes runs past its chunk");
      }
      if (h.uncompressed_size < 0 ||
          static_cast<uint64_t>(h.uncompressed_size) > options_.max_page_bytes) {
        return Corrupt("column " + leaf.name + ": a page declares " +
                       std::to_string(h.uncompressed_size) + " uncompressed bytes");
      }
      const std::string_view payload = bytes.substr(pos, static_cast<size_t>(h.compressed_size));
      pos += static_cast<size_t>(h.compressed_size);
      const auto uncompressed = static_cast<uint64_t>(h.uncompressed_size);

      if (h.type == pq::kDictionaryPage) {
        if (dict) return Corrupt("column " + leaf.name + ": a chunk has two dictionary pages");
        if (h.num_values < 0 || static_cast<uint64_t>(h.num_values) > options_.max_page_values) {
          return Corrupt("column " + leaf.name + ": a dictionary page declares " +
                         std::to_string(h.num_values) + " values");
        }
        if (h.encoding != pq::kPlain && h.encoding != pq::kPlainDictionary) {
          return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                      " has a dictionary page in encoding " +
                                      std::to_string(h.encoding));
        }
        std::string_view body;
        FERRY_RETURN_IF_ERROR(Decompress(ch.codec, payload, uncompressed, leaf, &body));
        dict.emplace(f.type);
        LevelCursor cur(&*dict, nullptr);
        FERRY_RETURN_IF_ERROR(DecodePlain(body, static_cast<size_t>(h.num_values), leaf, f, &cur));
        continue;
      }
      if (h.type != pq::kDataPage && h.type != pq::kDataPageV2) continue;  // index pages

      if (h.num_values < 0 || static_cast<uint64_t>(h.num_values) > options_.max_page_values ||
          h.num_values > ch.num_values - values_read) {
        return Corrupt("column " + leaf.name + ": a page declares " + std::to_string(h.num_values) +
                       " values, " + std::to_string(ch.num_values - values_read) +
                       " left in the chunk");
      }
      const auto count = static_cast<size_t>(h.num_values);
      std::string_view values;
      size_t present = count;
      if (h.type == pq::kDataPage) {
        std::string_view body;
        FERRY_RETURN_IF_ERROR(Decompress(ch.codec, payload, uncompressed, leaf, &body));
        if (list != nullptr) {
          // Repetition levels, then definition levels, each with a 4-byte length.
          if (h.def_level_encoding != pq::kRle) {
            return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                        " has levels in encoding " +
                                        std::to_string(h.def_level_encoding));
          }
          std::string_view rest = body;
          std::string_view parts[2];
          for (auto& part : parts) {
            if (rest.size() < 4) return Corrupt("column " + leaf.name + ": a page is cut");
            const uint32_t len = LoadLE<uint32_t>(rest.data());
            if (len > rest.size() - 4) {
              return Corrupt("column " + leaf.name + ": levels run past their page");
            }
            part = rest.substr(4, len);
            rest = rest.substr(4 + len);
          }
          FERRY_ASSIGN_OR_RETURN(present, DecodeListLevels(parts[0], parts[1], count, leaf, *list));
          values = rest;
        } else if (optional) {
          if (h.def_level_encoding != pq::kRle) {
            return Status::NotSupported("Parquet file " + file_->name() + " column " + leaf.name +
                                        " has definition levels in encoding " +
                                        std::to_string(h.def_level_encoding));
          }
          if (body.size() < 4) return Corrupt("column " + leaf.name + ": a page is cut");
          const uint32_t len = LoadLE<uint32_t>(body.data());
          if (len > body.size() - 4) {
            return Corrupt("column " + leaf.name + ": definition levels run past their page");
          }
          FERRY_ASSIGN_OR_RETURN(present, DecodeLevels(body.substr(4, len), count, leaf));
          values = body.substr(4 + len);
        } else {
          values = body;
        }
      } else {
        if (h.rep_levels_bytes < 0 || h.def_levels_bytes < 0 ||
            static_cast<uint64_t>(h.rep_levels_bytes) + static_cast<uint64_t>(h.def_levels_bytes) >
                payload.size() ||
            static_cast<uint64_t>(h.rep_levels_bytes) + static_cast<uint64_t>(h.def_levels_bytes) >
                uncompressed) {
          return Corrupt("column " + leaf.name + ": the levels of a v2 page run past the page");
        }
        const auto rep = static_cast<size_t>(h.rep_levels_bytes);
        const auto def = static_cast<size_t>(h.def_levels_bytes);
        if (list != nullptr) {
          FERRY_ASSIGN_OR_RETURN(
              present, DecodeListLevels(payload.substr(0, rep), payload.substr(rep, def), count,
                                        leaf, *list));
        } else if (optional) {
          FERRY_ASSIGN_OR_RETURN(present, DecodeLevels(payload.substr(rep, def), count, leaf));
        }
        const std::string_view rest = payload.substr(rep + def);
        const uint64_t rest_size = uncompressed - rep - def;
        if (h.is_compressed) {
          FERRY_RETURN_IF_ERROR(Decompress(ch.codec, rest, rest_size, leaf, &values));
        } else {
          if (rest.size() != rest_size) {
            return Corrupt("column " + leaf.name + ": a v2 page's size does not add up");
          }
          values = rest;
        }
      }
      if (h.encoding < 0) return Corrupt("column " + leaf.name + ": a page has no encoding");
      FERRY_RETURN_IF_ERROR(DecodeValues(h.encoding, values, present, leaf, f,
                                         dict ? &*dict : nullptr, optional, col, list));
      values_read += h.num_values;
    }
    return Status::OK();
  }

  std::unique_ptr<RandomAccessFile> file_;
  std::shared_ptr<const Schema> schema_;
  ReaderOptions options_;
  uint64_t data_end_ = 0;  // where the footer starts
  uint64_t num_rows_ = 0;
  std::vector<Leaf> leaves_;
  std::vector<int> field_leaf_;  // per schema field: its leaf, or -1 when the file lacks it
  std::vector<RowGroupInfo> row_groups_;
  std::vector<std::pair<std::string, std::string>> kv_;
  std::string chunk_;  // the column chunk being decoded
  std::string page_;   // a decompressed page
  std::vector<uint32_t> levels_;
  std::vector<uint32_t> rep_levels_;
  std::vector<uint32_t> indices_;
  ZSTD_DCtx* dctx_ = nullptr;
};

}  // namespace

std::unique_ptr<RandomAccessFile> MemoryFile(std::string data, std::string name) {
  return std::make_unique<StringFile>(std::move(data), std::move(name));
}

Result<std::unique_ptr<Reader>> Reader::Open(std::unique_ptr<RandomAccessFile> file,
                                             std::shared_ptr<const Schema> schema,
                                             ReaderOptions options) {
  if (file == nullptr || schema == nullptr) {
    return Status::InvalidArgument("Parquet reader: a file and a schema are required");
  }
  auto r = std::make_unique<ReaderImpl>(std::move(file), std::move(schema), options);
  FERRY_RETURN_IF_ERROR(r->Init());
  return std::unique_ptr<Reader>(std::move(r));
}

void AppendValue(const Column& src, size_t row, Column* dst) {
  if (!src.IsValid(row)) {
    dst->AppendNull();
    return;
  }
  switch (src.type().kind()) {
    case TypeKind::kBoolean:
      dst->AppendBool(src.fixed_data()[row] != 0);
      return;
    case TypeKind::kInt32:
    case TypeKind::kDate:
      dst->AppendInt32(src.values<int32_t>()[row]);
      return;
    case TypeKind::kInt64:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      dst->AppendInt64(src.values<int64_t>()[row]);
      return;
    case TypeKind::kFloat32:
      dst->AppendFloat(src.values<float>()[row]);
      return;
    case TypeKind::kFloat64:
      dst->AppendDouble(src.values<double>()[row]);
      return;
    case TypeKind::kDecimal: {
      int128_t v;
      std::memcpy(&v, src.fixed_data() + row * 16, 16);
      dst->AppendDecimal(v);
      return;
    }
    case TypeKind::kUuid:
      dst->AppendUuid(src.fixed_data() + row * 16);
      return;
    case TypeKind::kString:
    case TypeKind::kBinary:
      dst->AppendBytes(src.GetBytes(row));
      return;
    case TypeKind::kList: {
      const auto [first, last] = src.ListRange(row);
      for (size_t e = first; e < last; ++e) AppendValue(src.list_child(), e, &dst->list_child());
      dst->AppendListEnd();
      return;
    }
  }
}

}  // namespace ferry::parquet
