#include "ferry/clients/postgres/copy_binary.h"

#include <cstring>
#include <limits>

#include "ferry/types/value_parse.h"

namespace ferry::pg {
namespace {

constexpr char kSignature[] = "PGCOPY\n\377\r\n";  // + the terminating NUL: 11 bytes
constexpr size_t kSignatureBytes = 11;
constexpr int64_t kDaysFrom1970To2000 = 10957;
constexpr int64_t kMicrosFrom1970To2000 = 946684800LL * 1000000;
constexpr int64_t kMicrosPerDay = 86400LL * 1000000;

uint16_t Be16(const char* p) {
  return static_cast<uint16_t>((static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]));
}
uint32_t Be32(const char* p) {
  return (static_cast<uint32_t>(static_cast<uint8_t>(p[0])) << 24) |
         (static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 16) |
         (static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 8) |
         static_cast<uint32_t>(static_cast<uint8_t>(p[3]));
}
uint64_t Be64(const char* p) { return (static_cast<uint64_t>(Be32(p)) << 32) | Be32(p + 4); }

// The parts of a numeric in send format, checked.
struct NumericParts {
  enum Kind { kFinite, kNaN, kPosInf, kNegInf } kind = kFinite;
  bool negative = false;
  int weight = 0;
  int dscale = 0;
  std::string_view digits;  // base-10000 digits, 2 bytes each, big-endian (checked < 10000)
  size_t size() const { return digits.size() / 2; }
  uint16_t digit(size_t i) const { return Be16(digits.data() + 2 * i); }
};

Result<NumericParts> ParseNumeric(std::string_view v) {
  if (v.size() < 8)
    return Status::Corruption("numeric value of " + std::to_string(v.size()) + " bytes");
  int ndigits = static_cast<int16_t>(Be16(v.data()));
  NumericParts n;
  n.weight = static_cast<int16_t>(Be16(v.data() + 2));
  uint16_t sign = Be16(v.data() + 4);
  n.dscale = Be16(v.data() + 6);
  if (ndigits < 0 || v.size() != 8 + 2 * static_cast<size_t>(ndigits)) {
    return Status::Corruption("numeric value with " + std::to_string(ndigits) + " digits in " +
                              std::to_string(v.size()) + " bytes");
  }
  switch (sign) {
    case 0x0000:
      break;
    case 0x4000:
      n.negative = true;
      break;
    case 0xC000:
      n.kind = NumericParts::kNaN;
      return n;
    case 0xD000:
      n.kind = NumericParts::kPosInf;
      return n;
    case 0xF000:
      n.kind = NumericParts::kNegInf;
      return n;
    default:
      return Status::Corruption("numeric value with sign word " + std::to_string(sign));
  }
  if (n.dscale > 0x3FFF)
    return Status::Corruption("numeric display scale " + std::to_string(n.dscale));
  n.digits = v.substr(8);
  for (size_t i = 0; i < n.size(); ++i) {
    uint16_t d = n.digit(i);
    if (d >= 10000) return Status::Corruption("numeric base-10000 digit " + std::to_string(d));
  }
  return n;
}

void AppendPadded(std::string* out, int64_t v, int width) {
  std::string s = std::to_string(v);
  if (static_cast<int>(s.size()) < width) out->append(static_cast<size_t>(width) - s.size(), '0');
  *out += s;
}

// PostgreSQL's AppendSeconds: seconds, then the fraction without trailing zeros (if any).
void AppendSeconds(std::string* out, int64_t sec, int64_t usec, bool two_digits) {
  AppendPadded(out, sec < 0 ? -sec : sec, two_digits ? 2 : 1);
  if (usec != 0) {
    std::string f;
    AppendPadded(&f, usec < 0 ? -usec : usec, 6);
    while (!f.empty() && f.back() == '0') f.pop_back();
    *out += '.';
    *out += f;
  }
}

}  // namespace

