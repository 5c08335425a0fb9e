#include "ferry/types/fingerprint.h"

#include <cmath>
#include <cstring>

namespace ferry {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// A bijective 64-bit mixer (xor-shift-multiply rounds).
uint64_t Mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dULL;
  x ^= x >> 33;
  return x;
}

constexpr uint64_t kKeySeed = 0x6b65792d66657272ULL;
constexpr uint64_t kRowSeed = 0x726f772d66657272ULL;

}  // namespace

ValueKind KindOf(const DataType& t) {
  switch (t.kind()) {
    case TypeKind::kBoolean:
      return ValueKind::kBoolean;
    case TypeKind::kInt32:
    case TypeKind::kInt64:
      return ValueKind::kInteger;
    case TypeKind::kFloat32:
    case TypeKind::kFloat64:
      return ValueKind::kFloat;
    case TypeKind::kDecimal:
      return ValueKind::kDecimal;
    case TypeKind::kDate:
      return ValueKind::kDate;
    case TypeKind::kTime:
      return ValueKind::kTime;
    case TypeKind::kTimestamp:
      return ValueKind::kTimestamp;
    case TypeKind::kTimestampTz:
      return ValueKind::kTimestampTz;
    case TypeKind::kString:
    case TypeKind::kBinary:
      return ValueKind::kBytes;
    case TypeKind::kUuid:
      return ValueKind::kUuid;
    case TypeKind::kList:
      return KindOf(t.list().type) == ValueKind::kOther ? ValueKind::kOther : ValueKind::kList;
    default:
      return ValueKind::kOther;
  }
}

bool SameKind(const DataType& a, const DataType& b) {
  if (KindOf(a) != KindOf(b)) return false;
  return !a.is_list() || KindOf(a.list().type) == KindOf(b.list().type);
}

void AppendCanonicalValue(const Column& col, size_t row, std::string* out) {
  if (!col.IsValid(row)) {
    out->push_back('\0');
    return;
  }
  const ValueKind kind = KindOf(col.type());
  out->push_back(static_cast<char>(kind));
  switch (col.type().kind()) {
    case TypeKind::kBoolean:
      out->push_back(col.ValueAt<uint8_t>(row) != 0 ? '\1' : '\0');
      return;
    case TypeKind::kInt32:
      Put<int64_t>(out, col.ValueAt<int32_t>(row));
      return;
    case TypeKind::kInt64:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      Put<int64_t>(out, col.ValueAt<int64_t>(row));
      return;
    case TypeKind::kFloat32:
    case TypeKind::kFloat64: {
      const double d = col.type().kind() == TypeKind::kFloat32
                           ? static_cast<double>(col.ValueAt<float>(row))
                           : col.ValueAt<double>(row);
      uint64_t bits;
      if (std::isnan(d)) {
        bits = 0x7ff8000000000000ULL;  // every NaN alike
      } else {
        std::memcpy(&bits, &d, sizeof bits);  // -0.0 stays apart from 0.0
      }
      Put<uint64_t>(out, bits);
      return;
    }
    case TypeKind::kDecimal: {
      // By value: trailing zeros of the unscaled integer are dropped with the scale.
      int128_t v = col.ValueAt<int128_t>(row);
      int scale = col.type().scale();
      if (v == 0) scale = 0;
      while (scale > 0 && v % 10 == 0) {
        v /= 10;
        --scale;
      }
      Put<int128_t>(out, v);
      Put<int8_t>(out, static_cast<int8_t>(scale));
      return;
    }
    case TypeKind::kDate:
      Put<int32_t>(out, col.ValueAt<int32_t>(row));
      return;
    case TypeKind::kUuid:
      out->append(reinterpret_cast<const char*>(col.fixed_data()) + row * 16, 16);
      return;
    case TypeKind::kString:
    case TypeKind::kBinary: {
      std::string_view v = col.GetBytes(row);
      Put<uint64_t>(out, v.size());
      out->append(v);
      return;
    }
    case TypeKind::kList: {
      // The element count, then each element (NULL elements included) in order.
      auto [first, end] = col.ListRange(row);
      Put<uint64_t>(out, end - first);
      for (size_t i = first; i < end; ++i) AppendCanonicalValue(col.list_child(), i, out);
      return;
    }
    default:
      // A kind this encoding does not know (the verifier leaves such columns out): only its kind.
      return;
  }
}

uint64_t Hash64(std::string_view bytes, uint64_t seed) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  uint64_t h = Mix(seed ^ (static_cast<uint64_t>(n) * 0x9e3779b97f4a7c15ULL));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = Rotl(h ^ Mix(w), 29) * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
  }
  uint64_t tail = 0;
  if (n > i) std::memcpy(&tail, p + i, n - i);
  h = Rotl(h ^ Mix(tail ^ (static_cast<uint64_t>(n - i) << 56)), 29) * 0x9e3779b97f4a7c15ULL;
  return Mix(h);
}

Fingerprint RowFingerprinter::Of(const Batch& batch, size_t row) {
  Fingerprint f;
  scratch_.clear();
  for (size_t c : columns_) AppendCanonicalValue(batch.column(c), row, &scratch_);
  f.row = Hash64(scratch_, kRowSeed);
  if (key_.empty()) {
    f.key = f.row;
    return f;
  }
  scratch_.clear();
  for (size_t c : key_) AppendCanonicalValue(batch.column(c), row, &scratch_);
  f.key = Hash64(scratch_, kKeySeed);
  return f;
}

}  // namespace ferry
