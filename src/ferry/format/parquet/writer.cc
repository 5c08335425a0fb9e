// Parquet writer: one ColumnWriter per top-level field encodes values straight from the batch's
// column buffers into the open page, cuts pages at page_bytes (compressing each), and keeps the
// row group's column chunks in memory until row_group_bytes, when they are appended to the stream
// in column order. The footer is written with the hand-rolled Thrift compact encoder.
//
// Values are dictionary-encoded (every type but boolean) until the chunk's dictionary outgrows
// dictionary_page_bytes, then PLAIN; see ColumnWriter. The dictionary page is written before the
// chunk's data pages when the chunk is flushed.
#include "ferry/format/parquet/writer.h"

#include <snappy.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ferry/base/assert.h"
#include "ferry/format/parquet/encoding.h"
#include "ferry/format/parquet/thrift_compact.h"

namespace ferry::parquet {

static_assert(std::endian::native == std::endian::little,
              "the Parquet writer copies little-endian values straight from the batch");

using internal::ByteBuffer;
using thrift::CompactWriter;

bool EncodingHints::StartPlain(int32_t field_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = columns_.find(field_id);
  if (it == columns_.end() || it->second.plain_left == 0) return false;
  --it->second.plain_left;
  return true;
}

void EncodingHints::GaveUp(int32_t field_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Column& c = columns_[field_id];
  c.streak = c.streak == 0 ? 2 : std::min(c.streak * 2, kMaxPlainChunks);
  c.plain_left = c.streak;
}

void EncodingHints::Kept(int32_t field_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Column& c = columns_[field_id];
  c.plain_left = c.streak = 0;
}

void EncodingHints::Compressed(int32_t field_id, uint64_t raw, uint64_t packed) {
  std::lock_guard<std::mutex> lock(mu_);
  Column& c = columns_[field_id];
  c.raw += raw;
  c.packed += packed;
}

double EncodingHints::Ratio(int32_t field_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = columns_.find(field_id);
  if (it == columns_.end() || it->second.raw == 0) return 1.0;
  return static_cast<double>(it->second.packed) / static_cast<double>(it->second.raw);
}

Result<Compression> ParseCompression(const std::string& name) {
  if (name == "zstd") return Compression::kZstd;
  if (name == "snappy") return Compression::kSnappy;
  if (name == "none" || name == "uncompressed") return Compression::kUncompressed;
  return Status::InvalidArgument("unknown Parquet compression '" + name +
                                 "': use zstd, snappy or none");
}

namespace {

constexpr const char* kCreatedBy = "ferry version 0.1.0";
// Binary/string min/max larger than this stay out of the Parquet statistics (as Arrow's default
// max_statistics_size): huge footers cost every reader more than the pruning gains. The Iceberg
// bounds are truncated instead and are always written.
constexpr size_t kMaxStatisticsBytes = 4096;

// Enumerations of parquet.thrift.
namespace pq {
enum Type : int32_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7,
};
enum ConvertedType : int32_t {
  kUtf8 = 0,
  kList = 3,
  kDecimal = 5,
  kDate = 6,
  kTimestampMicros = 10,
};
enum Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum Encoding : int32_t { kPlain = 0, kRle = 3, kRleDictionary = 8 };
enum PageType : int32_t { kDataPage = 0, kDictionaryPage = 2 };
enum Codec : int32_t { kUncompressed = 0, kSnappy = 1, kZstd = 6 };
// LogicalType union members.
enum LogicalType : int16_t {
  kLtString = 1,
  kLtList = 3,
  kLtDecimal = 5,
  kLtDate = 6,
  kLtTime = 7,
  kLtTimestamp = 8,
  kLtUuid = 14,
};
}  // namespace pq

int32_t PhysicalTypeOf(const DataType& t) {
  switch (t.kind()) {
    case TypeKind::kBoolean:
      return pq::kBoolean;
    case TypeKind::kInt32:
    case TypeKind::kDate:
      return pq::kInt32;
    case TypeKind::kInt64:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return pq::kInt64;
    case TypeKind::kFloat32:
      return pq::kFloat;
    case TypeKind::kFloat64:
      return pq::kDouble;
    case TypeKind::kDecimal:
      if (t.precision() <= 9) return pq::kInt32;
      if (t.precision() <= 18) return pq::kInt64;
      return pq::kFixedLenByteArray;
    case TypeKind::kString:
    case TypeKind::kBinary:
      return pq::kByteArray;
    case TypeKind::kUuid:
      return pq::kFixedLenByteArray;
    case TypeKind::kList:
      return PhysicalTypeOf(t.list().type);
  }
  return pq::kByteArray;
}

int32_t CodecOf(Compression c) {
  switch (c) {
    case Compression::kUncompressed:
      return pq::kUncompressed;
    case Compression::kSnappy:
      return pq::kSnappy;
    case Compression::kZstd:
      return pq::kZstd;
  }
  return pq::kUncompressed;
}

template <typename T>
std::string LittleEndianBytes(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

// zstd's compression context of the calling thread, reused by every writer the thread runs. A
// context's first use allocates and initializes its tables, which costs more than compressing a
// small page; a table with thousands of partitions opens thousands of writers, each with a few
// small pages. One context per thread also bounds the memory whatever the number of writers.
ZSTD_CCtx* ThreadZstdContext() {
  struct Owned {
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ~Owned() { ZSTD_freeCCtx(cctx); }
  };
  thread_local Owned owned;
  return owned.cctx;
}

// The codec of a writer's pages.
class Compressor {
 public:
  Compressor(Compression codec, int level) : codec_(codec), level_(level) {}
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  bool enabled() const { return codec_ != Compression::kUncompressed; }

  // Replaces out's contents with the compressed form of [data, data + n).
  Status Compress(const char* data, size_t n, ByteBuffer* out) {
    out->clear();
    switch (codec_) {
      case Compression::kZstd: {
        ZSTD_CCtx* cctx = ThreadZstdContext();
        if (cctx == nullptr) return Status::Internal("zstd: could not create a context");
        size_t bound = ZSTD_compressBound(n);
        char* dst = out->AppendUninit(bound);
        size_t r = ZSTD_compressCCtx(cctx, dst, bound, data, n, level_);
        if (ZSTD_isError(r)) {
          return Status::Internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(r));
        }
        out->Truncate(r);
        return Status::OK();
      }
      case Compression::kSnappy: {
        size_t bound = snappy::MaxCompressedLength(n);
        char* dst = out->AppendUninit(bound);
        size_t len = 0;
        snappy::RawCompress(data, n, dst, &len);
        out->Truncate(len);
        return Status::OK();
      }
      case Compression::kUncompressed:
        break;
    }
    out->Append(data, n);
    return Status::OK();
  }

 private:
  Compression codec_;
  int level_;
};

// What the footer needs about one column chunk.
struct ChunkMeta {
  int64_t file_offset = 0;              // first page: the dictionary page if any
  int64_t data_page_offset = 0;         // first data page
  int64_t dictionary_page_offset = -1;  // -1: no dictionary page
  int64_t num_values = 0;               // including NULLs
  int64_t uncompressed_bytes = 0;
  int64_t compressed_bytes = 0;
  int64_t null_count = 0;
  int32_t dict_data_pages = 0;   // RLE_DICTIONARY data pages
  int32_t plain_data_pages = 0;  // PLAIN data pages
  bool has_min_max = false;
  std::string min, max;  // PLAIN-encoded values
};

struct RowGroupMeta {
  int64_t file_offset = 0;
  int64_t num_rows = 0;
  int64_t uncompressed_bytes = 0;
  int64_t compressed_bytes = 0;
  std::vector<ChunkMeta> columns;
};

// What a column writer needs from WriterOptions.
struct ColumnConfig {
  uint64_t page_bytes = 1ull << 20;
  bool dictionary = true;
  uint64_t dictionary_bytes = 1ull << 20;
  EncodingHints* hints = nullptr;  // the table's, or the file's own; never null in a writer
};

// Dictionary indices are kept as uint32 while a page is open: 4 bytes of page budget each.
constexpr size_t kIndexBytes = sizeof(uint32_t);
constexpr uint32_t kAbsent = std::numeric_limits<uint32_t>::max();
// No dictionary page may exceed this (a page's size is an i32 in the page header).
constexpr uint64_t kMaxDictionaryBytes = 1ull << 30;

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  return x;
}

template <typename K>
inline uint64_t HashKey(const K& k) {
  static_assert(sizeof(K) == 4 || sizeof(K) == 8 || sizeof(K) == 16);
  if constexpr (sizeof(K) <= 8) {
    uint64_t x = 0;
    std::memcpy(&x, &k, sizeof(K));
    return Mix64(x);
  } else {
    uint64_t w[2];
    std::memcpy(w, &k, 16);
    return Mix64(w[0] ^ Mix64(w[1] + 0x9E3779B97F4A7C15ULL));
  }
}

// Open-addressing (linear probing) table from fixed-width keys, compared bitwise, to dictionary
// indices in insertion order. Keys live in one array (the dictionary itself); slots hold index + 1.
// Kept at most half full. Clear() keeps the storage for the next column chunk.
template <typename K>
class FixedDict {
 public:
  size_t size() const { return count_; }
  const K* keys() const { return reinterpret_cast<const K*>(keys_.data()); }
  uint64_t MemoryBytes() const { return keys_.capacity() + cap_ * sizeof(uint32_t); }

  // The index of k, or kAbsent with *slot set to where Insert would put it.
  uint32_t Find(const K& k, size_t* slot) {
    if (cap_ == 0) Rehash(1024);
    size_t s = HashKey(k) & (cap_ - 1);
    const K* ks = keys();
    for (;;) {
      const uint32_t e = slots_[s];
      if (e == 0) {
        *slot = s;
        return kAbsent;
      }
      if (std::memcmp(&ks[e - 1], &k, sizeof(K)) == 0) return e - 1;
      s = (s + 1) & (cap_ - 1);
    }
  }
  // Adds k (absent, found at `slot` by the last Find) and returns its index.
  uint32_t Insert(const K& k, size_t slot) {
    const auto idx = static_cast<uint32_t>(count_);
    std::memcpy(keys_.AppendUninit(sizeof(K)), &k, sizeof(K));
    slots_[slot] = idx + 1;
    if (++count_ * 2 > cap_) Rehash(cap_ * 2);
    return idx;
  }
  void Clear() {
    if (count_ == 0) return;
    count_ = 0;
    keys_.clear();
    std::memset(slots_.get(), 0, cap_ * sizeof(uint32_t));
  }
  // Clear() and the storage too.
  void Release() {
    count_ = cap_ = 0;
    keys_.Release();
    slots_.reset();
  }

