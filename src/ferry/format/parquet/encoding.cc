#include "ferry/format/parquet/encoding.h"
#include <cstdio>
#include <vector>

namespace ferry::parquet::internal {

namespace {

// Length of the run of equal levels starting at i, looking at most `cap` values ahead.
inline size_t RunLength(const uint8_t* levels, size_t i, size_t n, size_t cap) {
  size_t end = n - i > cap ? i + cap : n;
  uint8_t v = levels[i];
  size_t j = i + 1;
  while (j < end && levels[j] == v) ++j;
  return j - i;
}

}  // namespace

void EncodeLevelsBitWidth1(const uint8_t* levels, size_t n, size_t zeros, ByteBuffer* out) {
  if (n == 0) return;
  if (zeros == 0 || zeros == n) {  // one RLE run; `zeros` is exact when the caller counted
    out->PutVarint(static_cast<uint64_t>(n) << 1);
    out->PushBack(zeros == 0 ? 1 : 0);
    return;
  }
  // A run this long (or reaching the end) is worth an RLE run of its own.
  constexpr size_t kMinRle = 16;
  size_t i = 0;
  while (i < n) {
    size_t run = RunLength(levels, i, n, SIZE_MAX);
    if (run >= 8 || i + run == n) {
      out->PutVarint(static_cast<uint64_t>(run) << 1);
      out->PushBack(levels[i]);
      i += run;
      continue;
    }
    // Bit-pack groups of 8 until a long run starts on a group boundary (or the data ends; the
    // last group is padded with zeros, which readers ignore past num_values).
    size_t start = i;
    size_t groups = 0;
    for (;;) {
      i += 8;
      ++groups;
      if (i >= n) break;
      size_t r = RunLength(levels, i, n, kMinRle);
      if (r >= kMinRle || i + r == n) break;
    }
    out->PutVarint((static_cast<uint64_t>(groups) << 1) | 1);
    char* dst = out->AppendUninit(groups);
    for (size_t g = 0; g < groups; ++g) {
      size_t base = start + g * 8;
      uint8_t byte = 0;
      if (base + 8 <= n) {
        for (int b = 0; b < 8; ++b) byte |= static_cast<uint8_t>((levels[base + b] & 1) << b);
      } else {
        for (size_t b = 0; base + b < n; ++b)
          byte |= static_cast<uint8_t>((levels[base + b] & 1) << b);
      }
      dst[g] = static_cast<char>(byte);
    }
    if (i > n) i = n;
  }
}

void EncodeRleHybrid(const uint32_t* values, size_t n, int bit_width, ByteBuffer* out) {
  const auto width = static_cast<size_t>(bit_width);
  const size_t value_bytes = (width + 7) / 8;
  // Length of the run of equal values starting at i, looking at most `cap` values ahead.
  auto run_at = [&](size_t i, size_t cap) {
    const size_t end = n - i > cap ? i + cap : n;
    const uint32_t v = values[i];
    size_t j = i + 1;
    while (j < end && values[j] == v) ++j;
    return j - i;
  };
  size_t i = 0;
  while (i < n) {
    const size_t run = run_at(i, SIZE_MAX);
    if (run >= 8 || i + run == n) {
      out->PutVarint(static_cast<uint64_t>(run) << 1);
      for (size_t b = 0; b < value_bytes; ++b)
        out->PushBack(static_cast<uint8_t>(values[i] >> (8 * b)));
      i += run;
      continue;
    }
    // Bit-pack groups of 8 until a run of 8 starts on a group boundary (or the data ends; the last
    // group is padded with zeros, which readers ignore past the page's value count).
    const size_t start = i;
    size_t groups = 0;
    for (;;) {
      i += 8;
      ++groups;
      if (i >= n || run_at(i, 8) >= 8) break;
    }
    out->PutVarint((static_cast<uint64_t>(groups) << 1) | 1);
    char* dst = out->AppendUninit(groups * width);
    const size_t count = groups * 8;
    const size_t full = n - start >= count ? count : n - start;
    uint64_t acc = 0;
    size_t nbits = 0;
    for (size_t k = 0; k < count; ++k) {
      const uint64_t v = k < full ? values[start + k] : 0;
      acc |= v << nbits;
      nbits += width;
      while (nbits >= 8) {
        *dst++ = static_cast<char>(acc);
        acc >>= 8;
        nbits -= 8;
      }
    }
    if (i > n) i = n;
  }
}

void BigEndianBytes(__int128 v, int width, uint8_t* out) {
  auto u = static_cast<unsigned __int128>(v);
  for (int k = width - 1; k >= 0; --k) {
    out[k] = static_cast<uint8_t>(u);
    u >>= 8;
  }
}

std::string MinimalBigEndian(__int128 v) {
  uint8_t b[16];
  BigEndianBytes(v, 16, b);
  int start = 0;
  // Drop a leading byte while it is only the sign extension of the next one.
  while (start < 15 && ((b[start] == 0x00 && (b[start + 1] & 0x80) == 0) ||
                        (b[start] == 0xFF && (b[start + 1] & 0x80) != 0))) {
    ++start;
  }
  return std::string(reinterpret_cast<const char*>(b + start), static_cast<size_t>(16 - start));
}

int DecimalBytesForPrecision(int precision) {
  unsigned __int128 max_unscaled = 1;
  for (int i = 0; i < precision; ++i) max_unscaled *= 10;
  max_unscaled -= 1;
  for (int bytes = 1; bytes < 16; ++bytes) {
    unsigned __int128 limit = (static_cast<unsigned __int128>(1) << (8 * bytes - 1)) - 1;
    if (max_unscaled <= limit) return bytes;
  }
  return 16;
}

namespace {

inline bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Byte length of the first `code_points` code points of v, or v.size() if it has no more.
size_t PrefixBytes(std::string_view v, size_t code_points) {
  size_t count = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!IsContinuation(static_cast<uint8_t>(v[i]))) {
      if (count == code_points) return i;
      ++count;
    }
  }
  return v.size();
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::string TruncateUtf8Lower(std::string_view v, size_t code_points) {
  return std::string(v.substr(0, PrefixBytes(v, code_points)));
}

std::optional<std::string> TruncateUtf8Upper(std::string_view v, size_t code_points) {
  size_t cut = PrefixBytes(v, code_points);
  if (cut == v.size()) return std::string(v);
  std::string_view prefix = v.substr(0, cut);
  while (!prefix.empty()) {
    // Decode the last code point of prefix.
    size_t start = prefix.size() - 1;
    while (start > 0 && IsContinuation(static_cast<uint8_t>(prefix[start]))) --start;
    auto lead = static_cast<uint8_t>(prefix[start]);
    size_t len = prefix.size() - start;
    uint32_t cp = len == 1   ? lead
                  : len == 2 ? (lead & 0x1Fu)
                  : len == 3 ? (lead & 0x0Fu)
                             : (lead & 0x07u);
    for (size_t k = start + 1; k < prefix.size(); ++k) {
      cp = (cp << 6) | (static_cast<uint8_t>(prefix[k]) & 0x3Fu);
    }
    uint32_t next = cp + 1;
    if (next >= 0xD800 && next <= 0xDFFF) next = 0xE000;
    if (next <= 0x10FFFF) {
      std::string out(prefix.substr(0, start));
      AppendUtf8(next, &out);
      return out;
    }
    prefix = prefix.substr(0, start);  // U+10FFFF cannot grow: try the previous code point
  }
  return std::nullopt;
}

std::string TruncateBinaryLower(std::string_view v, size_t n) {
  return std::string(v.substr(0, n));
}

std::optional<std::string> TruncateBinaryUpper(std::string_view v, size_t n) {
  if (v.size() <= n) return std::string(v);
  std::string out(v.substr(0, n));
  while (!out.empty()) {
    auto last = static_cast<uint8_t>(out.back());
    if (last != 0xFF) {
      out.back() = static_cast<char>(last + 1);
      return out;
    }
    out.pop_back();
  }
  return std::nullopt;
}

std::string ParquetColumnName(std::string_view name) {
  // Decode UTF-8 into UTF-16 code units (invalid bytes are taken as Latin-1, one unit each).
  std::vector<uint16_t> units;
  for (size_t i = 0; i < name.size();) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    uint32_t cp = c;
    size_t len = 1;
    if (c >= 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else if (c >= 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xC0) {
      len = 2;
      cp = c & 0x1F;
    }
    if (len > 1) {
      bool ok = i + len <= name.size();
      for (size_t k = 1; ok && k < len; ++k) {
        unsigned char cc = static_cast<unsigned char>(name[i + k]);
        if ((cc & 0xC0) != 0x80) ok = false;
        cp = (cp << 6) | (cc & 0x3F);
      }
      if (!ok) {
        len = 1;
        cp = c;
      }
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      units.push_back(static_cast<uint16_t>(0xD800 + (cp >> 10)));
      units.push_back(static_cast<uint16_t>(0xDC00 + (cp & 0x3FF)));
    } else {
      units.push_back(static_cast<uint16_t>(cp));
    }
    i += len;
  }
  std::string out;
  for (size_t i = 0; i < units.size(); ++i) {
    uint16_t u = units[i];
    bool letter = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z');
    bool digit = u >= '0' && u <= '9';
    if (letter || u == '_' || (digit && i > 0)) {
      out += static_cast<char>(u);
    } else if (digit) {
      out += '_';
      out += static_cast<char>(u);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "_x%X", static_cast<unsigned>(u));
      out += buf;
    }
  }
  return out;
}

}  // namespace ferry::parquet::internal
