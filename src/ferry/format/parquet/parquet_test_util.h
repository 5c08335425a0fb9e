// Test-only: a generic Thrift compact decoder and a minimal Parquet reader (footer, data page v1,
// PLAIN values, dictionary pages and RLE_DICTIONARY data pages, RLE/bit-packed definition levels)
// used by the unit tests to read back what the
// writer produced. Deliberately independent of the writer's code; not for production use.
#pragma once

#include <gtest/gtest.h>
#include <snappy.h>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::parquet::testing {

// A decoded Thrift value: a struct (fields by id), list, integer, bool or binary.
struct TValue {
  uint8_t type = 0;  // compact type id; 12 = struct, 9 = list
  int64_t i = 0;
  bool b = false;
  double d = 0;
  std::string bin;
  std::vector<TValue> list;
  std::map<int16_t, TValue> fields;

  bool has(int16_t id) const { return fields.count(id) > 0; }
  const TValue& operator[](int16_t id) const {
    auto it = fields.find(id);
    if (it == fields.end())
      throw std::runtime_error("thrift field " + std::to_string(id) + " absent");
    return it->second;
  }
};

class CompactReader {
 public:
  CompactReader(const char* p, size_t n) : p_(reinterpret_cast<const uint8_t*>(p)), n_(n) {}
  size_t pos() const { return pos_; }

  TValue ReadStruct() {
    TValue v;
    v.type = 12;
    int16_t last = 0;
    for (;;) {
      uint8_t h = Byte();
      if (h == 0) break;
      uint8_t type = h & 0x0F;
      int16_t id;
      if ((h >> 4) != 0) {
        id = static_cast<int16_t>(last + (h >> 4));
      } else {
        id = static_cast<int16_t>(UnZigZag(Varint()));
      }
      last = id;
      v.fields[id] = ReadValue(type);
    }
    return v;
  }