 private:
  void Rehash(size_t cap) {
    slots_.reset(new uint32_t[cap]());
    cap_ = cap;
    const K* ks = keys();
    for (size_t i = 0; i < count_; ++i) {
      size_t s = HashKey(ks[i]) & (cap_ - 1);
      while (slots_[s] != 0) s = (s + 1) & (cap_ - 1);
      slots_[s] = static_cast<uint32_t>(i + 1);
    }
  }

  internal::ByteBuffer keys_;
  std::unique_ptr<uint32_t[]> slots_;
  size_t cap_ = 0;
  size_t count_ = 0;
};

// The same for byte strings: the entries are kept PLAIN-encoded (4-byte length, bytes) in one
// arena, which is also the dictionary page's body; slots hold index + 1 and 32 bits of the hash.
class ByteDict {
 public:
  size_t size() const { return count_; }
  size_t plain_bytes() const { return plain_.size(); }
  std::string_view plain() const { return plain_.view(); }
  uint64_t MemoryBytes() const {
    return plain_.capacity() + starts_.capacity() + cap_ * sizeof(Slot);
  }
  static uint32_t Hash(std::string_view v) {
    return static_cast<uint32_t>(Mix64(std::hash<std::string_view>{}(v)));
  }

  uint32_t Find(std::string_view v, uint32_t h, size_t* slot) {
    if (cap_ == 0) Rehash(1024);
    size_t s = h & (cap_ - 1);
    const auto* starts = reinterpret_cast<const uint32_t*>(starts_.data());
    for (;;) {
      const Slot e = slots_[s];
      if (e.index1 == 0) {
        *slot = s;
        return kAbsent;
      }
      if (e.hash == h) {
        const char* p = plain_.data() + starts[e.index1 - 1];
        uint32_t len;
        std::memcpy(&len, p, 4);
        if (len == v.size() && std::memcmp(p + 4, v.data(), len) == 0) return e.index1 - 1;
      }
      s = (s + 1) & (cap_ - 1);
    }
  }
  uint32_t Insert(std::string_view v, uint32_t h, size_t slot) {
    const auto idx = static_cast<uint32_t>(count_);
    const auto start = static_cast<uint32_t>(plain_.size());
    std::memcpy(starts_.AppendUninit(4), &start, 4);
    const auto len = static_cast<uint32_t>(v.size());
    char* p = plain_.AppendUninit(4 + v.size());
    std::memcpy(p, &len, 4);
    if (len > 0) std::memcpy(p + 4, v.data(), len);
    slots_[slot] = Slot{idx + 1, h};
    if (++count_ * 2 > cap_) Rehash(cap_ * 2);
    return idx;
  }
  void Clear() {
    if (count_ == 0) return;
    count_ = 0;
    plain_.clear();
    starts_.clear();
    std::memset(static_cast<void*>(slots_.get()), 0, cap_ * sizeof(Slot));
  }
  // Clear() and the storage too.
  void Release() {
    count_ = cap_ = 0;
    plain_.Release();
    starts_.Release();
    slots_.reset();
  }

 private:
  struct Slot {
    uint32_t index1;
    uint32_t hash;
  };
  void Rehash(size_t cap) {
    std::unique_ptr<Slot[]> old = std::move(slots_);
    const size_t old_cap = cap_;
    slots_.reset(new Slot[cap]());
    cap_ = cap;
    for (size_t i = 0; i < old_cap; ++i) {
      if (old[i].index1 == 0) continue;
      size_t s = old[i].hash & (cap_ - 1);
      while (slots_[s].index1 != 0) s = (s + 1) & (cap_ - 1);
      slots_[s] = old[i];
    }
  }

  internal::ByteBuffer plain_;
  internal::ByteBuffer starts_;  // uint32 offset of each entry in plain_
  std::unique_ptr<Slot[]> slots_;
  size_t cap_ = 0;
  size_t count_ = 0;
};

// Encodes one column: pages, compression, the row group's chunk buffer, and statistics.
//
// Dictionary encoding: while dict_active_, EncodeValues appends uint32 dictionary indices to
// values_ (and adds the new values to the dictionary, folding only those into the statistics);
// CutPage turns them into an RLE_DICTIONARY page (bit width byte + RLE/bit-packed hybrid). When
// the dictionary would outgrow its limit, EncodeValues stops before that value and sets
// fallback_: the open page is cut, the dictionary page is written (it precedes the data pages in
// the file) and the rest of the chunk is PLAIN. Whether the next chunks start PLAIN is the
// table's EncodingHints' call, told once a chunk what its values looked like.
class ColumnWriter {
 public:
  ColumnWriter(const Field& field, Compressor* compressor, const ColumnConfig& cfg)
      : field_(field),
        optional_(!field.required),
        physical_type_(PhysicalTypeOf(field.type)),
        dict_enabled_(cfg.dictionary && physical_type_ != pq::kBoolean),
        dict_limit_(std::min(cfg.dictionary_bytes, kMaxDictionaryBytes)),
        hints_(cfg.hints),
        dict_active_(dict_enabled_),
        compressor_(compressor),
        page_bytes_(std::max<uint64_t>(cfg.page_bytes, 1)) {}
  virtual ~ColumnWriter() = default;

  const Field& field() const { return field_; }
  int32_t physical_type() const { return physical_type_; }
  // Whether the chunk's pages carry levels (RLE).
  bool has_levels() const { return optional_ || nested_; }
  // The column's path in the file schema: its name, or for a list's element
  // [name, "list", "element"].
  std::vector<std::string> Path() const {
    if (!nested_) return {internal::ParquetColumnName(field_.name)};
    return {internal::ParquetColumnName(list_name_), "list", "element"};
  }

  // Makes this writer (built for the element field) the leaf of the 3-level LIST `list_field`:
  // repetition level 1 starts no new record; definition levels count the optional outer group,
  // the repeated group and the optional element.
  void SetList(const Field& list_field) {
    nested_ = true;
    list_name_ = list_field.name;
    outer_optional_ = !list_field.required;
    max_def_ = (outer_optional_ ? 1 : 0) + 1 + (optional_ ? 1 : 0);
  }

  // Appends rows [begin, end) of col, cutting pages as they fill.
  Status Append(const Column& col, size_t begin, size_t end) {
    if (!started_) {
      // A chunk's first values: whether it starts with a dictionary (asked here, not when the
      // last chunk ended, so that a file's end takes no turn of the table's PLAIN runs).
      started_ = true;
      dict_active_ = dict_enabled_ && !hints_->StartPlain(field_.id);
    }
    if (nested_) return AppendLists(col, begin, end);
    while (begin < end) {
      uint64_t used = PageBytes();
      if (used >= page_bytes_) {
        FERRY_RETURN_IF_ERROR(CutPage());
        used = 0;
      }
      // Before a probe, at most enough values to reach it are taken at a time: the hints' look
      // at kHintProbeValues values, then the chunk's own at kDictProbeEntries entries.
      size_t stop = end;
      if (dict_active_ && !dict_probed_) {
        const size_t left = kDictProbeEntries - std::min(DictSize(), kDictProbeEntries);
        stop =
            std::min(end, begin + (judged() ? std::max(left, kHintProbeValues) : kHintProbeValues));
      }
      size_t taken = EncodeValues(col, begin, stop, static_cast<size_t>(page_bytes_ - used));
      if (optional_ && taken > 0) {
        levels_.Append(col.validity() + begin, taken);
        if (col.null_count() > 0) {
          const uint8_t* v = col.validity() + begin;
          size_t valid = 0;
          for (size_t i = 0; i < taken; ++i) valid += v[i];
          page_nulls_ += taken - valid;
        }
      }
      page_rows_ += taken;
      begin += taken;
      if (dict_active_ && !judged()) [[unlikely]] {
        // The table's next chunks learn early what this one's values look like (a small file
        // of a partition may hold fewer values than this chunk's own probe needs).
        const uint64_t values = static_cast<uint64_t>(chunk_values_) + page_rows_;
        if (values >= kHintProbeValues) Judge(NearlyDistinct(values));
      }
      if (dict_active_ && !dict_probed_ && DictSize() >= kDictProbeEntries) [[unlikely]] {
        // Nearly every value so far new (keys, timestamps, amounts): the dictionary would only
        // grow to its limit and be dropped; PLAIN from here.
        dict_probed_ = true;
        const uint64_t values = static_cast<uint64_t>(chunk_values_) + page_rows_;
        if (NearlyDistinct(values)) {
          fallback_ = true;
        } else {
          Judge(false, /*firm=*/true);  // over what an earlier look at fewer values said
        }
      }
      if (fallback_) [[unlikely]] {
        FERRY_RETURN_IF_ERROR(FallBackToPlain());
      }
    }
    return Status::OK();
  }

  // Bytes of the row group held for this column: finished pages, the dictionary, the open page.
  uint64_t BufferedBytes() const {
    return chunk_.size() + dict_page_.size() + (dict_active_ ? DictPlainBytes() : 0) +
           values_.size() + levels_.size() + rep_levels_.size();
  }
  // What those bytes will take in the file: the open page and the dictionary not yet written
  // scaled by the compression the column's pages got so far in this file, or in the table's
  // earlier files while none of this one's is written. A small file's size is mostly its open
  // pages (up to page_bytes each, uncompressed): so that a file closed at a target size is near
  // it.
  uint64_t EstimatedFileBytes() const {
    const uint64_t open = values_.size() + levels_.size() + rep_levels_.size() +
                          (dict_active_ ? DictPlainBytes() : 0);
    const uint64_t raw = file_uncompressed_ + static_cast<uint64_t>(chunk_uncompressed_);
    const uint64_t packed = file_compressed_ + static_cast<uint64_t>(chunk_compressed_);
    const double ratio =
        raw > 0 ? static_cast<double>(packed) / static_cast<double>(raw) : hints_->Ratio(field_.id);
    return chunk_.size() + dict_page_.size() +
           static_cast<uint64_t>(static_cast<double>(open) * std::min(ratio, 1.0));
  }
  uint64_t MemoryBytes() const {
    return chunk_.capacity() + dict_page_.capacity() + values_.capacity() + levels_.capacity() +
           rep_levels_.capacity() + wide_levels_.capacity() + page_.capacity() +
           compressed_.capacity() + header_.capacity() + DictMemoryBytes();
  }

