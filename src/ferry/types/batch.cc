#include "ferry/types/batch.h"

namespace ferry {

Column::Column(DataType type) : type_(type), width_(type.FixedWidth()) {
  if (width_ == 0) offsets_.push_back(0);
  if (type_.is_list()) child_ = std::make_unique<Column>(type_.list().type);
}

Column::Column(const Column& o)
    : type_(o.type_),
      width_(o.width_),
      size_(o.size_),
      null_count_(o.null_count_),
      validity_(o.validity_),
      fixed_(o.fixed_),
      offsets_(o.offsets_),
      bytes_(o.bytes_),
      child_(o.child_ ? std::make_unique<Column>(*o.child_) : nullptr) {}

Column& Column::operator=(const Column& o) {
  if (this != &o) *this = Column(o);
  return *this;
}

void Column::Truncate(size_t n) {
  if (n >= size_) return;
  size_t nulls = 0;
  for (size_t i = n; i < size_; ++i) nulls += validity_[i] == 0;
  null_count_ -= nulls;
  validity_.resize(n);
  if (width_ > 0) {
    fixed_.resize(n * static_cast<size_t>(width_));
  } else {
    offsets_.resize(n + 1);
    if (child_) {
      child_->Truncate(offsets_[n]);
    } else {
      bytes_.resize(offsets_[n]);
    }
  }
  size_ = n;
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

void Column::AppendRowOf(const Column& src, size_t row) {
  if (!src.IsValid(row)) {
    AppendNull();
    return;
  }
  if (width_ > 0) {
    const size_t at = fixed_.size();
    fixed_.resize(at + static_cast<size_t>(width_));
    std::memcpy(fixed_.data() + at, src.fixed_.data() + row * static_cast<size_t>(width_),
                static_cast<size_t>(width_));
    validity_.push_back(1);
    ++size_;
  } else if (child_) {
    auto [first, end] = src.ListRange(row);
    for (size_t i = first; i < end; ++i) child_->AppendRowOf(*src.child_, i);
    AppendListEnd();
  } else {
    AppendBytes(src.GetBytes(row));
  }
}

void Column::AppendRowsOf(const Column& src, const uint32_t* rows, size_t n) {
  if (child_) {
    for (size_t i = 0; i < n; ++i) AppendRowOf(src, rows[i]);
    return;
  }
  const size_t first = size_;
  validity_.resize(first + n);
  uint8_t* valid = validity_.data() + first;
  size_t nulls = 0;
  for (size_t i = 0; i < n; ++i) {
    valid[i] = src.validity_[rows[i]];
    nulls += valid[i] == 0;
  }
  if (width_ > 0) {
    const auto w = static_cast<size_t>(width_);
    const size_t at = fixed_.size();
    fixed_.resize(at + n * w);
    uint8_t* dst = fixed_.data() + at;
    const uint8_t* from = src.fixed_.data();
    switch (w) {  // fixed sizes let the copies compile to plain loads and stores
      case 4:
        for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * 4, from + rows[i] * size_t{4}, 4);
        break;
      case 8:
        for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * 8, from + rows[i] * size_t{8}, 8);
        break;
      case 16:
        for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * 16, from + rows[i] * size_t{16}, 16);
        break;
      default:
        for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * w, from + rows[i] * w, w);
    }
  } else {
    size_t bytes = 0;
    for (size_t i = 0; i < n; ++i) bytes += src.offsets_[rows[i] + 1] - src.offsets_[rows[i]];
    bytes_.reserve(bytes_.size() + bytes);
    offsets_.reserve(offsets_.size() + n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t b = src.offsets_[rows[i]];
      bytes_.append(src.bytes_.data() + b, src.offsets_[rows[i] + 1] - b);
      offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
    }
  }
  size_ += n;
  null_count_ += nulls;
}

void Column::Clear() {
  size_ = 0;
  null_count_ = 0;
  validity_.clear();
  fixed_.clear();
  bytes_.clear();
  offsets_.clear();
  if (width_ == 0) offsets_.push_back(0);
  if (child_) child_->Clear();
}

size_t Column::MemoryBytes() const {
  return validity_.capacity() + fixed_.capacity() + offsets_.capacity() * sizeof(uint32_t) +
         bytes_.capacity() + (child_ ? child_->MemoryBytes() : 0);
}

Batch::Batch(std::shared_ptr<const Schema> schema) : schema_(std::move(schema)) {
  columns_.reserve(schema_->fields.size());
  for (const auto& f : schema_->fields) columns_.emplace_back(f.type);
}

size_t Batch::MemoryBytes() const {
  size_t n = 0;
  for (const auto& c : columns_) n += c.MemoryBytes();
  return n + origins_.capacity() * sizeof(RowOrigin);
}

void Batch::Clear() {
  for (auto& c : columns_) c.Clear();
  origins_.clear();
}

}  // namespace ferry
