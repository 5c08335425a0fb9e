#include "ferry/sink/postgres/copy_encoder.h"

#include <bit>
#include <cstring>
#include <limits>

#include "ferry/clients/postgres/pg_oids.h"
#include "ferry/types/value_parse.h"

namespace ferry::sink::pg {
namespace {

using u128 = unsigned __int128;

constexpr char kSignature[] = "PGCOPY\n\377\r\n";  // + the terminating NUL: 11 bytes
constexpr size_t kSignatureBytes = 11;

constexpr int64_t kDaysFrom1970To2000 = 10957;
constexpr int64_t kMicrosFrom1970To2000 = 946684800LL * 1000000;
constexpr int64_t kMicrosPerDay = 86400LL * 1000000;
// PostgreSQL's dates are Julian days [0, 2147483494): 4714-11-24 BC (proleptic Gregorian) up to,
// not including, 5874898-01-01 (datatype/timestamp.h: DATETIME_MIN_JULIAN, DATE_END_JULIAN).
// 1970-01-01 is Julian day 2440588.
constexpr int64_t kMinDate = 0 - 2440588;             // in ferry's days since 1970
constexpr int64_t kEndDate = 2147483494LL - 2440588;  // exclusive
// Timestamps start at the same day (MIN_TIMESTAMP) and end before 294277-01-01 (END_TIMESTAMP),
// which is past every value ferry holds: no upper check is needed, and no encoded value can be
// PostgreSQL's DT_NOEND (INT64_MAX, 'infinity').
constexpr int64_t kMinTimestamp = kMinDate * kMicrosPerDay;
constexpr int64_t kPgEndTimestamp = 9223371331200000000LL;  // in PostgreSQL's µs since 2000
static_assert(std::numeric_limits<int64_t>::max() - kMicrosFrom1970To2000 < kPgEndTimestamp);

// numeric: at most 38 digits in all, so ceil(integer digits / 4) + ceil(scale / 4) <= 11
// base-10000 digits once the precision is checked; 8 bytes of header.
constexpr int kMaxNumericDigits = 11;
constexpr size_t kMaxNumericBytes = 8 + 2 * kMaxNumericDigits;
// A one-dimensional array's header: ndim, has-NULL flag, element OID, size, lower bound.
constexpr size_t kArrayHeaderBytes = 20;
// A text or bytea value is at most 1 GB (MaxAllocSize); a longer length would also not fit the
// field's Int32 length word.
constexpr size_t kMaxFieldBytes = (size_t{1} << 30) - 1;

// ---- big-endian stores into a buffer sized beforehand ----
template <typename T>
char* PutBe(char* p, T v) {
  static_assert(std::endian::native == std::endian::little ||
                std::endian::native == std::endian::big);
  if constexpr (std::endian::native == std::endian::little) {
    if constexpr (sizeof(T) == 2) v = __builtin_bswap16(v);
    if constexpr (sizeof(T) == 4) v = __builtin_bswap32(v);
    if constexpr (sizeof(T) == 8) v = __builtin_bswap64(v);
  }
  std::memcpy(p, &v, sizeof(T));
  return p + sizeof(T);
}
char* Put16(char* p, uint16_t v) { return PutBe(p, v); }
char* Put32(char* p, uint32_t v) { return PutBe(p, v); }
char* Put64(char* p, uint64_t v) { return PutBe(p, v); }

template <typename T>
T Load(const Column& col, size_t row) {
  T v;
  std::memcpy(&v, col.fixed_data() + row * sizeof(T), sizeof(T));
  return v;
}

// ---- per-column plans ----

// How one column's values are written. Built once per call; the row loop calls `fn` per value.
struct Enc;
// Writes row `row`'s value (not NULL) at `p` without a length word; returns the end, or nullptr if
// PostgreSQL cannot take the value (Problem() then says why).
using EncodeFn = char* (*)(const Enc& e, size_t row, char* p);

struct Enc {
  const Column* col = nullptr;
  const uint8_t* valid = nullptr;
  EncodeFn fn = nullptr;
  size_t value_bytes = 0;  // fixed-size kinds: the most bytes a value takes
  bool variable = false;   // text/bytea: the value's bytes
  u128 limit = 0;          // decimals: 10^precision
  int scale = 0;           // decimals
  uint32_t elem_oid = 0;   // lists
  const Enc* elem = nullptr;
};

char* EncBool(const Enc& e, size_t row, char* p) {
  *p = e.col->fixed_data()[row] != 0 ? 1 : 0;
  return p + 1;
}
// int4 and float4 (the IEEE bits as they are: NaN payloads, ±Infinity and -0 survive).
char* Enc32(const Enc& e, size_t row, char* p) { return Put32(p, Load<uint32_t>(*e.col, row)); }
// int8 and float8.
char* Enc64(const Enc& e, size_t row, char* p) { return Put64(p, Load<uint64_t>(*e.col, row)); }

bool DateOk(int32_t d) { return d >= kMinDate && d < kEndDate; }
char* EncDate(const Enc& e, size_t row, char* p) {
  const auto d = Load<int32_t>(*e.col, row);
  if (!DateOk(d)) return nullptr;
  return Put32(p, static_cast<uint32_t>(static_cast<int32_t>(d - kDaysFrom1970To2000)));
}

// time_recv accepts 00:00:00 .. 24:00:00 inclusive.
bool TimeOk(int64_t t) { return t >= 0 && t <= kMicrosPerDay; }
char* EncTime(const Enc& e, size_t row, char* p) {
  const auto t = Load<int64_t>(*e.col, row);
  if (!TimeOk(t)) return nullptr;
  return Put64(p, static_cast<uint64_t>(t));
}

char* EncTimestamp(const Enc& e, size_t row, char* p) {
  const auto t = Load<int64_t>(*e.col, row);
  if (t < kMinTimestamp) return nullptr;  // also keeps the subtraction from overflowing
  return Put64(p, static_cast<uint64_t>(t - kMicrosFrom1970To2000));
}

char* EncUuid(const Enc& e, size_t row, char* p) {
  std::memcpy(p, e.col->fixed_data() + row * 16, 16);
  return p + 16;
}

// text: the UTF-8 bytes; text_recv refuses a NUL byte (and it would end the string server-side).
char* EncText(const Enc& e, size_t row, char* p) {
  std::string_view v = e.col->GetBytes(row);
  if (v.size() > kMaxFieldBytes || std::memchr(v.data(), 0, v.size()) != nullptr) return nullptr;
  std::memcpy(p, v.data(), v.size());
  return p + v.size();
}

char* EncBytea(const Enc& e, size_t row, char* p) {
  std::string_view v = e.col->GetBytes(row);
  if (v.size() > kMaxFieldBytes) return nullptr;
  std::memcpy(p, v.data(), v.size());
  return p + v.size();
}

constexpr uint32_t kPow10Small[5] = {1, 10, 100, 1000, 10000};

template <typename T>
constexpr T Pow10T(int n) {
  T v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}
template <typename T, int N>
struct Pow10Table {
  T v[N];
  constexpr Pow10Table() : v() {
    for (int i = 0; i < N; ++i) v[i] = Pow10T<T>(i);
  }
};
constexpr Pow10Table<uint64_t, 20> kPow10U64;
constexpr Pow10Table<u128, 39> kPow10U128;

template <typename T>
T Pow10Of(int n) {
  if constexpr (sizeof(T) == 8) {
    return kPow10U64.v[n];
  } else {
    return kPow10U128.v[n];
  }
}

// |unscaled| * 10^-scale (mag != 0) as PostgreSQL's base-10000 digits, most significant first,
// leading and trailing zero digits stripped as make_result() does. Returns the digit count;
// `*weight` is the power of 10000 of the first digit. T is uint64_t when the value and 10^scale fit
// it (the common case: division by the constant 10000 is then a multiplication), else u128.
template <typename T>
int NumericDigits(T mag, int scale, uint16_t* digits, int* weight) {
  constexpr int kSlots = 24;  // >= 10 integer + 10 fraction digits of any 128-bit value
  uint16_t buf[kSlots];
  int pos = kSlots;  // filled from the least significant digit backwards
  const T unit = Pow10Of<T>(scale);
  T int_part = mag / unit;
  T frac = mag % unit;
  // The fraction in groups of 4 decimal digits from the point; a partial last group is padded
  // with zeros on the right (0.5 at scale 1 is the digit 5000).
  const int partial = scale % 4;
  if (partial != 0) {
    const T m = Pow10Of<T>(partial);
    buf[--pos] = static_cast<uint16_t>(static_cast<uint32_t>(frac % m) * kPow10Small[4 - partial]);
    frac /= m;
  }
  for (int g = scale / 4; g > 0; --g) {
    buf[--pos] = static_cast<uint16_t>(frac % 10000);
    frac /= 10000;
  }
  int w = -1;
  while (int_part != 0) {
    buf[--pos] = static_cast<uint16_t>(int_part % 10000);
    int_part /= 10000;
    ++w;
  }
  int first = pos, end = kSlots;
  while (buf[first] == 0) {  // only fraction digits can be leading zeros; mag != 0 ends the loop
    ++first;
    --w;
  }
  while (buf[end - 1] == 0) --end;
  *weight = w;
  std::memcpy(digits, buf + first, static_cast<size_t>(end - first) * sizeof(uint16_t));
  return end - first;
}

// numeric_send: Int16 ndigits, Int16 weight, UInt16 sign, Int16 dscale, the digits.
char* EncDecimal(const Enc& e, size_t row, char* p) {
  const auto v = Load<int128_t>(*e.col, row);
  const bool neg = v < 0;
  const u128 mag = neg ? u128{0} - static_cast<u128>(v) : static_cast<u128>(v);
  if (mag >= e.limit) return nullptr;
  uint16_t digits[kMaxNumericDigits];
  int ndigits = 0, weight = 0;
  if (mag != 0) {
    if (mag <= std::numeric_limits<uint64_t>::max() && e.scale <= 19) {
      ndigits = NumericDigits<uint64_t>(static_cast<uint64_t>(mag), e.scale, digits, &weight);
    } else {
      ndigits = NumericDigits<u128>(mag, e.scale, digits, &weight);
    }
  }
  p = Put16(p, static_cast<uint16_t>(ndigits));
  p = Put16(p, static_cast<uint16_t>(static_cast<int16_t>(weight)));
  p = Put16(p, neg ? 0x4000 : 0x0000);  // zero is never negative: mag != 0 when neg
  p = Put16(p, static_cast<uint16_t>(e.scale));
  for (int i = 0; i < ndigits; ++i) p = Put16(p, digits[i]);
  return p;
}

// array_send of a list row: one dimension with lower bound 1, or none for an empty list.
char* EncList(const Enc& e, size_t row, char* p) {
  const auto [first, end] = e.col->ListRange(row);
  const Enc& el = *e.elem;
  if (first == end) {
    p = Put32(p, 0);
    p = Put32(p, 0);
    return Put32(p, e.elem_oid);
  }
  const bool has_null = std::memchr(el.valid + first, 0, end - first) != nullptr;
  p = Put32(p, 1);
  p = Put32(p, has_null ? 1 : 0);
  p = Put32(p, e.elem_oid);
  p = Put32(p, static_cast<uint32_t>(end - first));
  p = Put32(p, 1);
  for (size_t i = first; i < end; ++i) {
    if (el.valid[i] == 0) {
      p = Put32(p, 0xFFFFFFFFu);
      continue;
    }
    char* value = p + 4;
    char* value_end = el.fn(el, i, value);
    if (value_end == nullptr) return nullptr;
    Put32(p, static_cast<uint32_t>(value_end - value));
    p = value_end;
  }
  return p;
}

// Fills `e` (and `elem` for a list) for column `col`.
Status Plan(const Column& col, Enc* e, Enc* elem) {
  e->col = &col;
  e->valid = col.validity();
  const DataType& t = col.type();
  switch (t.kind()) {
    case TypeKind::kBoolean:
      e->fn = EncBool;
      e->value_bytes = 1;
      break;
    case TypeKind::kInt32:
    case TypeKind::kFloat32:
      e->fn = Enc32;
      e->value_bytes = 4;
      break;
    case TypeKind::kInt64:
    case TypeKind::kFloat64:
      e->fn = Enc64;
      e->value_bytes = 8;
      break;
    case TypeKind::kDecimal:
      if (t.precision() < 1 || t.precision() > 38 || t.scale() < 0 || t.scale() > t.precision()) {
        return Status::Internal("a column of type " + t.ToIceberg() +
                                ", which has no PostgreSQL numeric form");
      }
      e->fn = EncDecimal;
      e->value_bytes = kMaxNumericBytes;
      e->limit = kPow10U128.v[t.precision()];
      e->scale = t.scale();
      break;
    case TypeKind::kDate:
      e->fn = EncDate;
      e->value_bytes = 4;
      break;
    case TypeKind::kTime:
      e->fn = EncTime;
      e->value_bytes = 8;
      break;
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      e->fn = EncTimestamp;
      e->value_bytes = 8;
      break;
    case TypeKind::kString:
      e->fn = EncText;
      e->variable = true;
      break;
    case TypeKind::kBinary:
      e->fn = EncBytea;
      e->variable = true;
      break;
    case TypeKind::kUuid:
      e->fn = EncUuid;
      e->value_bytes = 16;
      break;
    case TypeKind::kList:
      if (elem == nullptr || t.list().type.is_list()) {
        return Status::Internal("a list of lists has no PostgreSQL array form in ferry");
      }
      FERRY_RETURN_IF_ERROR(Plan(col.list_child(), elem, nullptr));
      e->fn = EncList;
      e->elem = elem;
      e->elem_oid = PgTypeOid(t.list().type);
      break;
  }
  return Status::OK();
}

// The most bytes rows [first, end) of a plan's column take, with their 4-byte length words.
size_t Bound(const Enc& e, size_t first, size_t end) {
  const size_t n = end - first;
  if (n == 0) return 0;
  if (e.elem != nullptr) {
    const uint32_t* o = e.col->offsets();
    return n * (4 + kArrayHeaderBytes) + Bound(*e.elem, o[first], o[end]);
  }
  if (e.variable) {
    const uint32_t* o = e.col->offsets();
    return n * 4 + (o[end] - o[first]);
  }
  return n * (4 + e.value_bytes);
}

// ---- errors (the slow path: re-examines the value that an encoder refused) ----

constexpr char kReplaceAtSource[] =
    "replace such values at the source (e.g. in a view) or exclude the table";

// Why PostgreSQL cannot take row `row` of the plan's column, or "" if it can.
std::string Problem(const Enc& e, size_t row) {
  const Column& col = *e.col;
  switch (col.type().kind()) {
    case TypeKind::kString: {
      std::string_view v = col.GetBytes(row);
      const void* nul = std::memchr(v.data(), 0, v.size());
      if (nul != nullptr) {
        return "a string with a NUL byte (at byte " +
               std::to_string(static_cast<const char*>(nul) - v.data()) +
               "), which PostgreSQL text cannot hold; map the column to bytea, or strip the byte "
               "at the source (e.g. replace(col, chr(0), '') in a view)";
      }
      [[fallthrough]];
    }
    case TypeKind::kBinary: {
      const size_t n = col.GetBytes(row).size();
      if (n > kMaxFieldBytes) {
        return "a value of " + std::to_string(n) +
               " bytes; PostgreSQL holds at most 1 GB in a field: " + kReplaceAtSource;
      }
      return "";
    }
    case TypeKind::kDate: {
      const auto d = Load<int32_t>(col, row);
      if (DateOk(d)) return "";
      return "date " + FormatDate(d) +
             " is outside PostgreSQL's range (-4713-11-24, i.e. 4714-11-24 BC, to "
             "5874897-12-31); " +
             kReplaceAtSource;
    }
    case TypeKind::kTime: {
      const auto t = Load<int64_t>(col, row);
      if (TimeOk(t)) return "";
      return "time of day " + std::to_string(t) +
             " µs is outside 00:00:00 .. 24:00:00 (a corrupt batch; please report it as a bug)";
    }
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz: {
      const auto t = Load<int64_t>(col, row);
      if (t >= kMinTimestamp) return "";
      return "timestamp " + FormatTimestamp(t) +
             " is before PostgreSQL's earliest (-4713-11-24 00:00:00, i.e. 4714-11-24 BC); " +
             kReplaceAtSource;
    }
    case TypeKind::kDecimal: {
      const auto v = Load<int128_t>(col, row);
      const u128 mag = v < 0 ? u128{0} - static_cast<u128>(v) : static_cast<u128>(v);
      if (mag < e.limit) return "";
      return "decimal " + FormatDecimal(v, e.scale) + " has more than " +
             std::to_string(col.type().precision()) + " digits, which " + PgTypeName(col.type()) +
             " cannot hold (a corrupt batch: ferry checks decimals when it reads them; please "
             "report it as a bug)";
    }
    case TypeKind::kList: {
      const auto [first, end] = col.ListRange(row);
      for (size_t i = first; i < end; ++i) {
        if (e.elem->valid[i] == 0) continue;
        std::string p = Problem(*e.elem, i);
        if (!p.empty()) return "array element " + std::to_string(i - first + 1) + ": " + p;
      }
      return "";
    }
    default:
      return "";
  }
}

// Problem(), never empty: an encoder refused the value, so there is one.
std::string Why(const Enc& e, size_t row) {
  std::string p = Problem(e, row);
  return p.empty() ? "a value PostgreSQL cannot take" : p;
}

}  // namespace

std::string PgTypeName(const DataType& type) {
  switch (type.kind()) {
    case TypeKind::kBoolean:
      return "boolean";
    case TypeKind::kInt32:
      return "integer";
    case TypeKind::kInt64:
      return "bigint";
    case TypeKind::kFloat32:
      return "real";
    case TypeKind::kFloat64:
      return "double precision";
    case TypeKind::kDecimal:
      return "numeric(" + std::to_string(type.precision()) + "," + std::to_string(type.scale()) +
             ")";
    case TypeKind::kDate:
      return "date";
    // As format_type() prints them, so a table's columns compare by name with what ferry wants.
    case TypeKind::kTime:
      return "time without time zone";
    case TypeKind::kTimestamp:
      return "timestamp without time zone";
    case TypeKind::kTimestampTz:
      return "timestamp with time zone";
    case TypeKind::kString:
      return "text";
    case TypeKind::kBinary:
      return "bytea";
    case TypeKind::kUuid:
      return "uuid";
    case TypeKind::kList:
      return PgTypeName(type.list().type) + "[]";
  }
  return "text";
}

uint32_t PgTypeOid(const DataType& type) {
  const bool array = type.is_list();
  const DataType& t = array ? type.list().type : type;
  switch (t.kind()) {
    case TypeKind::kBoolean:
      return array ? kBoolArrayOid : kBoolOid;
    case TypeKind::kInt32:
      return array ? kInt4ArrayOid : kInt4Oid;
    case TypeKind::kInt64:
      return array ? kInt8ArrayOid : kInt8Oid;
    case TypeKind::kFloat32:
      return array ? kFloat4ArrayOid : kFloat4Oid;
    case TypeKind::kFloat64:
      return array ? kFloat8ArrayOid : kFloat8Oid;
    case TypeKind::kDecimal:
      return array ? kNumericArrayOid : kNumericOid;
    case TypeKind::kDate:
      return array ? kDateArrayOid : kDateOid;
    case TypeKind::kTime:
      return array ? kTimeArrayOid : kTimeOid;
    case TypeKind::kTimestamp:
      return array ? kTimestampArrayOid : kTimestampOid;
    case TypeKind::kTimestampTz:
      return array ? kTimestampTzArrayOid : kTimestampTzOid;
    case TypeKind::kString:
      return array ? kTextArrayOid : kTextOid;
    case TypeKind::kBinary:
      return array ? kByteaArrayOid : kByteaOid;
    case TypeKind::kUuid:
      return array ? kUuidArrayOid : kUuidOid;
    case TypeKind::kList:
      return 0;  // a list of lists
  }
  return 0;
}

void AppendCopyHeader(std::string* out) {
  out->append(kSignature, kSignatureBytes);
  out->append(8, '\0');  // flags 0 (no OIDs), header extension length 0
}

void AppendCopyTrailer(std::string* out) { out->append(2, '\xFF'); }

Status AppendCopyRows(const Batch& batch, const std::vector<size_t>& columns, std::string* out) {
  const size_t rows = batch.num_rows();
  if (columns.size() > static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
    return Status::Internal("a COPY tuple of " + std::to_string(columns.size()) + " fields");
  }
  // Element plans live beside the column plans; neither vector grows after this, so the
  // pointers between them stay valid.
  std::vector<Enc> encs(columns.size());
  std::vector<Enc> elems(columns.size());
  size_t bound = rows * 2;
  for (size_t k = 0; k < columns.size(); ++k) {
    if (columns[k] >= batch.num_columns()) {
      return Status::Internal("column index " + std::to_string(columns[k]) + " of a batch of " +
                              std::to_string(batch.num_columns()) + " columns");
    }
    const Column& col = batch.column(columns[k]);
    if (col.size() < rows) {
      return Status::Internal("column " + batch.schema()->fields[columns[k]].name + " has " +
                              std::to_string(col.size()) + " rows in a batch of " +
                              std::to_string(rows));
    }
    FERRY_RETURN_IF_ERROR(Plan(col, &encs[k], &elems[k]));
    bound += Bound(encs[k], 0, rows);
  }

  // Size the output once (an upper bound), write through a pointer, then cut to what was written.
  const size_t start = out->size();
  out->resize(start + bound);
  char* const base = out->data();
  char* p = base + start;
  const auto nfields = static_cast<uint16_t>(columns.size());
  const Enc* const encs_begin = encs.data();
  const Enc* const encs_end = encs_begin + encs.size();
  for (size_t r = 0; r < rows; ++r) {
    p = Put16(p, nfields);
    for (const Enc* e = encs_begin; e != encs_end; ++e) {
      if (e->valid[r] == 0) {
        p = Put32(p, 0xFFFFFFFFu);
        continue;
      }
      char* value = p + 4;
      char* end = e->fn(*e, r, value);
      if (end == nullptr) {
        out->resize(start);
        const size_t k = static_cast<size_t>(e - encs_begin);
        return Status::InvalidArgument("column " + batch.schema()->fields[columns[k]].name +
                                       ", row " + std::to_string(r + 1) +
                                       " of the batch: " + Why(*e, r));
      }
      Put32(p, static_cast<uint32_t>(end - value));
      p = end;
    }
  }
  out->resize(static_cast<size_t>(p - base));
  return Status::OK();
}

Status AppendPgValue(const Column& col, size_t row, std::string* out) {
  if (row >= col.size()) {
    return Status::Internal("row " + std::to_string(row) + " of a column of " +
                            std::to_string(col.size()) + " rows");
  }
  if (!col.IsValid(row)) return Status::Internal("a NULL has no binary value");
  Enc e, elem;
  FERRY_RETURN_IF_ERROR(Plan(col, &e, &elem));
  const size_t start = out->size();
  out->resize(start + Bound(e, row, row + 1) - 4);  // no length word
  char* end = e.fn(e, row, out->data() + start);
  if (end == nullptr) {
    out->resize(start);
    return Status::InvalidArgument(Why(e, row));
  }
  out->resize(static_cast<size_t>(end - out->data()));
  return Status::OK();
}

}  // namespace ferry::sink::pg