  // Closes the open page, writes the dictionary page if the chunk has one, and describes the
  // chunk (everything but its file offsets); its bytes are then dict_page() + chunk().
  Status FinishChunk(ChunkMeta* meta) {
    FERRY_RETURN_IF_ERROR(CutPage());
    if (dict_active_ && !judged() && chunk_values_ >= kJudgedValues) {
      Judge(NearlyDistinct(static_cast<uint64_t>(chunk_values_)));
    }
    if (dict_active_) FERRY_RETURN_IF_ERROR(WriteDictPage());
    meta->num_values = chunk_values_;
    meta->null_count = chunk_nulls_;
    meta->uncompressed_bytes = chunk_uncompressed_;
    meta->compressed_bytes = chunk_compressed_;
    meta->dict_data_pages = chunk_dict_pages_;
    meta->plain_data_pages = chunk_plain_pages_;
    TakeChunkStats(meta);
    file_values_ += static_cast<uint64_t>(chunk_values_);
    file_nulls_ += static_cast<uint64_t>(chunk_nulls_);
    file_compressed_ += static_cast<uint64_t>(chunk_compressed_);
    file_uncompressed_ += static_cast<uint64_t>(chunk_uncompressed_);
    hints_->Compressed(field_.id, static_cast<uint64_t>(chunk_uncompressed_),
                       static_cast<uint64_t>(chunk_compressed_));
    return Status::OK();
  }
  // The dictionary page (header + body), empty when the chunk has none.
  std::string_view dict_page() const { return dict_page_.view(); }
  std::string_view chunk() const { return chunk_.view(); }
  void ResetChunk() {
    chunk_.clear();
    dict_page_.clear();
    DictClear();
    dict_active_ = dict_enabled_;
    started_ = false;
    dict_probed_ = false;
    verdict_ = Verdict::kNone;
    chunk_values_ = chunk_nulls_ = chunk_uncompressed_ = chunk_compressed_ = 0;
    chunk_dict_pages_ = chunk_plain_pages_ = 0;
  }
  // Frees the buffers' storage; only between chunks (after ResetChunk), when they hold nothing.
  void ReleaseMemory() {
    for (ByteBuffer* b : {&chunk_, &dict_page_, &values_, &levels_, &rep_levels_, &wide_levels_,
                          &page_, &compressed_}) {
      b->Release();
    }
    std::string().swap(header_);
    DictRelease();
  }

  // For a list's element (keyed by the element's field id) as Java Iceberg's Parquet metrics:
  // value and null counts are the leaf's level entries and those below the maximum definition
  // level (NULL lists, empty lists and NULL elements), NaN counts are the elements', and there are
  // no bounds (a bound of a repeated field cannot prune rows).
  void FillMetrics(ColumnMetrics* m) const {
    m->field_id = field_.id;
    m->value_count = file_values_;
    m->null_count = file_nulls_;
    m->compressed_bytes = file_compressed_;
    FillBounds(m);
    if (nested_) {
      m->lower_bound.reset();
      m->upper_bound.reset();
    }
  }

 protected:
  // Encodes the non-NULL values among rows [begin, end) of col into values_ and folds them into
  // the chunk statistics. Takes at least one row and stops once the page would exceed `budget`
  // bytes (values plus one level byte per row for optional columns); returns the rows taken.
  // In dictionary mode it may take fewer rows, even none, when it sets fallback_.
  virtual size_t EncodeValues(const Column& col, size_t begin, size_t end, size_t budget) = 0;
  // Completes the page's value bytes (e.g. a partial byte of bit-packed booleans).
  virtual void FlushPageValues() {}
  virtual size_t PendingValueBytes() const { return 0; }
  // Writes the chunk's min/max into meta, merges them into the file's, resets the chunk's.
  virtual void TakeChunkStats(ChunkMeta* meta) = 0;
  // Iceberg bounds (and NaN count) over the whole file.
  virtual void FillBounds(ColumnMetrics* m) const = 0;
  // The dictionary: entries, PLAIN size, PLAIN bytes (appended to out), reset, heap bytes.
  virtual size_t DictSize() const { return 0; }
  virtual uint64_t DictPlainBytes() const { return 0; }
  virtual void DictPlain(ByteBuffer* /*out*/) const {}
  virtual void DictClear() {}
  virtual void DictRelease() {}
  virtual uint64_t DictMemoryBytes() const { return 0; }

  // Rows per page budget for fixed-width values of `width` bytes.
  size_t FixedRows(size_t begin, size_t end, size_t budget, size_t width) const {
    size_t cost = width + (optional_ ? 1 : 0);
    return std::min(end - begin, std::max<size_t>(1, (budget + cost - 1) / cost));
  }

  const Field field_;
  const bool optional_;
  const int32_t physical_type_;
  const bool dict_enabled_;    // the options and the type allow a dictionary
  const uint64_t dict_limit_;  // PLAIN bytes the dictionary may reach
  ByteBuffer values_;          // the open page's encoded values (uint32 indices in dictionary mode)
  EncodingHints* const hints_;  // what the table's chunks learnt: whether a chunk starts PLAIN
  bool dict_active_;            // this chunk's pages are still dictionary-encoded
  bool fallback_ = false;       // set by EncodeValues: the dictionary is full
  bool started_ = false;        // the chunk has had values (dict_active_ is decided)
  // Once a chunk's dictionary holds this many entries, a dictionary of nearly only distinct
  // values is given up (a probe, once per chunk).
  static constexpr size_t kDictProbeEntries = 16384;
  bool dict_probed_ = false;
  // The hints are told what a chunk's values look like once, after this many values (or at a
  // fallback, or at the chunk's end if it holds at least kJudgedValues).
  static constexpr size_t kHintProbeValues = 4096;
  static constexpr int64_t kJudgedValues = 256;
  enum class Verdict { kNone, kKept, kGaveUp };
  Verdict verdict_ = Verdict::kNone;  // what the hints were told about this chunk
  bool judged() const { return verdict_ != Verdict::kNone; }
  bool NearlyDistinct(uint64_t values) const { return DictSize() * 100 > values * 97; }
  // Tells the hints, unless they were told the same about this chunk; `firm` verdicts (the
  // chunk's own probe, a fallback) override an earlier look at fewer values.
  void Judge(bool distinct, bool firm = false) {
    const Verdict v = distinct ? Verdict::kGaveUp : Verdict::kKept;
    if (verdict_ == v || (judged() && !firm)) return;
    verdict_ = v;
    if (distinct) {
      hints_->GaveUp(field_.id);
    } else {
      hints_->Kept(field_.id);
    }
  }
  // A list's element: EncodeValues is given one whole list at a time and may fall back to PLAIN
  // only before its first element (it then takes none); a list that starts under the dictionary's
  // limit finishes in it, so that no list is split between a page and the next.
  bool nested_ = false;

 private:
  uint64_t PageBytes() const {
    return values_.size() + PendingValueBytes() + levels_.size() + rep_levels_.size();
  }

  // Large enough that EncodeValues takes every element it is given (and small enough not to
  // overflow its arithmetic).
  static constexpr size_t kWholeList = size_t{1} << 48;

  // Lists: every row becomes its level entries (a NULL or empty list one entry, else one per
  // element) and its elements' values; pages are cut between rows only.
  Status AppendLists(const Column& col, size_t begin, size_t end) {
    const Column& child = col.list_child();
    const uint32_t* off = col.offsets();
    const uint8_t* valid = col.validity();
    const uint8_t* elem_valid = child.validity();
    const uint8_t outer = outer_optional_ ? 1 : 0;
    const auto present = static_cast<uint8_t>(max_def_);
    for (size_t r = begin; r < end; ++r) {
      if (PageBytes() >= page_bytes_) FERRY_RETURN_IF_ERROR(CutPage());
      if (!valid[r] || off[r] == off[r + 1]) {
        rep_levels_.PushBack(0);
        levels_.PushBack(valid[r] ? outer : 0);  // empty list : NULL list
        ++page_rows_;
        ++page_nulls_;
        continue;
      }
      const size_t eb = off[r], ee = off[r + 1];
      for (;;) {
        const size_t taken = EncodeValues(child, eb, ee, kWholeList);
        if (fallback_) [[unlikely]] {
          FERRY_CHECK(taken == 0);
          FERRY_RETURN_IF_ERROR(FallBackToPlain());
          continue;
        }
        FERRY_CHECK(taken == ee - eb);
        break;
      }
      char* rep = rep_levels_.AppendUninit(ee - eb);
      char* def = levels_.AppendUninit(ee - eb);
      std::memset(rep, 1, ee - eb);
      rep[0] = 0;
      if (child.null_count() == 0) {
        std::memset(def, present, ee - eb);
      } else {
        for (size_t e = eb; e < ee; ++e) {
          const bool v = elem_valid[e] != 0;
          def[e - eb] = static_cast<char>(v ? present : present - 1);
          page_nulls_ += v ? 0 : 1;
        }
      }
      page_rows_ += ee - eb;
    }
    return Status::OK();
  }

  // Appends levels[0, n) (one byte each, below 2^bit_width) as a 4-byte length and the
  // RLE/bit-packed hybrid.
  void PutLevels(const ByteBuffer& levels, size_t n, int bit_width, ByteBuffer* out) {
    wide_levels_.clear();
    auto* w = reinterpret_cast<uint32_t*>(wide_levels_.AppendUninit(n * sizeof(uint32_t)));
    const auto* l = reinterpret_cast<const uint8_t*>(levels.data());
    for (size_t i = 0; i < n; ++i) w[i] = l[i];
    const size_t at = out->size();
    out->PutLE32(0);
    internal::EncodeRleHybrid(w, n, bit_width, out);
    const auto len = static_cast<uint32_t>(out->size() - at - 4);
    std::memcpy(out->data() + at, &len, 4);
  }