Result<int128_t> NumericToDecimal(std::string_view value, int precision, int scale) {
  FERRY_ASSIGN_OR_RETURN(NumericParts n, ParseNumeric(value));
  auto fix = [&](const std::string& what) {
    return Status::InvalidArgument(
        what + " cannot be stored in Iceberg decimal(" + std::to_string(precision) + "," +
        std::to_string(scale) +
        "); declare the column as numeric without precision (ferry then writes its exact text) "
        "or replace such values in a view");
  };
  if (n.kind == NumericParts::kNaN) return fix("NaN");
  if (n.kind == NumericParts::kPosInf) return fix("Infinity");
  if (n.kind == NumericParts::kNegInf) return fix("-Infinity");
  using u128 = unsigned __int128;
  const u128 limit = static_cast<u128>(Pow10(precision));
  u128 acc = 0;
  static constexpr int64_t kSmallPow10[4] = {1, 10, 100, 1000};
  for (size_t i = 0; i < n.size(); ++i) {
    int64_t d = n.digit(i);
    if (d == 0) continue;
    // Digit i is worth d * 10000^(weight - i); at `scale` that is d * 10^exp.
    int64_t exp = 4 * (static_cast<int64_t>(n.weight) - static_cast<int64_t>(i)) + scale;
    u128 contribution;
    if (exp < 0) {
      if (exp <= -4 || d % kSmallPow10[-exp] != 0) {
        Result<std::string> text = NumericToText(value);
        return Status::InvalidArgument(
            "value " + (text.ok() ? *text : std::string("?")) + " has more than " +
            std::to_string(scale) + " fraction digits, which Iceberg decimal(" +
            std::to_string(precision) + "," + std::to_string(scale) + ") cannot hold");
      }
      contribution = static_cast<u128>(d / kSmallPow10[-exp]);
    } else {
      if (exp >= precision || d >= Pow10(precision - static_cast<int>(exp))) {
        contribution = limit;  // too many digits: reported below
      } else {
        contribution = static_cast<u128>(d) * static_cast<u128>(Pow10(static_cast<int>(exp)));
      }
    }
    acc += contribution;  // both < 10^38 + 1: no overflow of 128 unsigned bits
    if (acc >= limit) {
      Result<std::string> text = NumericToText(value);
      return Status::InvalidArgument("value " + (text.ok() ? *text : std::string("?")) +
                                     " has more digits than Iceberg decimal(" +
                                     std::to_string(precision) + "," + std::to_string(scale) +
                                     ") holds");
    }
  }
  int128_t out = static_cast<int128_t>(acc);
  return n.negative ? -out : out;
}

Result<std::string> NumericToText(std::string_view value) {
  FERRY_ASSIGN_OR_RETURN(NumericParts n, ParseNumeric(value));
  if (n.kind == NumericParts::kNaN) return std::string("NaN");
  if (n.kind == NumericParts::kPosInf) return std::string("Infinity");
  if (n.kind == NumericParts::kNegInf) return std::string("-Infinity");
  auto digit = [&](int64_t g) -> int64_t {
    return g >= 0 && g < static_cast<int64_t>(n.size()) ? n.digit(static_cast<size_t>(g)) : 0;
  };
  std::string out;
  if (n.negative) out += '-';
  if (n.weight < 0) {
    out += '0';
  } else {
    for (int64_t g = 0; g <= n.weight; ++g) AppendPadded(&out, digit(g), g == 0 ? 1 : 4);
  }
  if (n.dscale > 0) {
    out += '.';
    size_t start = out.size();
    for (int64_t g = static_cast<int64_t>(n.weight) + 1;
         out.size() - start < static_cast<size_t>(n.dscale); ++g) {
      AppendPadded(&out, digit(g), 4);
    }
    out.resize(start + static_cast<size_t>(n.dscale));
  }
  return out;
}

