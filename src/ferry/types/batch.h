// Columnar batches: the unit of data that flows through the graph, from a source decoder
// straight into a file writer. No per-row heap objects.
//
// A Column stores one value per row:
//   - fixed-width types (see DataType::FixedWidth) in one contiguous buffer, native byte order,
//     booleans one byte each, decimals as a 128-bit two's-complement unscaled integer, uuids as
//     16 big-endian bytes; a NULL row keeps a zeroed slot so that values are indexable by row;
//   - strings and binaries as (offsets, bytes): row i is bytes[offsets[i], offsets[i+1]);
//   - lists as (offsets, child column of the element type): row i holds the child's rows
//     [offsets[i], offsets[i+1]). A NULL list and an empty list both hold no child rows and differ
//     by validity; a NULL element is a NULL row of the child. To append a list, append its
//     elements to list_child() and then call AppendListEnd().
// validity[i] is 1 for a value, 0 for NULL.
// Not thread-safe; a batch is owned by one node at a time and moved along channels.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/types/data_type.h"

namespace ferry {

using int128_t = __int128;

class Column {
 public:
  explicit Column(DataType type);
  Column(const Column& o);
  Column& operator=(const Column& o);
  Column(Column&&) noexcept = default;
  Column& operator=(Column&&) noexcept = default;

  const DataType& type() const { return type_; }
  size_t size() const { return size_; }
  size_t null_count() const { return null_count_; }
  bool IsValid(size_t row) const { return validity_[row] != 0; }
  const uint8_t* validity() const { return validity_.data(); }

  void AppendNull();
  void AppendBool(bool v) { AppendFixed(static_cast<uint8_t>(v ? 1 : 0)); }
  void AppendInt32(int32_t v) { AppendFixed(v); }
  void AppendInt64(int64_t v) { AppendFixed(v); }
  void AppendFloat(float v) { AppendFixed(v); }
  void AppendDouble(double v) { AppendFixed(v); }
  void AppendDecimal(int128_t unscaled) { AppendFixed(unscaled); }
  void AppendUuid(const uint8_t bytes[16]);
  void AppendBytes(std::string_view v);
  // Appends row `row` of `src`, a column of the same type (list elements included).
  void AppendRowOf(const Column& src, size_t row);
  // Appends rows `rows[0..n)` of `src` (same type) in that order: AppendRowOf for each, in one
  // pass per buffer.
  void AppendRowsOf(const Column& src, const uint32_t* rows, size_t n);
  // Lists: ends the row whose elements were appended to list_child() since the last row.
  void AppendListEnd() {
    offsets_.push_back(static_cast<uint32_t>(child_->size()));
    validity_.push_back(1);
    ++size_;
  }
  Column& list_child() { return *child_; }
  const Column& list_child() const { return *child_; }
  // Lists: the child rows of row `row`, [first, second).
  std::pair<size_t, size_t> ListRange(size_t row) const {
    return {offsets_[row], offsets_[row + 1]};
  }
  // Lists: drops child rows appended since the last complete row (a row that failed to decode).
  void DropOpenListElements() { child_->Truncate(offsets_.back()); }

  // Typed view of the fixed-width buffer; T must match FixedWidth().
  template <typename T>
  const T* values() const {
    return reinterpret_cast<const T*>(fixed_.data());
  }
  const uint8_t* fixed_data() const { return fixed_.data(); }
  // Row `row` of the fixed-width buffer (any alignment); T must match FixedWidth().
  template <typename T>
  T ValueAt(size_t row) const {
    T v;
    std::memcpy(&v, fixed_.data() + row * sizeof(T), sizeof(T));
    return v;
  }
  std::string_view GetBytes(size_t row) const {
    return std::string_view(bytes_.data() + offsets_[row], offsets_[row + 1] - offsets_[row]);
  }
  const uint32_t* offsets() const { return offsets_.data(); }
  const std::string& bytes() const { return bytes_; }

  // Empties the column and keeps its buffers for reuse.
  void Clear();
  // Keeps the first n rows (n <= size()).
  void Truncate(size_t n);
  // Bytes held by the buffers (capacity), for memory accounting.
  size_t MemoryBytes() const;
  // Bytes of the values: fixed-width values and the bytes of text and binary values.
  size_t DataBytes() const {
    return fixed_.size() + bytes_.size() + (child_ ? child_->DataBytes() : 0);
  }