  Status FallBackToPlain() {
    fallback_ = false;
    FERRY_RETURN_IF_ERROR(CutPage());
    FERRY_RETURN_IF_ERROR(WriteDictPage());
    dict_active_ = false;
    // The dictionary page is written: its table is not needed for the rest of the chunk. The
    // values were too many for one, so the next chunks do without (EncodingHints: a retry after
    // 2, 4, 8 … of them, for data that changes along the table).
    DictRelease();
    Judge(true, /*firm=*/true);
    return Status::OK();
  }

  Status TooBig(size_t bytes) const {
    return Status::NotSupported("column '" + field_.name + "': a single Parquet page would hold " +
                                std::to_string(bytes) +
                                " bytes; values over 2 GiB cannot be written");
  }

  // Compresses `body` into compressed_ (when a codec is set); returns the payload to write.
  Result<std::string_view> Payload(const ByteBuffer& body) {
    if (!compressor_->enabled()) return body.view();
    FERRY_RETURN_IF_ERROR(compressor_->Compress(body.data(), body.size(), &compressed_));
    return compressed_.view();
  }

  Status CutPage() {
    if (page_rows_ == 0) return Status::OK();
    FlushPageValues();
    // A page of NULLs only has no index to write: it is an (empty) PLAIN page.
    const bool dict_page = dict_active_ && DictSize() > 0;
    const ByteBuffer* body = &values_;
    if (optional_ || dict_page || nested_) {
      page_.clear();
      if (nested_) {
        PutLevels(rep_levels_, page_rows_, 1, &page_);
        PutLevels(levels_, page_rows_, max_def_ > 1 ? 2 : 1, &page_);
      } else if (optional_) {
        page_.PutLE32(0);  // length of the levels, patched below
        internal::EncodeLevelsBitWidth1(reinterpret_cast<const uint8_t*>(levels_.data()),
                                        page_rows_, page_nulls_, &page_);
        auto levels_len = static_cast<uint32_t>(page_.size() - 4);
        std::memcpy(page_.data(), &levels_len, 4);
      }
      if (dict_page) {
        const int bit_width = internal::DictionaryBitWidth(DictSize());
        page_.PushBack(static_cast<uint8_t>(bit_width));
        internal::EncodeRleHybrid(reinterpret_cast<const uint32_t*>(values_.data()),
                                  values_.size() / kIndexBytes, bit_width, &page_);
      } else {
        page_.Append(values_.data(), values_.size());
      }
      body = &page_;
    }
    size_t uncompressed = body->size();
    if (uncompressed > static_cast<size_t>(std::numeric_limits<int32_t>::max()) ||
        page_rows_ > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return TooBig(uncompressed);
    }
    FERRY_ASSIGN_OR_RETURN(std::string_view payload, Payload(*body));
    header_.clear();
    CompactWriter w(&header_);
    w.BeginStruct();  // PageHeader
    w.I32Field(1, pq::kDataPage);
    w.I32Field(2, static_cast<int32_t>(uncompressed));
    w.I32Field(3, static_cast<int32_t>(payload.size()));
    w.StructField(5);  // DataPageHeader
    w.I32Field(1, static_cast<int32_t>(page_rows_));
    w.I32Field(2, dict_page ? pq::kRleDictionary : pq::kPlain);
    w.I32Field(3, pq::kRle);
    w.I32Field(4, pq::kRle);
    w.EndStruct();
    w.EndStruct();
    chunk_.Append(header_);
    chunk_.Append(payload);
    chunk_uncompressed_ += static_cast<int64_t>(header_.size() + uncompressed);
    chunk_compressed_ += static_cast<int64_t>(header_.size() + payload.size());
    chunk_values_ += static_cast<int64_t>(page_rows_);
    chunk_nulls_ += static_cast<int64_t>(page_nulls_);
    ++(dict_page ? chunk_dict_pages_ : chunk_plain_pages_);
    values_.clear();
    levels_.clear();
    rep_levels_.clear();
    page_rows_ = 0;
    page_nulls_ = 0;
    return Status::OK();
  }

  // Writes the dictionary into dict_page_ (when a data page refers to it) and empties it.
  Status WriteDictPage() {
    if (chunk_dict_pages_ > 0) {
      page_.clear();
      DictPlain(&page_);
      const size_t uncompressed = page_.size();
      if (uncompressed > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
        return TooBig(uncompressed);
      }
      FERRY_ASSIGN_OR_RETURN(std::string_view payload, Payload(page_));
      header_.clear();
      CompactWriter w(&header_);
      w.BeginStruct();  // PageHeader
      w.I32Field(1, pq::kDictionaryPage);
      w.I32Field(2, static_cast<int32_t>(uncompressed));
      w.I32Field(3, static_cast<int32_t>(payload.size()));
      w.StructField(7);  // DictionaryPageHeader
      w.I32Field(1, static_cast<int32_t>(DictSize()));
      w.I32Field(2, pq::kPlain);
      w.EndStruct();
      w.EndStruct();
      dict_page_.clear();
      dict_page_.Append(header_);
      dict_page_.Append(payload);
      chunk_uncompressed_ += static_cast<int64_t>(header_.size() + uncompressed);
      chunk_compressed_ += static_cast<int64_t>(header_.size() + payload.size());
    }
    DictClear();
    return Status::OK();
  }

  Compressor* compressor_;
  const uint64_t page_bytes_;

  ByteBuffer levels_;       // the open page's definition levels, one byte per row (level entry)
  ByteBuffer rep_levels_;   // lists: the open page's repetition levels, one byte per level entry
  ByteBuffer wide_levels_;  // lists: levels widened to uint32 for the hybrid encoder
  std::string list_name_;   // lists: the list field's name
  bool outer_optional_ = false;
  int max_def_ = 1;
  ByteBuffer page_;        // levels + values of a page, or a dictionary, uncompressed
  ByteBuffer compressed_;  // the compressed page
  ByteBuffer chunk_;       // headers + data pages of the row group's chunk
  ByteBuffer dict_page_;   // header + dictionary page of the row group's chunk
  std::string header_;
  size_t page_rows_ = 0;
  size_t page_nulls_ = 0;
  int64_t chunk_values_ = 0, chunk_nulls_ = 0, chunk_uncompressed_ = 0, chunk_compressed_ = 0;
  int32_t chunk_dict_pages_ = 0, chunk_plain_pages_ = 0;
  uint64_t file_values_ = 0, file_nulls_ = 0, file_compressed_ = 0, file_uncompressed_ = 0;
};

// A column of fixed-width values whose dictionary is a FixedDict<K>. EncodeDict is the dictionary
// path of EncodeValues: load(i) gives the key of row begin + i, on_new(key) folds a value seen for
// the first time in the chunk into the statistics (the others are already in them).
template <typename K>
class FixedDictWriter : public ColumnWriter {
 public:
  FixedDictWriter(const Field& field, Compressor* compressor, const ColumnConfig& cfg,
                  size_t plain_width = sizeof(K))
      : ColumnWriter(field, compressor, cfg),
        plain_width_(plain_width),
        max_entries_(dict_limit_ / plain_width) {}

 protected:
  template <typename Load, typename OnNew>
  size_t EncodeDict(const Column& col, size_t begin, size_t end, size_t budget, Load load,
                    OnNew on_new) {
    const size_t n = FixedRows(begin, end, budget, kIndexBytes);
    const uint8_t* valid = col.validity() + begin;
    const bool all_valid = col.null_count() == 0;
    auto* dst = reinterpret_cast<uint32_t*>(values_.AppendUninit(n * kIndexBytes));
    size_t k = 0, i = 0;
    for (; i < n; ++i) {
      if (!all_valid && !valid[i]) continue;
      const K key = load(i);
      size_t slot;
      uint32_t idx = dict_.Find(key, &slot);
      if (idx == kAbsent) [[unlikely]] {
        if (dict_.size() >= max_entries_ && (!nested_ || k == 0)) {
          fallback_ = true;
          if (nested_) i = 0;  // a list falls back whole: take none of it
          break;
        }
        idx = dict_.Insert(key, slot);
        on_new(key);
      }
      dst[k++] = idx;
    }
    values_.Truncate(values_.size() - (n - k) * kIndexBytes);
    return i;
  }

  size_t DictSize() const override { return dict_.size(); }
  uint64_t DictPlainBytes() const override { return dict_.size() * plain_width_; }
  void DictPlain(ByteBuffer* out) const override {
    out->Append(dict_.keys(), dict_.size() * sizeof(K));
  }
  void DictClear() override { dict_.Clear(); }
  void DictRelease() override { dict_.Release(); }
  uint64_t DictMemoryBytes() const override { return dict_.MemoryBytes(); }

  FixedDict<K> dict_;
  const size_t plain_width_;
  const size_t max_entries_;
};

// BOOLEAN: PLAIN is bit-packed, LSB first.
class BoolWriter final : public ColumnWriter {
 public:
  using ColumnWriter::ColumnWriter;