std::string TimeTzToText(int64_t micros, int32_t zone_seconds_west) {
  std::string out;
  int64_t hour = micros / 3600000000LL;
  int64_t rest = micros - hour * 3600000000LL;
  int64_t min = rest / 60000000;
  rest -= min * 60000000;
  int64_t sec = rest / 1000000;
  AppendPadded(&out, hour, 2);
  out += ':';
  AppendPadded(&out, min, 2);
  out += ':';
  AppendSeconds(&out, sec, rest - sec * 1000000, true);
  int64_t tz = zone_seconds_west;
  int64_t s = tz < 0 ? -tz : tz;
  int64_t m = s / 60;
  s -= m * 60;
  int64_t h = m / 60;
  m -= h * 60;
  out += tz <= 0 ? '+' : '-';  // the zone is stored as seconds west of Greenwich
  AppendPadded(&out, h, 2);
  if (s != 0 || m != 0) {
    out += ':';
    AppendPadded(&out, m, 2);
  }
  if (s != 0) {
    out += ':';
    AppendPadded(&out, s, 2);
  }
  return out;
}

std::string IntervalToText(int64_t micros, int32_t days, int32_t months) {
  int64_t year = months / 12, mon = months % 12, mday = days;
  int64_t hour = micros / 3600000000LL;
  int64_t t = micros - hour * 3600000000LL;
  int64_t min = t / 60000000;
  t -= min * 60000000;
  int64_t sec = t / 1000000;
  int64_t usec = t - sec * 1000000;
  if (year == 0 && mon == 0 && mday == 0 && hour == 0 && min == 0 && sec == 0 && usec == 0) {
    return "PT0S";
  }
  std::string out = "P";
  auto part = [&](int64_t v, char unit) {
    if (v == 0) return;
    out += std::to_string(v);
    out += unit;
  };
  part(year, 'Y');
  part(mon, 'M');
  part(mday, 'D');
  if (hour != 0 || min != 0 || sec != 0 || usec != 0) out += 'T';
  part(hour, 'H');
  part(min, 'M');
  if (sec != 0 || usec != 0) {
    if (sec < 0 || usec < 0) out += '-';
    AppendSeconds(&out, sec, usec, false);
    out += 'S';
  }
  return out;
}

CopyBinaryDecoder::CopyBinaryDecoder(std::vector<CopyField> fields) : fields_(std::move(fields)) {}

std::string CopyBinaryDecoder::RowLocation() const {
  if (have_tid_) {
    return "ctid (" + std::to_string(tid_block_) + "," + std::to_string(tid_offset_) + ")";
  }
  return "row " + std::to_string(rows_) + " of the chunk";
}

