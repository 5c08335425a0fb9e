#include "ferry/types/batch.h"

namespace ferry {

Column::Column(DataType type) : type_(type), width_(type.FixedWidth()) {
  if (width_ == 0) offsets_.push_back(0);
}

void Column::AppendNull() {
  if (width_ > 0) {
    fixed_.resize(fixed_.size() + static_cast<size_t>(width_), 0);
  } else {
    offsets_.push_back(offsets_.back());
  }
  validity_.push_back(0);
  ++size_;
  ++null_count_;
}

void Column::AppendUuid(const uint8_t bytes[16]) {
  size_t at = fixed_.size();
  fixed_.resize(at + 16);
  std::memcpy(fixed_.data() + at, bytes, 16);
  validity_.push_back(1);
  ++size_;
}

void Column::AppendBytes(std::string_view v) {
  bytes_.append(v);
  offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  validity_.push_back(1);
  ++size_;
}

void Column::Clear() {
  size_ = 0;
  null_count_ = 0;
  validity_.clear();
  fixed_.clear();
  bytes_.clear();
  offsets_.clear();
  if (width_ == 0) offsets_.push_back(0);
}

size_t Column::MemoryBytes() const {
  return validity_.capacity() + fixed_.capacity() + offsets_.capacity() * sizeof(uint32_t) +
         bytes_.capacity();
}

Batch::Batch(std::shared_ptr<const Schema> schema) : schema_(std::move(schema)) {
  columns_.reserve(schema_->fields.size());
  for (const auto& f : schema_->fields) columns_.emplace_back(f.type);
}

size_t Batch::MemoryBytes() const {
  size_t n = 0;
  for (const auto& c : columns_) n += c.MemoryBytes();
  return n;
}

void Batch::Clear() {
  for (auto& c : columns_) c.Clear();
}

}  // namespace ferry