 protected:
  size_t EncodeValues(const Column& col, size_t begin, size_t end, size_t budget) override {
    size_t n = FixedRows(begin, end, budget * 8, 1);
    const uint8_t* in = col.fixed_data() + begin;
    const uint8_t* valid = col.validity() + begin;
    bool all_valid = col.null_count() == 0;
    values_.Reserve(values_.size() + n / 8 + 1);
    for (size_t i = 0; i < n; ++i) {
      if (!all_valid && !valid[i]) continue;
      uint8_t v = in[i] != 0 ? 1 : 0;
      seen_[v] = true;
      bits_ = static_cast<uint8_t>(bits_ | (v << nbits_));
      if (++nbits_ == 8) {
        values_.PushBack(bits_);
        bits_ = 0;
        nbits_ = 0;
      }
    }
    return n;
  }
  void FlushPageValues() override {
    if (nbits_ > 0) values_.PushBack(bits_);
    bits_ = 0;
    nbits_ = 0;
  }
  size_t PendingValueBytes() const override { return nbits_ > 0 ? 1 : 0; }
  void TakeChunkStats(ChunkMeta* meta) override {
    if (seen_[0] || seen_[1]) {
      meta->has_min_max = true;
      meta->min = std::string(1, seen_[0] ? '\0' : '\1');
      meta->max = std::string(1, seen_[1] ? '\1' : '\0');
    }
    file_seen_[0] |= seen_[0];
    file_seen_[1] |= seen_[1];
    seen_[0] = seen_[1] = false;
  }
  void FillBounds(ColumnMetrics* m) const override {
    if (!file_seen_[0] && !file_seen_[1]) return;
    m->lower_bound = std::string(1, file_seen_[0] ? '\0' : '\1');
    m->upper_bound = std::string(1, file_seen_[1] ? '\1' : '\0');
  }

 private:
  uint8_t bits_ = 0;
  int nbits_ = 0;
  bool seen_[2] = {false, false};
  bool file_seen_[2] = {false, false};
};

// INT32/INT64 values stored as In in the batch: ints, dates, times, timestamps and decimals of
// precision <= 18 (In = int128, narrowed). Signed order.
template <typename In, typename Out>
class IntWriter final : public FixedDictWriter<Out> {
  using Base = FixedDictWriter<Out>;
  using Base::values_;

 public:
  IntWriter(const Field& field, Compressor* compressor, const ColumnConfig& cfg)
      : Base(field, compressor, cfg), decimal_(field.type.kind() == TypeKind::kDecimal) {}

 protected:
  size_t EncodeValues(const Column& col, size_t begin, size_t end, size_t budget) override {
    if (this->dict_active_) {
      const In* in = col.values<In>() + begin;
      return this->EncodeDict(
          col, begin, end, budget, [in](size_t i) { return static_cast<Out>(in[i]); },
          [this](Out v) {
            if (!has_ || v < min_) min_ = v;
            if (!has_ || v > max_) max_ = v;
            has_ = true;
          });
    }
    size_t n = this->FixedRows(begin, end, budget, sizeof(Out));
    const In* in = col.values<In>() + begin;
    char* dst = values_.AppendUninit(n * sizeof(Out));
    Out mn = std::numeric_limits<Out>::max();
    Out mx = std::numeric_limits<Out>::min();
    size_t k = 0;
    if (col.null_count() == 0) {
      if constexpr (std::is_same_v<In, Out>) {
        std::memcpy(dst, in, n * sizeof(Out));
        for (size_t i = 0; i < n; ++i) {
          mn = in[i] < mn ? in[i] : mn;
          mx = in[i] > mx ? in[i] : mx;
        }
      } else {
        for (size_t i = 0; i < n; ++i) {
          auto v = static_cast<Out>(in[i]);
          std::memcpy(dst + i * sizeof(Out), &v, sizeof(Out));
          mn = v < mn ? v : mn;
          mx = v > mx ? v : mx;
        }
      }
      k = n;
    } else {
      const uint8_t* valid = col.validity() + begin;
      for (size_t i = 0; i < n; ++i) {
        if (!valid[i]) continue;
        auto v = static_cast<Out>(in[i]);
        std::memcpy(dst + k * sizeof(Out), &v, sizeof(Out));
        ++k;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
      }
      values_.Truncate(values_.size() - (n - k) * sizeof(Out));
    }
    if (k > 0) {
      if (!has_ || mn < min_) min_ = mn;
      if (!has_ || mx > max_) max_ = mx;
      has_ = true;
    }
    return n;
  }
  void TakeChunkStats(ChunkMeta* meta) override {
    if (!has_) return;
    meta->has_min_max = true;
    meta->min = LittleEndianBytes(min_);
    meta->max = LittleEndianBytes(max_);
    if (!file_has_ || min_ < file_min_) file_min_ = min_;
    if (!file_has_ || max_ > file_max_) file_max_ = max_;
    file_has_ = true;
    has_ = false;
  }
  void FillBounds(ColumnMetrics* m) const override {
    if (!file_has_) return;
    if (decimal_) {
      m->lower_bound = internal::MinimalBigEndian(file_min_);
      m->upper_bound = internal::MinimalBigEndian(file_max_);
    } else {
      m->lower_bound = LittleEndianBytes(file_min_);
      m->upper_bound = LittleEndianBytes(file_max_);
    }
  }

 private:
  const bool decimal_;
  bool has_ = false, file_has_ = false;
  Out min_{}, max_{}, file_min_{}, file_max_{};
};

// FLOAT/DOUBLE. NaN never enters min/max (it is counted); zeros follow the Parquet rule in the
// chunk statistics (min -0.0, max +0.0) and Iceberg's order (-0.0 < +0.0) in the bounds.
template <typename F, typename Bits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>>
class FloatWriter final : public FixedDictWriter<Bits> {
  using Base = FixedDictWriter<Bits>;
  using Base::values_;

 public:
  using Base::Base;

 protected:
  // Dictionary keys are the values' bits: -0.0 and +0.0, and NaN payloads, stay distinct.
  size_t DictEncode(const Column& col, size_t begin, size_t end, size_t budget) {
    const F* in = col.values<F>() + begin;
    size_t taken = this->EncodeDict(
        col, begin, end, budget, [in](size_t i) { return std::bit_cast<Bits>(in[i]); },
        [this](Bits bits) {
          const F v = std::bit_cast<F>(bits);
          if (v != v) return;
          if (!has_ || v < min_) min_ = v;
          if (!has_ || v > max_) max_ = v;
          has_ = true;
          if (v == 0) (std::signbit(v) ? neg_zero_ : pos_zero_) = true;
        });
    // NaN is counted per value (the dictionary holds each NaN once).
    const uint8_t* valid = col.validity() + begin;
    const bool all_valid = col.null_count() == 0;
    size_t nan = 0;
    for (size_t i = 0; i < taken; ++i) nan += (all_valid || valid[i]) && in[i] != in[i];
    nan_count_ += nan;
    return taken;
  }

  size_t EncodeValues(const Column& col, size_t begin, size_t end, size_t budget) override {
    if (this->dict_active_) return DictEncode(col, begin, end, budget);
    size_t n = this->FixedRows(begin, end, budget, sizeof(F));
    const F* in = col.values<F>() + begin;
    char* dst = values_.AppendUninit(n * sizeof(F));
    F mn = std::numeric_limits<F>::infinity();
    F mx = -std::numeric_limits<F>::infinity();
    size_t nan = 0, k = 0;
    bool neg_zero = false, pos_zero = false;
    auto fold = [&](F v) {
      nan += v != v;
      mn = v < mn ? v : mn;  // false for NaN: NaN never becomes a bound
      mx = v > mx ? v : mx;
      if (v == 0) [[unlikely]] {
        (std::signbit(v) ? neg_zero : pos_zero) = true;
      }
    };
    if (col.null_count() == 0) {
      std::memcpy(dst, in, n * sizeof(F));
      for (size_t i = 0; i < n; ++i) fold(in[i]);
      k = n;
    } else {
      const uint8_t* valid = col.validity() + begin;
      for (size_t i = 0; i < n; ++i) {
        if (!valid[i]) continue;
        std::memcpy(dst + k * sizeof(F), &in[i], sizeof(F));
        ++k;
        fold(in[i]);
      }
      values_.Truncate(values_.size() - (n - k) * sizeof(F));
    }
    nan_count_ += nan;
    if (k > nan) {
      if (!has_ || mn < min_) min_ = mn;
      if (!has_ || mx > max_) max_ = mx;
      has_ = true;
      neg_zero_ |= neg_zero;
      pos_zero_ |= pos_zero;
    }
    return n;
  }
  void TakeChunkStats(ChunkMeta* meta) override {
    if (!has_) return;
    meta->has_min_max = true;
    meta->min = LittleEndianBytes(min_ == 0 ? -F(0) : min_);
    meta->max = LittleEndianBytes(max_ == 0 ? F(0) : max_);
    if (!file_has_ || min_ < file_min_) file_min_ = min_;
    if (!file_has_ || max_ > file_max_) file_max_ = max_;
    file_has_ = true;
    file_neg_zero_ |= neg_zero_;
    file_pos_zero_ |= pos_zero_;
    has_ = neg_zero_ = pos_zero_ = false;
  }
  void FillBounds(ColumnMetrics* m) const override {
    m->nan_count = nan_count_;
    if (!file_has_) return;
    F lo = file_min_ == 0 ? (file_neg_zero_ ? -F(0) : F(0)) : file_min_;
    F hi = file_max_ == 0 ? (file_pos_zero_ ? F(0) : -F(0)) : file_max_;
    m->lower_bound = LittleEndianBytes(lo);
    m->upper_bound = LittleEndianBytes(hi);
  }

 private:
  uint64_t nan_count_ = 0;
  bool has_ = false, neg_zero_ = false, pos_zero_ = false;
  bool file_has_ = false, file_neg_zero_ = false, file_pos_zero_ = false;
  F min_{}, max_{}, file_min_{}, file_max_{};
};

// BYTE_ARRAY (strings, binaries): PLAIN is a 4-byte little-endian length then the bytes;
// unsigned lexicographic order.
class ByteArrayWriter final : public ColumnWriter {
 public:
  ByteArrayWriter(const Field& field, Compressor* compressor, const ColumnConfig& cfg)
      : ColumnWriter(field, compressor, cfg), string_(field.type.kind() == TypeKind::kString) {}