namespace {

constexpr int32_t kMaxArrayDims = 6;  // PostgreSQL's MAXDIM

// array_send -> one list row of `col` (see PgArrayOf).
Status DecodePgArray(PgWire element, std::string_view v, Column* col) {
  if (!col->type().is_list()) {
    return Status::Internal("an array value for a column of type " + col->type().ToIceberg());
  }
  if (IsPgArray(element) || element == PgWire::kTid) {
    return Status::Internal("an array of an unsupported element wire form");
  }
  if (v.size() < 12)
    return Status::Corruption("an array of " + std::to_string(v.size()) + " bytes");
  const auto ndim = static_cast<int32_t>(Be32(v.data()));
  const uint32_t has_null = Be32(v.data() + 4);
  if (ndim < 0 || ndim > kMaxArrayDims || has_null > 1) {
    return Status::Corruption("an array with " + std::to_string(ndim) +
                              " dimensions and NULL flag " + std::to_string(has_null));
  }
  if (v.size() < 12 + 8 * static_cast<size_t>(ndim)) {
    return Status::Corruption("an array cut inside its dimensions");
  }
  if (ndim > 1) {
    return Status::InvalidArgument(
        "a " + std::to_string(ndim) +
        "-dimensional array; ferry maps one-dimensional arrays to lists (PostgreSQL does not fix "
        "an array column's dimensions, so nested lists cannot be declared): flatten it in a view "
        "(e.g. ARRAY(SELECT unnest(col))) or cast it to jsonb (to_jsonb(col))");
  }
  size_t count = 0;
  if (ndim == 1) {
    const auto n = static_cast<int32_t>(Be32(v.data() + 12));
    // Each element takes at least its 4-byte length.
    if (n < 0 || static_cast<uint64_t>(n) * 4 > v.size() - 20) {
      return Status::Corruption("an array of " + std::to_string(n) + " elements in " +
                                std::to_string(v.size()) + " bytes");
    }
    count = static_cast<size_t>(n);
  }
  Column& child = col->list_child();
  size_t p = 12 + 8 * static_cast<size_t>(ndim);
  for (size_t i = 0; i < count; ++i) {
    Status st;
    if (v.size() - p < 4) {
      st = Status::Corruption("an array cut after " + std::to_string(i) + " elements");
    } else {
      const auto len = static_cast<int32_t>(Be32(v.data() + p));
      p += 4;
      if (len == -1) {
        if (has_null == 0) {
          st = Status::Corruption("a NULL element in an array whose header says it has none");
        } else {
          child.AppendNull();
          continue;
        }
      } else if (len < 0 || v.size() - p < static_cast<size_t>(len)) {
        st = Status::Corruption("an array element of " + std::to_string(len) +
                                " bytes past its end");
      } else {
        st = DecodePgValue(element, v.substr(p, static_cast<size_t>(len)), &child);
        p += static_cast<size_t>(len);
      }
    }
    if (!st.ok()) {
      col->DropOpenListElements();
      return Status(st.code(), "array element " + std::to_string(i + 1) + ": " + st.message());
    }
  }
  if (p != v.size()) {
    col->DropOpenListElements();
    return Status::Corruption("an array with bytes after its last element");
  }
  col->AppendListEnd();
  return Status::OK();
}

}  // namespace

bool PgWireWidens(PgWire from, PgWire to) {
  if (from == to) return true;
  switch (to) {
    case PgWire::kInt4:
      return from == PgWire::kInt2;
    case PgWire::kInt8:
      return from == PgWire::kInt2 || from == PgWire::kInt4 || from == PgWire::kOid;
    case PgWire::kFloat8:
      return from == PgWire::kFloat4;
    default:
      return false;
  }
}

Status WidenPgValue(PgWire from, PgWire to, std::string* value) {
  if (from == to) return Status::OK();
  if (!PgWireWidens(from, to)) {
    return Status::InvalidArgument("a value of one type cannot be rewritten as another");
  }
  const std::string_view v = *value;
  auto need = [&](size_t n) {
    return v.size() == n ? Status::OK()
                         : Status::Corruption("a value of " + std::to_string(v.size()) +
                                              " bytes where " + std::to_string(n) + " belong");
  };
  int64_t i = 0;
  switch (from) {
    case PgWire::kInt2:
      FERRY_RETURN_IF_ERROR(need(2));
      i = static_cast<int16_t>(Be16(v.data()));
      break;
    case PgWire::kInt4:
      FERRY_RETURN_IF_ERROR(need(4));
      i = static_cast<int32_t>(Be32(v.data()));
      break;
    case PgWire::kOid:
      FERRY_RETURN_IF_ERROR(need(4));
      i = static_cast<int64_t>(Be32(v.data()));
      break;
    case PgWire::kFloat4: {
      FERRY_RETURN_IF_ERROR(need(4));
      uint32_t bits = Be32(v.data());
      float f;
      std::memcpy(&f, &bits, 4);
      const double d = f;  // exact, NaN and infinities included
      uint64_t out;
      std::memcpy(&out, &d, 8);
      value->clear();
      for (int shift = 56; shift >= 0; shift -= 8)
        value->push_back(static_cast<char>(out >> shift));
      return Status::OK();
    }
    default:
      return Status::Internal("no widening from this form");
  }
  const size_t bytes = to == PgWire::kInt4 ? 4 : 8;
  const auto u = static_cast<uint64_t>(i);
  value->clear();
  for (size_t k = bytes; k-- > 0;) value->push_back(static_cast<char>(u >> (8 * k)));
  return Status::OK();
}