 private:
  template <typename T>
  void AppendFixed(T v) {
    size_t at = fixed_.size();
    fixed_.resize(at + sizeof(T));
    std::memcpy(fixed_.data() + at, &v, sizeof(T));
    validity_.push_back(1);
    ++size_;
  }

  DataType type_;
  int width_ = 0;
  size_t size_ = 0;
  size_t null_count_ = 0;
  std::vector<uint8_t> validity_;
  std::vector<uint8_t> fixed_;
  std::vector<uint32_t> offsets_;
  std::string bytes_;
  std::unique_ptr<Column> child_;  // lists: the elements
};

// What a change log says of one row of a change batch: the kind of change, when the source
// committed it and where in the log (a source::Position's kind and numbers: source/position.h
// turns them back into one). Sources fill Batch::origins() for the changes they hand out; rows of
// loads and windows have none: they are reads.
struct RowOrigin {
  enum class Op : uint8_t { kRead, kInsert, kUpdate, kDelete };
  static constexpr int64_t kNoTime = INT64_MIN;
  Op op = Op::kRead;
  uint8_t position_kind = 0;    // source::Position::Kind; 0: none
  int64_t commit_us = kNoTime;  // microseconds since the Unix epoch; kNoTime: not known
  uint64_t position_major = 0;
  uint64_t position_minor = 0;

  // Its form in spill records: the fields one after another, kPackedBytes in all.
  static constexpr size_t kPackedBytes = 2 + 3 * sizeof(uint64_t);
  void AppendPacked(std::string* out) const {
    char b[kPackedBytes];
    b[0] = static_cast<char>(op);
    b[1] = static_cast<char>(position_kind);
    std::memcpy(b + 2, &commit_us, 8);
    std::memcpy(b + 10, &position_major, 8);
    std::memcpy(b + 18, &position_minor, 8);
    out->append(b, kPackedBytes);
  }
  // `in` holds kPackedBytes.
  static RowOrigin Unpacked(const char* in) {
    RowOrigin o;
    o.op = static_cast<Op>(static_cast<uint8_t>(in[0]) & 3);
    o.position_kind = static_cast<uint8_t>(in[1]);
    std::memcpy(&o.commit_us, in + 2, 8);
    std::memcpy(&o.position_major, in + 10, 8);
    std::memcpy(&o.position_minor, in + 18, 8);
    return o;
  }
};

class Batch {
 public:
  explicit Batch(std::shared_ptr<const Schema> schema);

  const std::shared_ptr<const Schema>& schema() const { return schema_; }
  size_t num_columns() const { return columns_.size(); }
  Column& column(size_t i) { return columns_[i]; }
  const Column& column(size_t i) const { return columns_[i]; }
  size_t num_rows() const { return columns_.empty() ? 0 : columns_[0].size(); }
  size_t MemoryBytes() const;
  // Bytes of the values (Column::DataBytes).
  size_t DataBytes() const {
    size_t n = 0;
    for (const auto& c : columns_) n += c.DataBytes();
    return n;
  }
  void Clear();

  // Per row, what its change log says of it (RowOrigin): empty, or one per row.
  std::vector<RowOrigin>& origins() { return origins_; }
  const std::vector<RowOrigin>& origins() const { return origins_; }

 private:
  std::shared_ptr<const Schema> schema_;
  std::vector<Column> columns_;
  std::vector<RowOrigin> origins_;
};

// Sources hand a batch on once it holds `batch_rows` rows, or once its buffers hold
// kBatchBytesTarget (wide rows): memory stays flat whatever the row width. The buffers are
// measured every 16 rows.
inline constexpr size_t kBatchBytesTarget = size_t{8} << 20;
inline bool BatchFull(const Batch& b, size_t batch_rows) {
  const size_t n = b.num_rows();
  return n >= batch_rows || (n % 16 == 0 && n > 0 && b.MemoryBytes() >= kBatchBytesTarget);
}

}  // namespace ferry