 private:
  uint8_t Byte() {
    if (pos_ >= n_) throw std::runtime_error("thrift: truncated");
    return p_[pos_++];
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = Byte();
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw std::runtime_error("thrift: bad varint");
  }
  static int64_t UnZigZag(uint64_t v) {
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }
  TValue ReadValue(uint8_t type) {
    TValue v;
    v.type = type;
    switch (type) {
      case 1:
        v.b = true;
        break;
      case 2:
        v.b = false;
        break;
      case 3:
        v.i = static_cast<int8_t>(Byte());
        break;
      case 4:
      case 5:
      case 6:
        v.i = UnZigZag(Varint());
        break;
      case 7: {
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits |= static_cast<uint64_t>(Byte()) << (8 * k);
        std::memcpy(&v.d, &bits, 8);
        break;
      }
      case 8: {
        uint64_t len = Varint();
        if (pos_ + len > n_) throw std::runtime_error("thrift: truncated binary");
        v.bin.assign(reinterpret_cast<const char*>(p_ + pos_), len);
        pos_ += len;
        break;
      }
      case 9:
      case 10: {
        uint8_t h = Byte();
        uint64_t size = h >> 4;
        uint8_t et = h & 0x0F;
        if (size == 15) size = Varint();
        for (uint64_t k = 0; k < size; ++k) {
          if (et == 1 || et == 2) {
            TValue e;
            e.type = et;
            e.b = Byte() == 1;
            v.list.push_back(e);
          } else {
            v.list.push_back(ReadValue(et));
          }
        }
        break;
      }
      case 12:
        v = ReadStruct();
        break;
      default:
        throw std::runtime_error("thrift: unsupported type " + std::to_string(type));
    }
    return v;
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// Parses the footer of a complete Parquet file.
inline TValue ReadFooter(const std::string& file) {
  if (file.size() < 12 || file.compare(0, 4, "PAR1") != 0 ||
      file.compare(file.size() - 4, 4, "PAR1") != 0) {
    throw std::runtime_error("not a parquet file");
  }
  uint32_t len;
  std::memcpy(&len, file.data() + file.size() - 8, 4);
  size_t start = file.size() - 8 - len;
  CompactReader r(file.data() + start, len);
  TValue meta = r.ReadStruct();
  if (r.pos() != len) throw std::runtime_error("footer length mismatch");
  return meta;
}

struct PageInfo {
  TValue header;
  size_t header_bytes = 0;
};

// One column chunk read back: the plain bytes of each value (nullopt for NULL) and its pages.
struct ChunkData {
  std::vector<std::optional<std::string>> values;
  std::vector<PageInfo> pages;
};

inline std::string Decompress(int codec, std::string_view in, size_t uncompressed) {
  std::string out(uncompressed, '\0');
  if (codec == 0) return std::string(in);
  if (codec == 6) {
    size_t r = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
    if (ZSTD_isError(r) || r != uncompressed) throw std::runtime_error("zstd decompress failed");
  } else if (codec == 1) {
    if (!snappy::RawUncompress(in.data(), in.size(), out.data()))
      throw std::runtime_error("snappy failed");
  } else {
    throw std::runtime_error("codec");
  }
  return out;
}

// Decodes `n` levels of bit width 1 from the RLE/bit-packed hybrid data.
inline std::vector<uint8_t> DecodeLevels(std::string_view data, size_t n) {
  std::vector<uint8_t> out;
  size_t pos = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      auto b = static_cast<uint8_t>(data.at(pos++));
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
  };
  while (out.size() < n) {
    uint64_t h = varint();
    if (h & 1) {
      uint64_t groups = h >> 1;
      for (uint64_t g = 0; g < groups; ++g) {
        auto byte = static_cast<uint8_t>(data.at(pos++));
        for (int b = 0; b < 8; ++b) out.push_back((byte >> b) & 1);
      }
    } else {
      uint64_t run = h >> 1;
      uint8_t v = static_cast<uint8_t>(data.at(pos++));
      out.insert(out.end(), run, v);
    }
  }
  if (pos != data.size()) throw std::runtime_error("levels: trailing bytes");
  out.resize(n);
  return out;
}

// Decodes `n` values of `bit_width` bits (0..32) from RLE/bit-packed hybrid data. Bit-packed
// groups may hold padding past n; the data must hold nothing after the groups that cover n.
inline std::vector<uint32_t> DecodeHybrid(std::string_view data, size_t n, int bit_width) {
  std::vector<uint32_t> out;
  size_t pos = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      auto b = static_cast<uint8_t>(data.at(pos++));
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
  };
  const size_t value_bytes = (static_cast<size_t>(bit_width) + 7) / 8;
  while (out.size() < n) {
    uint64_t h = varint();
    if (h & 1) {
      uint64_t values = (h >> 1) * 8;
      uint64_t bits = 0;
      for (uint64_t k = 0; k < values; ++k) {
        uint32_t v = 0;
        for (int b = 0; b < bit_width; ++b, ++bits) {
          auto byte = static_cast<uint8_t>(data.at(bits / 8 + pos));
          v |= static_cast<uint32_t>((byte >> (bits % 8)) & 1) << b;
        }
        out.push_back(v);
      }
      pos += (h >> 1) * static_cast<uint64_t>(bit_width);
    } else {
      uint64_t run = h >> 1;
      if (run == 0) throw std::runtime_error("hybrid: empty RLE run");
      uint32_t v = 0;
      for (size_t b = 0; b < value_bytes; ++b)
        v |= static_cast<uint32_t>(static_cast<uint8_t>(data.at(pos++))) << (8 * b);
      if (bit_width < 32 && (v >> bit_width) != 0)
        throw std::runtime_error("hybrid: RLE value too wide");
      out.insert(out.end(), run, v);
    }
  }
  if (pos != data.size()) throw std::runtime_error("hybrid: trailing bytes");
  out.resize(n);
  return out;
}

// Splits PLAIN-encoded bytes holding `n` values of a physical type into one string per value.
inline std::vector<std::string> SplitPlain(std::string_view vals, size_t n, int physical,
                                           int type_length) {
  std::vector<std::string> out;
  size_t vp = 0;
  for (size_t i = 0; i < n; ++i) {
    switch (physical) {
      case 1:
      case 4:
        out.emplace_back(vals.substr(vp, 4));
        vp += 4;
        break;
      case 2:
      case 5:
        out.emplace_back(vals.substr(vp, 8));
        vp += 8;
        break;
      case 6: {
        uint32_t len;
        if (vp + 4 > vals.size()) throw std::runtime_error("plain: truncated");
        std::memcpy(&len, vals.data() + vp, 4);
        out.emplace_back(vals.substr(vp + 4, len));
        vp += 4 + len;
        break;
      }
      case 7:
        out.emplace_back(vals.substr(vp, static_cast<size_t>(type_length)));
        vp += static_cast<size_t>(type_length);
        break;
      default:
        throw std::runtime_error("physical type");
    }
    if (vp > vals.size()) throw std::runtime_error("plain: truncated");
  }
  if (vp != vals.size()) throw std::runtime_error("plain: trailing value bytes");
  return out;
}