Status DecodePgValue(PgWire wire, std::string_view v, Column* col) {
  if (IsPgArray(wire)) return DecodePgArray(PgElementOf(wire), v, col);
  auto corrupt = [](const std::string& what) { return Status::Corruption(what); };
  auto refuse = [](const std::string& what) { return Status::InvalidArgument(what); };
  auto need = [&](size_t n) { return v.size() == n; };
  switch (wire) {
    case PgWire::kBool:
      if (!need(1) || static_cast<uint8_t>(v[0]) > 1) return corrupt("not a boolean");
      col->AppendBool(v[0] == 1);
      break;
    case PgWire::kInt2:
      if (!need(2)) return corrupt("a smallint of " + std::to_string(v.size()) + " bytes");
      col->AppendInt32(static_cast<int16_t>(Be16(v.data())));
      break;
    case PgWire::kInt4:
      if (!need(4)) return corrupt("an integer of " + std::to_string(v.size()) + " bytes");
      col->AppendInt32(static_cast<int32_t>(Be32(v.data())));
      break;
    case PgWire::kInt8:
      if (!need(8)) return corrupt("a bigint of " + std::to_string(v.size()) + " bytes");
      col->AppendInt64(static_cast<int64_t>(Be64(v.data())));
      break;
    case PgWire::kOid:
      if (!need(4)) return corrupt("an oid of " + std::to_string(v.size()) + " bytes");
      col->AppendInt64(static_cast<int64_t>(Be32(v.data())));
      break;
    case PgWire::kFloat4: {
      if (!need(4)) return corrupt("a real of " + std::to_string(v.size()) + " bytes");
      uint32_t bits = Be32(v.data());
      float x;
      std::memcpy(&x, &bits, 4);
      col->AppendFloat(x);
      break;
    }
    case PgWire::kFloat8: {
      if (!need(8)) return corrupt("a double of " + std::to_string(v.size()) + " bytes");
      uint64_t bits = Be64(v.data());
      double x;
      std::memcpy(&x, &bits, 8);
      col->AppendDouble(x);
      break;
    }
    case PgWire::kNumericDecimal: {
      auto d = NumericToDecimal(v, col->type().precision(), col->type().scale());
      if (!d.ok()) {
        return d.status().code() == StatusCode::kCorruption ? corrupt(d.status().message())
                                                            : refuse(d.status().message());
      }
      col->AppendDecimal(*d);
      break;
    }
    case PgWire::kNumericText: {
      auto t = NumericToText(v);
      if (!t.ok()) return corrupt(t.status().message());
      col->AppendBytes(*t);
      break;
    }
    case PgWire::kText:
      if (!ValidUtf8(v)) {
        return refuse(
            "text that is not valid UTF-8 (is the database's encoding SQL_ASCII?); "
            "convert it in a view, or map the column to bytea");
      }
      col->AppendBytes(v);
      break;
    case PgWire::kBytea:
      col->AppendBytes(v);
      break;
    case PgWire::kJsonb:
      if (v.empty() || v[0] != 1) return corrupt("a jsonb value without version byte 1");
      v.remove_prefix(1);
      if (!ValidUtf8(v)) return refuse("jsonb text that is not valid UTF-8");
      col->AppendBytes(v);
      break;
    case PgWire::kDate: {
      if (!need(4)) return corrupt("a date of " + std::to_string(v.size()) + " bytes");
      int32_t d = static_cast<int32_t>(Be32(v.data()));
      if (d == std::numeric_limits<int32_t>::max() || d == std::numeric_limits<int32_t>::min()) {
        return refuse(std::string(d > 0 ? "infinity" : "-infinity") +
                      " has no Iceberg date; replace it in a view (e.g. CASE WHEN isfinite(col) "
                      "THEN col END) or exclude the table");
      }
      int64_t days = static_cast<int64_t>(d) + kDaysFrom1970To2000;
      if (days > std::numeric_limits<int32_t>::max()) return refuse("date beyond Iceberg's range");
      col->AppendInt32(static_cast<int32_t>(days));
      break;
    }
    case PgWire::kTime: {
      if (!need(8)) return corrupt("a time of " + std::to_string(v.size()) + " bytes");
      int64_t t = static_cast<int64_t>(Be64(v.data()));
      if (t == kMicrosPerDay) {
        return refuse(
            "24:00:00 has no Iceberg time (it ends at 23:59:59.999999); replace it "
            "in a view or cast the column to text");
      }
      if (t < 0 || t > kMicrosPerDay) return corrupt("time of day " + std::to_string(t) + " µs");
      col->AppendInt64(t);
      break;
    }
    case PgWire::kTimeTz: {
      if (!need(12)) return corrupt("a timetz of " + std::to_string(v.size()) + " bytes");
      int64_t t = static_cast<int64_t>(Be64(v.data()));
      int32_t zone = static_cast<int32_t>(Be32(v.data() + 8));
      if (t < 0 || t > kMicrosPerDay) return corrupt("time of day " + std::to_string(t) + " µs");
      if (zone < -86400 || zone > 86400) return corrupt("time zone offset " + std::to_string(zone));
      col->AppendBytes(TimeTzToText(t, zone));
      break;
    }
    case PgWire::kTimestamp:
    case PgWire::kTimestampTz: {
      if (!need(8)) return corrupt("a timestamp of " + std::to_string(v.size()) + " bytes");
      int64_t t = static_cast<int64_t>(Be64(v.data()));
      if (t == std::numeric_limits<int64_t>::max() || t == std::numeric_limits<int64_t>::min()) {
        return refuse(std::string(t > 0 ? "infinity" : "-infinity") +
                      " has no Iceberg timestamp; replace it in a view (e.g. CASE WHEN "
                      "isfinite(col) THEN col END) or exclude the table");
      }
      int64_t out;
      if (__builtin_add_overflow(t, kMicrosFrom1970To2000, &out)) {
        return refuse(
            "timestamp beyond Iceberg's range (microseconds since 1970 in 64 bits, "
            "about year 294247)");
      }
      col->AppendInt64(out);
      break;
    }
    case PgWire::kInterval: {
      if (!need(16)) return corrupt("an interval of " + std::to_string(v.size()) + " bytes");
      col->AppendBytes(IntervalToText(static_cast<int64_t>(Be64(v.data())),
                                      static_cast<int32_t>(Be32(v.data() + 8)),
                                      static_cast<int32_t>(Be32(v.data() + 12))));
      break;
    }
    case PgWire::kUuid:
      if (!need(16)) return corrupt("a uuid of " + std::to_string(v.size()) + " bytes");
      col->AppendUuid(reinterpret_cast<const uint8_t*>(v.data()));
      break;
    case PgWire::kTid:
      break;  // a row locator, not a value
  }
  return Status::OK();
}