 protected:
  size_t DictEncode(const Column& col, size_t begin, size_t end, size_t budget) {
    const uint32_t* off = col.offsets();
    const char* bytes = col.bytes().data();
    const size_t n = FixedRows(begin, end, budget, kIndexBytes);
    const uint8_t* valid = col.validity();
    const bool all_valid = col.null_count() == 0;
    auto* dst = reinterpret_cast<uint32_t*>(values_.AppendUninit(n * kIndexBytes));
    size_t k = 0, i = begin;
    for (; i < begin + n; ++i) {
      if (!all_valid && !valid[i]) continue;
      const std::string_view v(bytes + off[i], off[i + 1] - off[i]);
      const uint32_t h = ByteDict::Hash(v);
      size_t slot;
      uint32_t idx = dict_.Find(v, h, &slot);
      if (idx == kAbsent) [[unlikely]] {
        if (dict_.plain_bytes() + 4 + v.size() > dict_limit_ && (!nested_ || k == 0)) {
          fallback_ = true;
          if (nested_) i = begin;  // a list falls back whole: take none of it
          break;
        }
        idx = dict_.Insert(v, h, slot);
        if (!has_ || v < std::string_view(min_)) min_.assign(v);
        if (!has_ || v > std::string_view(max_)) max_.assign(v);
        has_ = true;
      }
      dst[k++] = idx;
    }
    values_.Truncate(values_.size() - (n - k) * kIndexBytes);
    return i - begin;
  }
  size_t DictSize() const override { return dict_.size(); }
  uint64_t DictPlainBytes() const override { return dict_.plain_bytes(); }
  void DictPlain(ByteBuffer* out) const override { out->Append(dict_.plain()); }
  void DictClear() override { dict_.Clear(); }
  void DictRelease() override { dict_.Release(); }
  uint64_t DictMemoryBytes() const override { return dict_.MemoryBytes(); }

  size_t EncodeValues(const Column& col, size_t begin, size_t end, size_t budget) override {
    if (dict_active_) return DictEncode(col, begin, end, budget);
    const uint32_t* off = col.offsets();
    const char* bytes = col.bytes().data();
    const uint8_t* valid = col.validity();
    const bool all_valid = col.null_count() == 0;
    const size_t level_cost = optional_ ? 1 : 0;
    size_t i = begin, cost = 0, value_bytes = 0;
    while (i < end && cost < budget) {
      if (all_valid || valid[i]) {
        size_t len = off[i + 1] - off[i];
        value_bytes += 4 + len;
        cost += 4 + len;
      }
      cost += level_cost;
      ++i;
    }
    const size_t stop = i;
    char* dst = values_.AppendUninit(value_bytes);
    std::string_view mn, mx;
    bool has = false;
    for (i = begin; i < stop; ++i) {
      if (!all_valid && !valid[i]) continue;
      uint32_t len = off[i + 1] - off[i];
      std::memcpy(dst, &len, 4);
      std::memcpy(dst + 4, bytes + off[i], len);
      dst += 4 + static_cast<size_t>(len);
      std::string_view v(bytes + off[i], len);
      if (!has) {
        mn = mx = v;
        has = true;
      } else if (v < mn) {
        mn = v;
      } else if (v > mx) {
        mx = v;
      }
    }
    if (has) {
      if (!has_ || mn < std::string_view(min_)) min_.assign(mn);
      if (!has_ || mx > std::string_view(max_)) max_.assign(mx);
      has_ = true;
    }
    return stop - begin;
  }
  void TakeChunkStats(ChunkMeta* meta) override {
    if (!has_) return;
    meta->has_min_max = min_.size() <= kMaxStatisticsBytes && max_.size() <= kMaxStatisticsBytes;
    if (!file_has_ || min_ < file_min_) file_min_ = min_;
    if (!file_has_ || max_ > file_max_) file_max_ = max_;
    file_has_ = true;
    has_ = false;
    meta->min = std::move(min_);
    meta->max = std::move(max_);
    min_.clear();
    max_.clear();
  }
  void FillBounds(ColumnMetrics* m) const override {
    if (!file_has_) return;
    constexpr size_t kTruncate = 16;
    if (string_) {
      m->lower_bound = internal::TruncateUtf8Lower(file_min_, kTruncate);
      m->upper_bound = internal::TruncateUtf8Upper(file_max_, kTruncate);
    } else {
      m->lower_bound = internal::TruncateBinaryLower(file_min_, kTruncate);
      m->upper_bound = internal::TruncateBinaryUpper(file_max_, kTruncate);
    }
  }

 private:
  const bool string_;
  ByteDict dict_;
  bool has_ = false, file_has_ = false;
  std::string min_, max_, file_min_, file_max_;
};

// UUID: FIXED_LEN_BYTE_ARRAY(16), the batch's big-endian bytes as they are; unsigned order.
using Bytes16 = std::array<uint8_t, 16>;

class UuidWriter final : public FixedDictWriter<Bytes16> {
 public:
  using FixedDictWriter::FixedDictWriter;

 protected:
  static bool Less(const uint8_t* a, const uint8_t* b) { return std::memcmp(a, b, 16) < 0; }

  size_t EncodeValues(const Column& col, size_t begin, size_t end, size_t budget) override {
    if (dict_active_) {
      const uint8_t* in = col.fixed_data() + begin * 16;
      return EncodeDict(
          col, begin, end, budget,
          [in](size_t i) {
            Bytes16 k;
            std::memcpy(k.data(), in + i * 16, 16);
            return k;
          },
          [this](const Bytes16& v) {
            if (!has_ || Less(v.data(), min_.data())) min_ = v;
            if (!has_ || Less(max_.data(), v.data())) max_ = v;
            has_ = true;
          });
    }
    size_t n = FixedRows(begin, end, budget, 16);
    const uint8_t* in = col.fixed_data() + begin * 16;
    const uint8_t* valid = col.validity() + begin;
    const bool all_valid = col.null_count() == 0;
    char* dst = values_.AppendUninit(n * 16);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!all_valid && !valid[i]) continue;
      const uint8_t* v = in + i * 16;
      std::memcpy(dst + k * 16, v, 16);
      ++k;
      if (!has_ || Less(v, min_.data())) std::memcpy(min_.data(), v, 16);
      if (!has_ || Less(max_.data(), v)) std::memcpy(max_.data(), v, 16);
      has_ = true;
    }
    values_.Truncate(values_.size() - (n - k) * 16);
    return n;
  }
  void TakeChunkStats(ChunkMeta* meta) override {
    if (!has_) return;
    meta->has_min_max = true;
    meta->min.assign(reinterpret_cast<const char*>(min_.data()), 16);
    meta->max.assign(reinterpret_cast<const char*>(max_.data()), 16);
    if (!file_has_ || Less(min_.data(), file_min_.data())) file_min_ = min_;
    if (!file_has_ || Less(file_max_.data(), max_.data())) file_max_ = max_;
    file_has_ = true;
    has_ = false;
  }
  void FillBounds(ColumnMetrics* m) const override {
    if (!file_has_) return;
    m->lower_bound = std::string(reinterpret_cast<const char*>(file_min_.data()), 16);
    m->upper_bound = std::string(reinterpret_cast<const char*>(file_max_.data()), 16);
  }

 private:
  bool has_ = false, file_has_ = false;
  Bytes16 min_{}, max_{}, file_min_{}, file_max_{};
};

// Decimals of precision > 18: FIXED_LEN_BYTE_ARRAY of the minimal width for the precision,
// big-endian two's complement; signed order.
class DecimalFlbaWriter final : public FixedDictWriter<int128_t> {
 public:
  DecimalFlbaWriter(const Field& field, Compressor* compressor, const ColumnConfig& cfg)
      : FixedDictWriter(
            field, compressor, cfg,
            static_cast<size_t>(internal::DecimalBytesForPrecision(field.type.precision()))),
        width_(internal::DecimalBytesForPrecision(field.type.precision())) {}
  int width() const { return width_; }

 protected:
  void DictPlain(ByteBuffer* out) const override {
    const auto w = static_cast<size_t>(width_);
    auto* dst = reinterpret_cast<uint8_t*>(out->AppendUninit(dict_.size() * w));
    const int128_t* keys = dict_.keys();
    for (size_t i = 0; i < dict_.size(); ++i)
      internal::BigEndianBytes(keys[i], width_, dst + i * w);
  }

  size_t EncodeValues(const Column& col, size_t begin, size_t end, size_t budget) override {
    if (dict_active_) {
      const int128_t* in = col.values<int128_t>() + begin;
      return EncodeDict(
          col, begin, end, budget, [in](size_t i) { return in[i]; },
          [this](int128_t v) {
            if (!has_ || v < min_) min_ = v;
            if (!has_ || v > max_) max_ = v;
            has_ = true;
          });
    }
    const auto w = static_cast<size_t>(width_);
    size_t n = FixedRows(begin, end, budget, w);
    const int128_t* in = col.values<int128_t>() + begin;
    const uint8_t* valid = col.validity() + begin;
    const bool all_valid = col.null_count() == 0;
    auto* dst = reinterpret_cast<uint8_t*>(values_.AppendUninit(n * w));
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!all_valid && !valid[i]) continue;
      int128_t v = in[i];
      internal::BigEndianBytes(v, width_, dst + k * w);
      ++k;
      if (!has_ || v < min_) min_ = v;
      if (!has_ || v > max_) max_ = v;
      has_ = true;
    }
    values_.Truncate(values_.size() - (n - k) * w);
    return n;
  }
  void TakeChunkStats(ChunkMeta* meta) override {
    if (!has_) return;
    meta->has_min_max = true;
    meta->min.resize(static_cast<size_t>(width_));
    meta->max.resize(static_cast<size_t>(width_));
    internal::BigEndianBytes(min_, width_, reinterpret_cast<uint8_t*>(meta->min.data()));
    internal::BigEndianBytes(max_, width_, reinterpret_cast<uint8_t*>(meta->max.data()));
    if (!file_has_ || min_ < file_min_) file_min_ = min_;
    if (!file_has_ || max_ > file_max_) file_max_ = max_;
    file_has_ = true;
    has_ = false;
  }
  void FillBounds(ColumnMetrics* m) const override {
    if (!file_has_) return;
    m->lower_bound = internal::MinimalBigEndian(file_min_);
    m->upper_bound = internal::MinimalBigEndian(file_max_);
  }

 private:
  const int width_;
  bool has_ = false, file_has_ = false;
  int128_t min_ = 0, max_ = 0, file_min_ = 0, file_max_ = 0;
};