// Reads column `c` of row group `g`. `type_length` is needed for FIXED_LEN_BYTE_ARRAY.
// Pages: an optional DICTIONARY_PAGE (PLAIN) first, then data pages v1 in PLAIN or RLE_DICTIONARY.
inline ChunkData ReadChunk(const std::string& file, const TValue& footer, size_t g, size_t c) {
  const TValue& schema = footer[2].list[c + 1];
  const bool optional = schema[3].i == 1;
  const int physical = static_cast<int>(schema[1].i);
  const int type_length = schema.has(2) ? static_cast<int>(schema[2].i) : 0;
  const TValue& cc = footer[4].list[g][1].list[c];
  const TValue& md = cc[3];
  const int codec = static_cast<int>(md[4].i);
  size_t pos = static_cast<size_t>(md.has(11) ? md[11].i : md[9].i);
  const size_t end = pos + static_cast<size_t>(md[7].i);
  ChunkData out;
  std::optional<std::vector<std::string>> dict;
  while (pos < end) {
    if (!dict && md.has(11) && pos != static_cast<size_t>(md[11].i))
      throw std::runtime_error("dictionary page offset");
    if (!out.pages.empty() && out.pages.size() == (md.has(11) ? 1u : 0u) &&
        pos != static_cast<size_t>(md[9].i)) {
      throw std::runtime_error("data_page_offset is not the first data page");
    }
    CompactReader r(file.data() + pos, end - pos);
    PageInfo page;
    page.header = r.ReadStruct();
    page.header_bytes = r.pos();
    pos += r.pos();
    const TValue& ph = page.header;
    size_t compressed = static_cast<size_t>(ph[3].i);
    std::string body = Decompress(codec, std::string_view(file).substr(pos, compressed),
                                  static_cast<size_t>(ph[2].i));
    pos += compressed;
    if (ph[1].i == 2) {  // DICTIONARY_PAGE
      if (dict || !out.pages.empty()) throw std::runtime_error("dictionary page not first");
      if (ph[7][2].i != 0) throw std::runtime_error("dictionary page not PLAIN");
      dict = SplitPlain(body, static_cast<size_t>(ph[7][1].i), physical, type_length);
      out.pages.push_back(std::move(page));
      continue;
    }
    if (ph[1].i != 0) throw std::runtime_error("unexpected page type");
    if (out.pages.empty() && md.has(11))
      throw std::runtime_error("dictionary_page_offset without a dictionary page");
    size_t n = static_cast<size_t>(ph[5][1].i);
    std::vector<uint8_t> levels(n, 1);
    std::string_view vals(body);
    if (optional) {
      uint32_t len;
      std::memcpy(&len, body.data(), 4);
      levels = DecodeLevels(std::string_view(body).substr(4, len), n);
      vals = std::string_view(body).substr(4 + len);
    }
    const int encoding = static_cast<int>(ph[5][2].i);
    if (encoding == 8) {  // RLE_DICTIONARY: bit width byte, then the indices
      if (!dict) throw std::runtime_error("RLE_DICTIONARY page without a dictionary page");
      size_t present = 0;
      for (uint8_t l : levels) present += l;
      if (vals.empty()) throw std::runtime_error("RLE_DICTIONARY page without a bit width");
      int bit_width = static_cast<uint8_t>(vals[0]);
      if (bit_width > 32) throw std::runtime_error("bit width");
      std::vector<uint32_t> idx = DecodeHybrid(vals.substr(1), present, bit_width);
      size_t k = 0;
      for (size_t i = 0; i < n; ++i) {
        if (!levels[i]) {
          out.values.push_back(std::nullopt);
          continue;
        }
        out.values.push_back(dict->at(idx[k++]));
      }
      out.pages.push_back(std::move(page));
      continue;
    }
    if (encoding != 0) throw std::runtime_error("unexpected encoding " + std::to_string(encoding));
    size_t vp = 0, bit = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!levels[i]) {
        out.values.push_back(std::nullopt);
        continue;
      }
      switch (physical) {
        case 0: {  // BOOLEAN, bit-packed
          uint8_t b = (static_cast<uint8_t>(vals.at(bit / 8)) >> (bit % 8)) & 1;
          ++bit;
          out.values.push_back(std::string(1, static_cast<char>(b)));
          break;
        }
        case 1:
        case 4:
          out.values.push_back(std::string(vals.substr(vp, 4)));
          vp += 4;
          break;
        case 2:
        case 5:
          out.values.push_back(std::string(vals.substr(vp, 8)));
          vp += 8;
          break;
        case 6: {
          uint32_t len;
          std::memcpy(&len, vals.data() + vp, 4);
          out.values.push_back(std::string(vals.substr(vp + 4, len)));
          vp += 4 + len;
          break;
        }
        case 7:
          out.values.push_back(std::string(vals.substr(vp, static_cast<size_t>(type_length))));
          vp += static_cast<size_t>(type_length);
          break;
        default:
          throw std::runtime_error("physical type");
      }
    }
    if (physical == 0) vp = (bit + 7) / 8;
    if (vp != vals.size()) throw std::runtime_error("page: trailing value bytes");
    out.pages.push_back(std::move(page));
  }
  if (pos != end) throw std::runtime_error("chunk overruns total_compressed_size");
  return out;
}

template <typename T>
std::string LE(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

inline std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

}  // namespace ferry::parquet::testing