Status CopyBinaryDecoder::Feed(std::string_view data, Batch* batch) {
  buffer_.append(data.data(), data.size());
  auto avail = [&]() { return buffer_.size() - pos_; };
  if (!header_done_) {
    if (avail() < kSignatureBytes + 8) return Status::OK();
    if (std::memcmp(buffer_.data() + pos_, kSignature, kSignatureBytes) != 0) {
      return Status::Corruption("the COPY stream does not start with the binary signature");
    }
    uint32_t flags = Be32(buffer_.data() + pos_ + kSignatureBytes);
    if (flags != 0) {
      return Status::Corruption("the COPY stream has header flags " + std::to_string(flags) +
                                " (OIDs or unknown options)");
    }
    uint32_t ext = Be32(buffer_.data() + pos_ + kSignatureBytes + 4);
    if (ext > (1u << 20)) {
      return Status::Corruption("the COPY stream has a header extension of " + std::to_string(ext) +
                                " bytes");
    }
    if (avail() < kSignatureBytes + 8 + ext) return Status::OK();
    pos_ += kSignatureBytes + 8 + ext;
    header_done_ = true;
  }
  for (;;) {
    if (avail() == 0) break;
    if (trailer_seen_) return Status::Corruption("the COPY stream has bytes after its trailer");
    if (avail() < 2) break;
    int16_t count = static_cast<int16_t>(Be16(buffer_.data() + pos_));
    if (count == -1) {
      trailer_seen_ = true;
      pos_ += 2;
      continue;
    }
    if (count != static_cast<int16_t>(fields_.size()) || count < 0) {
      return Status::Corruption("a COPY tuple has " + std::to_string(count) + " fields, expected " +
                                std::to_string(fields_.size()));
    }
    // Find the whole tuple before decoding any of it.
    size_t p = pos_ + 2;
    bool complete = true;
    for (size_t f = 0; f < fields_.size(); ++f) {
      if (buffer_.size() - p < 4) {
        complete = false;
        break;
      }
      int32_t len = static_cast<int32_t>(Be32(buffer_.data() + p));
      p += 4;
      if (len == -1) continue;
      if (len < 0) return Status::Corruption("a COPY field has length " + std::to_string(len));
      if (buffer_.size() - p < static_cast<size_t>(len)) {
        complete = false;
        break;
      }
      p += static_cast<size_t>(len);
    }
    if (!complete) break;
    FERRY_RETURN_IF_ERROR(
        DecodeTuple(std::string_view(buffer_.data() + pos_ + 2, p - pos_ - 2), batch));
    pos_ = p;
  }
  // Keep the buffer small: drop what was consumed once it is most of it.
  if (pos_ > 0 && (pos_ == buffer_.size() || pos_ > (64u << 10))) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  return Status::OK();
}