// The leaf field of a list: the element, named "element" as the LIST spec names it.
Field ElementField(const Field& list_field) {
  const ListElement& e = list_field.type.list();
  Field leaf;
  leaf.id = e.id;
  leaf.name = "element";
  leaf.type = e.type;
  leaf.required = e.required;
  return leaf;
}

std::unique_ptr<ColumnWriter> MakeColumnWriter(const Field& f, Compressor* c,
                                               const ColumnConfig& cfg) {
  switch (f.type.kind()) {
    case TypeKind::kList: {
      std::unique_ptr<ColumnWriter> w = MakeColumnWriter(ElementField(f), c, cfg);
      if (w) w->SetList(f);
      return w;
    }
    case TypeKind::kBoolean:
      return std::make_unique<BoolWriter>(f, c, cfg);
    case TypeKind::kInt32:
    case TypeKind::kDate:
      return std::make_unique<IntWriter<int32_t, int32_t>>(f, c, cfg);
    case TypeKind::kInt64:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return std::make_unique<IntWriter<int64_t, int64_t>>(f, c, cfg);
    case TypeKind::kFloat32:
      return std::make_unique<FloatWriter<float>>(f, c, cfg);
    case TypeKind::kFloat64:
      return std::make_unique<FloatWriter<double>>(f, c, cfg);
    case TypeKind::kDecimal:
      if (f.type.precision() <= 9) {
        return std::make_unique<IntWriter<int128_t, int32_t>>(f, c, cfg);
      }
      if (f.type.precision() <= 18) {
        return std::make_unique<IntWriter<int128_t, int64_t>>(f, c, cfg);
      }
      return std::make_unique<DecimalFlbaWriter>(f, c, cfg);
    case TypeKind::kString:
    case TypeKind::kBinary:
      return std::make_unique<ByteArrayWriter>(f, c, cfg);
    case TypeKind::kUuid:
      return std::make_unique<UuidWriter>(f, c, cfg);
  }
  return nullptr;
}

void WriteSchemaElement(CompactWriter& w, const Field& f);

// A list as the 3-level LIST form:
//   <optional|required> group <name> (LIST) = field id { repeated group list {
//     <optional|required> <element type> element = element id } }
void WriteListSchemaElements(CompactWriter& w, const Field& f) {
  w.BeginStruct();
  w.I32Field(3, f.required ? pq::kRequired : pq::kOptional);
  w.BinaryField(4, internal::ParquetColumnName(f.name));
  w.I32Field(5, 1);
  w.I32Field(6, pq::kList);
  w.I32Field(9, f.id);
  w.StructField(10);
  w.StructField(pq::kLtList);
  w.EndStruct();
  w.EndStruct();
  w.EndStruct();
  w.BeginStruct();
  w.I32Field(3, pq::kRepeated);
  w.BinaryField(4, "list");
  w.I32Field(5, 1);
  w.EndStruct();
  WriteSchemaElement(w, ElementField(f));
}

void WriteSchemaElement(CompactWriter& w, const Field& f) {
  const DataType& t = f.type;
  if (t.is_list()) {
    WriteListSchemaElements(w, f);
    return;
  }
  const int32_t physical = PhysicalTypeOf(t);
  w.BeginStruct();
  w.I32Field(1, physical);
  if (physical == pq::kFixedLenByteArray) {
    w.I32Field(
        2, t.kind() == TypeKind::kUuid ? 16 : internal::DecimalBytesForPrecision(t.precision()));
  }
  w.I32Field(3, f.required ? pq::kRequired : pq::kOptional);
  w.BinaryField(4, internal::ParquetColumnName(f.name));
  // Legacy converted types only where their meaning matches: TIME_MICROS and TIMESTAMP_MICROS
  // imply isAdjustedToUTC=true, so only timestamptz gets one.
  switch (t.kind()) {
    case TypeKind::kString:
      w.I32Field(6, pq::kUtf8);
      break;
    case TypeKind::kDecimal:
      w.I32Field(6, pq::kDecimal);
      w.I32Field(7, t.scale());
      w.I32Field(8, t.precision());
      break;
    case TypeKind::kDate:
      w.I32Field(6, pq::kDate);
      break;
    case TypeKind::kTimestampTz:
      w.I32Field(6, pq::kTimestampMicros);
      break;
    default:
      break;
  }
  w.I32Field(9, f.id);
  auto empty = [&](int16_t id) {
    w.StructField(id);
    w.EndStruct();
  };
  auto time_like = [&](int16_t id, bool utc) {
    w.StructField(id);
    w.BoolField(1, utc);
    w.StructField(2);  // TimeUnit
    empty(2);          // MICROS
    w.EndStruct();
    w.EndStruct();
  };
  switch (t.kind()) {
    case TypeKind::kString:
      w.StructField(10);
      empty(pq::kLtString);
      w.EndStruct();
      break;
    case TypeKind::kDecimal:
      w.StructField(10);
      w.StructField(pq::kLtDecimal);
      w.I32Field(1, t.scale());
      w.I32Field(2, t.precision());
      w.EndStruct();
      w.EndStruct();
      break;
    case TypeKind::kDate:
      w.StructField(10);
      empty(pq::kLtDate);
      w.EndStruct();
      break;
    case TypeKind::kTime:
      w.StructField(10);
      time_like(pq::kLtTime, false);
      w.EndStruct();
      break;
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      w.StructField(10);
      time_like(pq::kLtTimestamp, t.kind() == TypeKind::kTimestampTz);
      w.EndStruct();
      break;
    case TypeKind::kUuid:
      w.StructField(10);
      empty(pq::kLtUuid);
      w.EndStruct();
      break;
    default:
      break;
  }
  w.EndStruct();
}

class WriterImpl final : public Writer {
 public:
  WriterImpl(std::unique_ptr<OutputStream> out, std::shared_ptr<const Schema> schema,
             WriterOptions options)
      : out_(std::move(out)),
        schema_(std::move(schema)),
        options_(std::move(options)),
        compressor_(options_.compression, options_.zstd_level) {
    if (!options_.hints) options_.hints = std::make_shared<EncodingHints>();
    columns_.reserve(schema_->fields.size());
    for (const auto& f : schema_->fields) {
      ColumnConfig cfg;
      cfg.page_bytes = options_.page_bytes;
      cfg.dictionary = options_.dictionary;
      cfg.dictionary_bytes = options_.dictionary_page_bytes;
      cfg.hints = options_.hints.get();
      columns_.push_back(MakeColumnWriter(f, &compressor_, cfg));
    }
  }

  Status Start() { return out_->Append("PAR1"); }

  Status Write(const Batch& batch) override {
    if (closed_) return Status::Internal("Parquet writer: Write after Close");
    if (!failed_.ok()) return failed_;
    if (batch.schema() != schema_ && !batch.schema()->SameStructure(*schema_)) {
      return Status::InvalidArgument(
          "Parquet writer: the batch's schema differs from the file's schema");
    }
    const size_t rows = batch.num_rows();
    if (rows == 0) return Status::OK();
    uint64_t row_bytes = 1;  // estimated encoded bytes per row, before compression
    for (size_t c = 0; c < columns_.size(); ++c) {
      const Column& col = batch.column(c);
      const Field& f = schema_->fields[c];
      if (col.size() != rows) {
        return Status::InvalidArgument("Parquet writer: column '" + f.name + "' has " +
                                       std::to_string(col.size()) + " rows, the batch " +
                                       std::to_string(rows));
      }
      if (f.required && col.null_count() > 0) {
        return Status::InvalidArgument("column '" + f.name + "' (field id " + std::to_string(f.id) +
                                       ") is required but the batch holds " +
                                       std::to_string(col.null_count()) +
                                       " NULLs: make the field optional or fix the source");
      }
      if (f.type.is_list()) {
        const Column& child = col.list_child();
        if (f.type.list().required && child.null_count() > 0) {
          return Status::InvalidArgument(
              "list column '" + f.name + "' has required elements (field id " +
              std::to_string(f.type.list().id) + ") but the batch holds " +
              std::to_string(child.null_count()) +
              " NULL elements: make the element optional or fix the source");
        }
        // Per row: its elements' values and two level bytes per element (at least one entry).
        const int ew = f.type.list().type.FixedWidth();
        const uint64_t elems = child.size();
        row_bytes += 2 + (elems * (ew > 0 ? static_cast<uint64_t>(ew) + 2 : 6) +
                          (ew > 0 ? 0 : child.bytes().size())) /
                             rows;
        continue;
      }
      int width = f.type.FixedWidth();
      row_bytes += width > 0 ? static_cast<uint64_t>(width) : 4 + col.bytes().size() / rows;
      if (!f.required) row_bytes += 1;
    }
    Status st = WriteRows(batch, rows, row_bytes);
    if (!st.ok()) failed_ = st;
    return st;
  }

  uint64_t EstimatedSize() const override {
    uint64_t n = out_->Tell();
    for (const auto& c : columns_) n += c->EstimatedFileBytes();
    return n;
  }
  uint64_t rows_written() const override { return rows_written_; }
  uint64_t BufferedMemoryBytes() const override {
    uint64_t n = 0;
    for (const auto& c : columns_) n += c->MemoryBytes();
    return n + footer_.capacity() + out_->BufferedBytes();
  }

  Status FlushAndRelease() override {
    if (closed_) return Status::Internal("Parquet writer: FlushAndRelease after Close");
    if (!failed_.ok()) return failed_;
    Status st = FlushRowGroup();
    if (!st.ok()) {
      failed_ = st;
      return st;
    }
    for (auto& c : columns_) c->ReleaseMemory();
    std::string().swap(footer_);
    return Status::OK();
  }

  Result<FileMetrics> Close() override {
    if (closed_) return Status::Internal("Parquet writer: Close called twice");
    if (!failed_.ok()) return failed_;
    closed_ = true;
    FERRY_RETURN_IF_ERROR(FlushRowGroup());
    footer_.clear();
    WriteFooter(&footer_);
    auto footer_len = static_cast<uint32_t>(footer_.size());
    char tail[8];
    std::memcpy(tail, &footer_len, 4);
    std::memcpy(tail + 4, "PAR1", 4);
    footer_.append(tail, 8);
    FERRY_RETURN_IF_ERROR(out_->Append(footer_));
    FERRY_RETURN_IF_ERROR(out_->Close());

    FileMetrics m;
    m.record_count = rows_written_;
    m.file_size_bytes = out_->Tell();
    m.columns.resize(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) columns_[c]->FillMetrics(&m.columns[c]);
    m.split_offsets.reserve(row_groups_.size());
    for (const auto& rg : row_groups_) m.split_offsets.push_back(rg.file_offset);
    return m;
  }

 private:
  uint64_t BufferedBytes() const {
    uint64_t n = 0;
    for (const auto& c : columns_) n += c->BufferedBytes();
    return n;
  }

  // Appends rows in slices sized so that the row group stops near row_group_bytes.
  Status WriteRows(const Batch& batch, size_t rows, uint64_t row_bytes) {
    size_t row = 0;
    while (row < rows) {
      uint64_t buffered = BufferedBytes();
      if (buffered >= options_.row_group_bytes && rows_in_group_ > 0) {
        FERRY_RETURN_IF_ERROR(FlushRowGroup());
        continue;
      }
      uint64_t room = options_.row_group_bytes > buffered ? options_.row_group_bytes - buffered : 0;
      size_t take = static_cast<size_t>(std::min<uint64_t>(rows - row, room / row_bytes + 1));
      for (size_t c = 0; c < columns_.size(); ++c) {
        FERRY_RETURN_IF_ERROR(columns_[c]->Append(batch.column(c), row, row + take));
      }
      row += take;
      rows_in_group_ += take;
      rows_written_ += take;
    }
    if (BufferedBytes() >= options_.row_group_bytes) FERRY_RETURN_IF_ERROR(FlushRowGroup());
    return Status::OK();
  }

  Status FlushRowGroup() {
    if (rows_in_group_ == 0) return Status::OK();
    RowGroupMeta rg;
    rg.num_rows = static_cast<int64_t>(rows_in_group_);
    rg.columns.resize(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) {
      ColumnWriter& cw = *columns_[c];
      ChunkMeta& meta = rg.columns[c];
      FERRY_RETURN_IF_ERROR(cw.FinishChunk(&meta));
      meta.file_offset = static_cast<int64_t>(out_->Tell());
      if (!cw.dict_page().empty()) {
        meta.dictionary_page_offset = meta.file_offset;
        FERRY_RETURN_IF_ERROR(out_->Append(cw.dict_page()));
      }
      meta.data_page_offset = static_cast<int64_t>(out_->Tell());
      FERRY_RETURN_IF_ERROR(out_->Append(cw.chunk()));
      cw.ResetChunk();
      if (c == 0) rg.file_offset = meta.file_offset;
      rg.uncompressed_bytes += meta.uncompressed_bytes;
      rg.compressed_bytes += meta.compressed_bytes;
    }
    row_groups_.push_back(std::move(rg));
    rows_in_group_ = 0;
    return Status::OK();
  }

  void WriteFooter(std::string* out) const {
    CompactWriter w(out);
    const auto& fields = schema_->fields;
    w.BeginStruct();   // FileMetaData
    w.I32Field(1, 2);  // version
    size_t elements = 1;
    for (const auto& f : fields) elements += f.type.is_list() ? 3 : 1;
    w.ListField(2, thrift::kStruct, static_cast<uint32_t>(elements));
    w.BeginStruct();  // root
    w.BinaryField(4, "table");
    w.I32Field(5, static_cast<int32_t>(fields.size()));
    w.EndStruct();
    for (const auto& f : fields) WriteSchemaElement(w, f);
    w.I64Field(3, static_cast<int64_t>(rows_written_));
    w.ListField(4, thrift::kStruct, static_cast<uint32_t>(row_groups_.size()));
    for (size_t g = 0; g < row_groups_.size(); ++g) WriteRowGroup(w, row_groups_[g], g);
    if (!options_.key_value_metadata.empty()) {
      w.ListField(5, thrift::kStruct, static_cast<uint32_t>(options_.key_value_metadata.size()));
      for (const auto& [k, v] : options_.key_value_metadata) {
        w.BeginStruct();
        w.BinaryField(1, k);
        w.BinaryField(2, v);
        w.EndStruct();
      }
    }
    w.BinaryField(6, kCreatedBy);
    // column_orders: TYPE_ORDER for every column, so readers trust min_value/max_value.
    w.ListField(7, thrift::kStruct, static_cast<uint32_t>(fields.size()));
    for (size_t i = 0; i < fields.size(); ++i) {
      w.BeginStruct();
      w.StructField(1);
      w.EndStruct();
      w.EndStruct();
    }
    w.EndStruct();
  }

  void WriteRowGroup(CompactWriter& w, const RowGroupMeta& rg, size_t ordinal) const {
    const int32_t codec = CodecOf(options_.compression);
    w.BeginStruct();  // RowGroup
    w.ListField(1, thrift::kStruct, static_cast<uint32_t>(rg.columns.size()));
    for (size_t c = 0; c < rg.columns.size(); ++c) {
      const ChunkMeta& m = rg.columns[c];
      const ColumnWriter& cw = *columns_[c];
      w.BeginStruct();  // ColumnChunk
      w.I64Field(2, m.file_offset);
      w.StructField(3);  // ColumnMetaData
      w.I32Field(1, cw.physical_type());
      // PLAIN (data pages or the dictionary page), RLE (definition levels), RLE_DICTIONARY.
      const bool has_dict = m.dictionary_page_offset >= 0;
      int32_t encodings[3];
      uint32_t num_encodings = 0;
      encodings[num_encodings++] = pq::kPlain;
      if (cw.has_levels()) encodings[num_encodings++] = pq::kRle;
      if (has_dict) encodings[num_encodings++] = pq::kRleDictionary;
      w.ListField(2, thrift::kI32, num_encodings);
      for (uint32_t e = 0; e < num_encodings; ++e) w.I32(encodings[e]);
      const std::vector<std::string> path = cw.Path();
      w.ListField(3, thrift::kBinary, static_cast<uint32_t>(path.size()));
      for (const auto& part : path) w.Binary(part);
      w.I32Field(4, codec);
      w.I64Field(5, m.num_values);
      w.I64Field(6, m.uncompressed_bytes);
      w.I64Field(7, m.compressed_bytes);
      w.I64Field(9, m.data_page_offset);
      if (has_dict) w.I64Field(11, m.dictionary_page_offset);
      w.StructField(12);  // Statistics
      w.I64Field(3, m.null_count);
      if (m.has_min_max) {
        w.BinaryField(5, m.max);
        w.BinaryField(6, m.min);
        w.BoolField(7, true);
        w.BoolField(8, true);
      }
      w.EndStruct();
      // encoding_stats: pages by type and encoding, so that readers (parquet-mr, Iceberg's
      // dictionary filter) know whether every data page is dictionary-encoded.
      const uint32_t num_stats = (has_dict ? 1u : 0u) + (m.dict_data_pages > 0 ? 1u : 0u) +
                                 (m.plain_data_pages > 0 ? 1u : 0u);
      w.ListField(13, thrift::kStruct, num_stats);
      auto page_stats = [&](int32_t page_type, int32_t encoding, int32_t count) {
        w.BeginStruct();
        w.I32Field(1, page_type);
        w.I32Field(2, encoding);
        w.I32Field(3, count);
        w.EndStruct();
      };
      if (has_dict) page_stats(pq::kDictionaryPage, pq::kPlain, 1);
      if (m.dict_data_pages > 0) page_stats(pq::kDataPage, pq::kRleDictionary, m.dict_data_pages);
      if (m.plain_data_pages > 0) page_stats(pq::kDataPage, pq::kPlain, m.plain_data_pages);
      w.EndStruct();
      w.EndStruct();
    }
    w.I64Field(2, rg.uncompressed_bytes);
    w.I64Field(3, rg.num_rows);
    w.I64Field(5, rg.file_offset);
    w.I64Field(6, rg.compressed_bytes);
    if (ordinal <= static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
      w.I16Field(7, static_cast<int16_t>(ordinal));
    }
    w.EndStruct();
  }

  std::unique_ptr<OutputStream> out_;
  std::shared_ptr<const Schema> schema_;
  WriterOptions options_;
  Compressor compressor_;
  std::vector<std::unique_ptr<ColumnWriter>> columns_;
  std::vector<RowGroupMeta> row_groups_;
  std::string footer_;
  uint64_t rows_in_group_ = 0;
  uint64_t rows_written_ = 0;
  Status failed_;  // sticky: after a failed Write the file is unusable
  bool closed_ = false;
};

}  // namespace

Result<std::unique_ptr<Writer>> Writer::Open(std::unique_ptr<OutputStream> out,
                                             std::shared_ptr<const Schema> schema,
                                             WriterOptions options) {
  if (out == nullptr || schema == nullptr) {
    return Status::InvalidArgument("Parquet writer: an output stream and a schema are required");
  }
  if (options.compression == Compression::kZstd &&
      (options.zstd_level < ZSTD_minCLevel() || options.zstd_level > ZSTD_maxCLevel())) {
    return Status::InvalidArgument("zstd level " + std::to_string(options.zstd_level) +
                                   " is out of range: use " + std::to_string(ZSTD_minCLevel()) +
                                   ".." + std::to_string(ZSTD_maxCLevel()));
  }
  for (const auto& f : schema->fields) {
    const DataType& t = f.type.is_list() ? f.type.list().type : f.type;
    if (t.is_list()) {
      return Status::NotSupported("column '" + f.name + "' is " + f.type.ToIceberg() +
                                  ": ferry writes lists of primitive types only");
    }
    if (t.kind() == TypeKind::kDecimal &&
        (t.precision() < 1 || t.precision() > 38 || t.scale() < 0 || t.scale() > t.precision())) {
      return Status::InvalidArgument(
          "column '" + f.name + "': " + f.type.ToIceberg() +
          " is not a valid decimal (precision 1..38, scale 0..precision)");
    }
  }
  auto w = std::make_unique<WriterImpl>(std::move(out), std::move(schema), std::move(options));
  FERRY_RETURN_IF_ERROR(w->Start());
  return std::unique_ptr<Writer>(std::move(w));
}

}  // namespace ferry::parquet