Status CopyBinaryDecoder::Finish() const {
  if (!header_done_) return Status::Corruption("the COPY stream ended inside its header");
  if (!trailer_seen_) return Status::Corruption("the COPY stream ended without its trailer");
  if (pos_ != buffer_.size())
    return Status::Corruption("the COPY stream has bytes after its trailer");
  return Status::OK();
}

Status CopyBinaryDecoder::DecodeTuple(std::string_view tuple, Batch* batch) {
  ++rows_;
  have_tid_ = false;
  size_t p = 0;
  for (const CopyField& f : fields_) {
    // Lengths were checked by the caller; re-check cheaply so that this stays safe on its own.
    if (tuple.size() - p < 4) return Status::Corruption("truncated COPY tuple");
    int32_t len = static_cast<int32_t>(Be32(tuple.data() + p));
    p += 4;
    Column* col = f.column >= 0 ? &batch->column(static_cast<size_t>(f.column)) : nullptr;
    if (len == -1) {
      if (col) col->AppendNull();
      continue;
    }
    if (len < 0 || tuple.size() - p < static_cast<size_t>(len)) {
      return Status::Corruption("truncated COPY tuple");
    }
    std::string_view v(tuple.data() + p, static_cast<size_t>(len));
    p += static_cast<size_t>(len);
    if (f.wire == PgWire::kTid) {
      if (v.size() != 6) {
        return Status::Corruption("column " + f.name + ", " + RowLocation() + ": a ctid of " +
                                  std::to_string(v.size()) + " bytes");
      }
      have_tid_ = true;
      tid_block_ = Be32(v.data());
      tid_offset_ = Be16(v.data() + 4);
      continue;
    }
    if (!col) continue;
    Status s = DecodePgValue(f.wire, v, col);
    if (!s.ok()) {
      return Status(s.code(), "column " + f.name + ", " + RowLocation() + ": " + s.message());
    }
  }
  if (p != tuple.size()) return Status::Corruption("a COPY tuple has bytes after its last field");
  return Status::OK();
}

}  // namespace ferry::pg
