#include "ferry/source/mysql/binlog_events.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <tuple>

namespace ferry::source::binlog {
namespace {

// ---- building events by hand ----
std::string Le(uint64_t v, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}
std::string Be(uint64_t v, size_t n) {
  std::string s;
  for (size_t i = n; i-- > 0;) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}
std::string Crc(const std::string& bytes) {
  return Le(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), uInt(bytes.size())), 4);
}
// A whole event of `type` around `body` (with a CRC32 when `checksum`).
std::string Event(uint8_t type, const std::string& body, bool checksum = true, uint16_t flags = 0) {
  const size_t size = kEventHeaderSize + body.size() + (checksum ? 4 : 0);
  std::string e = Le(1700000000, 4) + std::string(1, char(type)) + Le(7, 4) + Le(size, 4) +
                  Le(1234, 4) + Le(flags, 2) + body;
  if (checksum) e += Crc(e);
  return e;
}
std::string FdeBody(const std::string& version, uint8_t alg) {
  std::string b = Le(4, 2) + version + std::string(50 - version.size(), '\0') + Le(0, 4) + "\x13";
  std::string lens(170, '\0');
  lens[kQueryEvent - 1] = 13;
  lens[kRotateEvent - 1] = 8;
  lens[kTableMapEvent - 1] = 8;
  lens[kWriteRowsV1 - 1] = lens[kUpdateRowsV1 - 1] = lens[kDeleteRowsV1 - 1] = 8;
  lens[kWriteRowsV2 - 1] = lens[kUpdateRowsV2 - 1] = lens[kDeleteRowsV2 - 1] = 10;
  lens[kMariaGtidEvent - 1] = 19;
  return b + lens + std::string(1, char(alg));
}
// A FORMAT_DESCRIPTION event as a checksum-aware server writes it: the algorithm byte, then the
// checksum (4 zero bytes when checksums are off).
std::string Fde(bool checksum, uint16_t flags = 0) {
  std::string e = Event(kFormatDescriptionEvent, FdeBody("10.11.6-MariaDB-log", checksum ? 1 : 0),
                        /*checksum=*/checksum, flags);
  if (!checksum)
    e = Event(kFormatDescriptionEvent, FdeBody("10.11.6-MariaDB-log", 0) + Le(0, 4), false, flags);
  return e;
}

FormatDescription Fd() {
  auto fd = ParseFormatDescription(Fde(true));
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  return *fd;
}

struct Col {
  uint8_t type;
  std::string meta;  // the table map's metadata bytes of the column
};
std::string TableMapBody(uint64_t id, const std::vector<Col>& cols,
                         const std::string& optional = "") {
  std::string b = Le(id, 6) + Le(1, 2) +
                  "\x02"
                  "db" +
                  std::string(1, '\0') + "\x01t" + std::string(1, '\0') +
                  std::string(1, char(cols.size()));
  std::string meta;
  for (const auto& c : cols) {
    b.push_back(char(c.type));
    meta += c.meta;
  }
  b += std::string(1, char(meta.size())) + meta;
  b += std::string((cols.size() + 7) / 8, '\xff');
  return b + optional;
}
std::string Bits(const std::vector<bool>& bits) {
  std::string s((bits.size() + 7) / 8, '\0');
  for (size_t i = 0; i < bits.size(); ++i) {
    if (bits[i]) s[i / 8] = char(s[i / 8] | (1 << (i % 8)));
  }
  return s;
}
std::string RowsBody(uint64_t id, size_t ncols, const std::string& rows, bool update = false) {
  std::string all = Bits(std::vector<bool>(ncols, true));
  return Le(id, 6) + Le(1, 2) + std::string(1, char(ncols)) + all + (update ? all : "") + rows;
}

ColumnForm Form(const std::string& name, const std::string& data_type,
                const std::string& column_type, const std::string& charset = "",
                int64_t precision = 0, int64_t scale = 0) {
  ColumnForm f;
  f.column.name = name;
  f.column.data_type = data_type;
  f.column.column_type = column_type;
  f.column.charset = charset;
  f.column.precision = precision;
  f.column.scale = scale;
  f.wire = MapMysqlColumn(f.column).wire;
  return f;
}

// Decodes one single-column WRITE_ROWS image `value` (its null bitmap added here) of column
// `col` read as `form`: the value's text, or the error.
Result<std::optional<std::string>> DecodeOne(const Col& col, const ColumnForm& form,
                                             const std::string& value, bool null = false) {
  const FormatDescription fd = Fd();
  FERRY_ASSIGN_OR_RETURN(TableMap map, ParseTableMap(TableMapBody(9, {col}), fd));
  EventHeader h;
  h.type = kWriteRowsV1;
  const std::string body = RowsBody(9, 1, std::string(1, null ? '\x01' : '\0') + value);
  FERRY_ASSIGN_OR_RETURN(RowsEvent rows, ParseRowsEvent(h, body, fd));
  std::optional<std::string> out;
  int images = 0;
  FERRY_RETURN_IF_ERROR(
      DecodeRows(rows, map, {form}, [&](const RowImage& before, const RowImage& after) {
        EXPECT_TRUE(before.empty());
        EXPECT_EQ(after.size(), 1u);
        if (after[0]) out = std::string(*after[0]);
        ++images;
        return Status::OK();
      }));
  EXPECT_EQ(images, 1);
  return out;
}
std::string Text(const Col& col, const ColumnForm& form, const std::string& value) {
  auto r = DecodeOne(col, form, value);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !*r) return "<error or null>";
  return **r;
}
StatusCode Code(const Col& col, const ColumnForm& form, const std::string& value) {
  auto r = DecodeOne(col, form, value);
  return r.ok() ? StatusCode::kOk : r.status().code();
}

// ---- events ----
TEST(BinlogEvents, FormatDescriptionWithChecksum) {
  const std::string e = Fde(true);
  auto fd = ParseFormatDescription(e);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(fd->checksum);
  EXPECT_EQ(fd->server_version, "10.11.6-MariaDB-log");
  ASSERT_EQ(fd->post_header_len.size(), 170u);
  EXPECT_EQ(fd->post_header_len[kQueryEvent - 1], 13);
  // The server sets the in-use flag of an open file's first event after the checksum was made.
  std::string in_use = e;
  in_use[17] = char(in_use[17] | 1);
  EXPECT_TRUE(ParseFormatDescription(in_use).ok());
  std::string bad = e;
  bad[30] ^= 1;
  EXPECT_EQ(ParseFormatDescription(bad).status().code(), StatusCode::kCorruption);
  EXPECT_NE(ParseFormatDescription(bad).status().message().find("checksum"), std::string::npos);
  for (size_t n = 0; n < e.size(); ++n) {
    EXPECT_EQ(ParseFormatDescription(e.substr(0, n)).status().code(), StatusCode::kCorruption) << n;
  }
}

TEST(BinlogEvents, FormatDescriptionWithoutChecksum) {
  auto fd = ParseFormatDescription(Fde(false));
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_FALSE(fd->checksum);
  EXPECT_EQ(fd->post_header_len.size(), 170u);
  EXPECT_EQ(ParseFormatDescription(Event(kXidEvent, Le(1, 8))).status().code(),
            StatusCode::kCorruption);
}

TEST(BinlogEvents, EventChecksumAndSize) {
  const FormatDescription fd = Fd();
  const std::string e = Event(kXidEvent, Le(77, 8));
  EventHeader h;
  std::string_view body;
  ASSERT_TRUE(ParseEvent(e, fd, &h, &body).ok());
  EXPECT_EQ(h.type, kXidEvent);
  EXPECT_EQ(h.server_id, 7u);
  EXPECT_EQ(h.event_size, e.size());
  EXPECT_EQ(h.log_pos, 1234u);
  EXPECT_EQ(body.size(), 8u);
  EXPECT_EQ(*ParseXid(body), 77u);
  std::string bad = e;
  bad[20] ^= 0x40;
  Status s = ParseEvent(bad, fd, &h, &body);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("XID"), std::string::npos) << s.message();
  EXPECT_EQ(ParseEvent(e.substr(0, 10), fd, &h, &body).code(), StatusCode::kCorruption);
  EXPECT_EQ(ParseEvent(e + "x", fd, &h, &body).code(), StatusCode::kCorruption);
  FormatDescription off = fd;
  off.checksum = false;
  ASSERT_TRUE(ParseEvent(Event(kXidEvent, Le(5, 8), false), off, &h, &body).ok());
  EXPECT_EQ(body.size(), 8u);
  EXPECT_EQ(ParseXid(body.substr(0, 7)).status().code(), StatusCode::kCorruption);
}

TEST(BinlogEvents, RotateQueryGtid) {
  const FormatDescription fd = Fd();
  auto rot = ParseRotate(Le(4, 8) + "binlog.000003");
  ASSERT_TRUE(rot.ok());
  EXPECT_EQ(rot->position, 4u);
  EXPECT_EQ(rot->file, "binlog.000003");
  EXPECT_EQ(ParseRotate(Le(4, 5)).status().code(), StatusCode::kCorruption);

  const std::string status_vars = "\x00\x01\x02\x03";
  const std::string q = Le(42, 4) + Le(0, 4) + "\x04" + Le(0, 2) + Le(status_vars.size(), 2) +
                        status_vars + "shop" + std::string(1, '\0') + "BEGIN";
  auto query = ParseQuery(q, fd);
  ASSERT_TRUE(query.ok()) << query.status().ToString();
  EXPECT_EQ(query->thread_id, 42u);
  EXPECT_EQ(query->database, "shop");
  EXPECT_EQ(query->sql, "BEGIN");
  for (size_t n = 0; n < q.size() - 5; ++n) {
    EXPECT_EQ(ParseQuery(q.substr(0, n), fd).status().code(), StatusCode::kCorruption) << n;
  }

  EventHeader h;
  h.server_id = 3;
  auto g = ParseMariaGtid(h, Le(1001, 8) + Le(2, 4) + "\x01" + std::string(6, '\0'));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->sequence, 1001u);
  EXPECT_EQ(g->domain, 2u);
  EXPECT_EQ(g->server_id, 3u);
  EXPECT_TRUE(g->standalone());
  EXPECT_EQ(ParseMariaGtid(h, Le(1, 8)).status().code(), StatusCode::kCorruption);

  const std::string sid = "\x3e\x11\xfa\x47\x71\xca\x11\xe1\x9e\x33\xc8\x0a\xa9\x42\x95\x62";
  auto mg = ParseMysqlGtid("\x01" + sid + Le(23, 8) + std::string(10, '\0'));
  ASSERT_TRUE(mg.ok());
  EXPECT_EQ(mg->uuid, "3e11fa47-71ca-11e1-9e33-c80aa9429562");
  EXPECT_EQ(mg->number, 23);
  EXPECT_EQ(ParseMysqlGtid("\x01" + sid).status().code(), StatusCode::kCorruption);
}

TEST(BinlogEvents, TableMap) {
  const FormatDescription fd = Fd();
  // CHAR(300) of utf8mb3 bytes: 900 bytes, bits 8 and 9 inverted in the type byte.
  const uint16_t char_len = 900;
  const uint8_t b0 = uint8_t(254 ^ ((char_len & 0x300) >> 4));
  const std::vector<Col> cols = {
      {3, ""},                                              // int
      {246, "\x0a\x02"},                                    // decimal(10,2)
      {254, std::string{char(b0), char(char_len & 0xFF)}},  // char(300)
      {254, "\xf7\x01"},                                    // enum
      {254, "\xf8\x02"},                                    // set
      {15, Le(80, 2)},                                      // varchar
      {16, std::string("\x05\x00", 2)},                     // bit(5)
      {252, "\x02"},                                        // blob
      {19, "\x06"},                                         // time(6)
  };
  std::string optional;
  // SIGNEDNESS: the int unsigned, the decimal not.
  optional += std::string("\x01\x01") + "\x80";
  std::string names;
  for (const char* n : {"a", "b", "c", "d", "e", "f", "g", "h", "i"})
    names += "\x01" + std::string(n);
  optional += "\x04" + std::string(1, char(names.size())) + names;
  std::string enums = "\x02\x01x\x02y'";
  optional += "\x06" + std::string(1, char(enums.size())) + enums;
  const std::string body = TableMapBody(0x0000AABBCCDD, cols, optional);
  auto map = ParseTableMap(body, fd);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->table_id, 0xAABBCCDDu);
  EXPECT_EQ(map->database, "db");
  EXPECT_EQ(map->table, "t");
  ASSERT_EQ(map->columns.size(), 9u);
  EXPECT_EQ(map->columns[1].meta, (10 << 8) | 2);
  EXPECT_EQ(map->columns[2].type, 254);
  EXPECT_EQ(map->columns[2].meta, 900);
  EXPECT_EQ(map->columns[3].type, 247);
  EXPECT_EQ(map->columns[3].meta, 1);
  EXPECT_EQ(map->columns[4].type, 248);
  EXPECT_EQ(map->columns[4].meta, 2);
  EXPECT_EQ(map->columns[5].meta, 80);
  EXPECT_EQ(map->columns[6].meta, 5);
  EXPECT_EQ(map->columns[8].meta, 6);
  EXPECT_TRUE(map->columns[0].nullable);
  ASSERT_EQ(map->is_unsigned.size(), 9u);
  EXPECT_TRUE(map->is_unsigned[0]);
  EXPECT_FALSE(map->is_unsigned[1]);
  ASSERT_EQ(map->column_names.size(), 9u);
  EXPECT_EQ(map->column_names[8], "i");
  ASSERT_EQ(map->labels.size(), 9u);
  EXPECT_EQ(map->labels[3], (std::vector<std::string>{"x", "y'"}));
  EXPECT_TRUE(map->labels[4].empty());
  // Every cut is refused without a read past the end (ASan would see one); cuts inside the
  // optional metadata too.
  const size_t opt = body.size() - optional.size();
  for (size_t n = 0; n < body.size(); ++n) {
    auto cut = ParseTableMap(body.substr(0, n), fd);
    if (n == opt || n == opt + 3 || n == opt + 5 + names.size()) {
      continue;  // whole optional metadata entries end there
    }
    EXPECT_EQ(cut.status().code(), StatusCode::kCorruption) << n;
  }
}

// ---- values ----
TEST(BinlogValues, Integers) {
  auto form = [](const char* data_type, const char* column_type) {
    return Form("n", data_type, column_type);
  };
  EXPECT_EQ(Text({1, ""}, form("tinyint", "tinyint(4)"), "\x80"), "-128");
  EXPECT_EQ(Text({1, ""}, form("tinyint", "tinyint(3) unsigned"), "\xff"), "255");
  EXPECT_EQ(Text({2, ""}, form("smallint", "smallint(6)"), Le(0x8000, 2)), "-32768");
  EXPECT_EQ(Text({2, ""}, form("smallint", "smallint(5) unsigned"), Le(65535, 2)), "65535");
  EXPECT_EQ(Text({9, ""}, form("mediumint", "mediumint(9)"), Le(0x800000, 3)), "-8388608");
  EXPECT_EQ(Text({9, ""}, form("mediumint", "mediumint(9)"), Le(0x7FFFFF, 3)), "8388607");
  EXPECT_EQ(Text({9, ""}, form("mediumint", "mediumint(8) unsigned"), Le(0xFFFFFF, 3)), "16777215");
  EXPECT_EQ(Text({3, ""}, form("int", "int(11)"), Le(0xFFFFFFFB, 4)), "-5");
  EXPECT_EQ(Text({3, ""}, form("int", "int(10) unsigned"), Le(0xFFFFFFFF, 4)), "4294967295");
  EXPECT_EQ(Text({8, ""}, form("bigint", "bigint(20)"), Le(0x8000000000000000, 8)),
            "-9223372036854775808");
  EXPECT_EQ(Text({8, ""}, form("bigint", "bigint(20) unsigned"), Le(~0ull, 8)),
            "18446744073709551615");
  EXPECT_EQ(Text({3, ""}, form("int", "int(8) unsigned zerofill"), Le(42, 4)), "00000042");
  // No COLUMN_TYPE: the table map's signedness decides.
  const FormatDescription fd = Fd();
  auto map = ParseTableMap(TableMapBody(9, {{1, ""}}, std::string("\x01\x01\x80")), fd);
  ASSERT_TRUE(map.ok());
  EventHeader h;
  h.type = kWriteRowsV2;
  std::string v2 = Le(9, 6) + Le(1, 2) + Le(2, 2) + "\x01\x01" + std::string(1, '\0') + "\xff";
  auto rows = ParseRowsEvent(h, v2, fd);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ColumnForm f = form("tinyint", "");
  std::string got;
  ASSERT_TRUE(DecodeRows(*rows, *map, {f}, [&](const RowImage&, const RowImage& after) {
                got = std::string(*after[0]);
                return Status::OK();
              }).ok());
  EXPECT_EQ(got, "255");
}

std::string F32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return Le(u, 4);
}
std::string F64(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return Le(u, 8);
}

TEST(BinlogValues, FloatingPoint) {
  const ColumnForm f = Form("f", "float", "float");
  const ColumnForm d = Form("d", "double", "double");
  EXPECT_EQ(Text({4, "\x04"}, f, F32(0.1f)), "0.10000000149011612");
  EXPECT_EQ(Text({4, "\x04"}, f, F32(3.40282e38f)), "3.402820018375656e38");
  EXPECT_EQ(Text({4, "\x04"}, f, F32(1.5f)), "1.5");
  EXPECT_EQ(Text({4, "\x04"}, f, F32(-1e-30f)), "-1.0000000031710769e-30");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1.7976931348623157e308)), "1.7976931348623157e308");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(-2.5e-300)), "-2.5e-300");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1e15)), "1e15");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1e14)), "100000000000000");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1234567890123456.7)), "1234567890123456.8");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1.5e-5)), "0.000015");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1.234567890123e-10)), "0.0000000001234567890123");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1e-15)), "0.000000000000001");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(1.5e-16)), "1.5e-16");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(4.9e-324)), "5e-324");
  EXPECT_EQ(Text({5, "\x08"}, d, F64(0.0)), "0");
  // double(M,D) prints D decimals (its shortest digits, zeros after them); ZEROFILL pads to M
  // (22 without it), as the server prints them.
  EXPECT_EQ(Text({5, "\x08"}, Form("d", "double", "double(12,3)"), F64(-1.5)), "-1.500");
  EXPECT_EQ(Text({5, "\x08"}, Form("d", "double", "double(30,10)"), F64(12345678901234567890.0)),
            "12345678901234567000.0000000000");
  EXPECT_EQ(Text({5, "\x08"}, Form("d", "double", "double(10,2)"), F64(0.0)), "0.00");
  EXPECT_EQ(Text({5, "\x08"}, Form("d", "double", "double(10,2)"), F64(0.125)), "0.12");
  EXPECT_EQ(Text({5, "\x08"}, Form("d", "double", "double(10,2) unsigned zerofill"), F64(3.5)),
            "0000003.50");
  EXPECT_EQ(Text({5, "\x08"}, Form("d", "double", "double unsigned zerofill"), F64(1.5e300)),
            "0000000000000001.5e300");
  // What AppendMysqlValue's float conversion accepts: the exact value of a float.
  EXPECT_EQ(Code({5, "\x08"}, d, F64(std::numeric_limits<double>::infinity())),
            StatusCode::kInvalidArgument);
}

// NEWDECIMAL bytes of `digits` (no sign, no point) for decimal(p,s).
std::string Decimal(bool negative, const std::string& int_part, const std::string& frac, int p,
                    int s) {
  static const int kBytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
  const int intg = p - s;
  std::string ip = std::string(size_t(intg) - int_part.size(), '0') + int_part;
  std::string fp = frac + std::string(size_t(s) - frac.size(), '0');
  std::string out;
  const int lead = intg % 9;
  size_t at = 0;
  if (lead) {
    out += Be(std::stoull(ip.substr(0, size_t(lead))), size_t(kBytes[lead]));
    at = size_t(lead);
  }
  for (; at < ip.size(); at += 9) out += Be(std::stoull(ip.substr(at, 9)), 4);
  for (at = 0; at + 9 <= fp.size(); at += 9) out += Be(std::stoull(fp.substr(at, 9)), 4);
  if (s % 9) out += Be(std::stoull(fp.substr(at)), size_t(kBytes[s % 9]));
  out[0] = char(out[0] ^ 0x80);
  if (negative) {
    for (char& c : out) c = char(~c);
  }
  return out;
}

TEST(BinlogValues, Decimals) {
  auto form = [](int p, int s) {
    return Form("n", "decimal", "decimal(" + std::to_string(p) + "," + std::to_string(s) + ")", "",
                p, s);
  };
  auto col = [](int p, int s) { return Col{246, std::string{char(p), char(s)}}; };
  EXPECT_EQ(Text(col(5, 4), form(5, 4), Decimal(true, "0", "05", 5, 4)), "-0.0500");
  EXPECT_EQ(Text(col(10, 2), form(10, 2), Decimal(false, "12345678", "9", 10, 2)), "12345678.90");
  EXPECT_EQ(Text(col(10, 2), form(10, 2), Decimal(false, "0", "", 10, 2)), "0.00");
  const std::string n35(35, '9'), f30(30, '9');
  EXPECT_EQ(Text(col(65, 30), form(65, 30), Decimal(true, n35, f30, 65, 30)),
            "-" + n35 + "." + f30);
  EXPECT_EQ(Text(col(65, 0), form(65, 0), Decimal(false, std::string(65, '9'), "", 65, 0)),
            std::string(65, '9'));
  EXPECT_EQ(Text(col(9, 9), form(9, 9), Decimal(false, "", "000000001", 9, 9)), "0.000000001");
  EXPECT_EQ(Text(col(18, 9), form(18, 9), Decimal(true, "123456789", "123456789", 18, 9)),
            "-123456789.123456789");
  EXPECT_EQ(Text(col(8, 3), Form("n", "decimal", "decimal(8,3) unsigned zerofill", "", 8, 3),
                 Decimal(false, "1", "5", 8, 3)),
            "00001.500");
  EXPECT_EQ(Text(col(5, 0), Form("n", "decimal", "decimal(5,0) unsigned zerofill", "", 5, 0),
                 Decimal(false, "7", "", 5, 0)),
            "00007");
  // The log's precision and scale are not discovery's (the column was changed since these
  // changes were made): decoded as the log has it; the conversion into the discovered type
  // decides.
  EXPECT_EQ(Text(col(10, 2), form(12, 3), Decimal(false, "1", "25", 10, 2)), "1.25");
  // A digit group above 999999999 is damage.
  EXPECT_EQ(Code(col(18, 0), form(18, 0), std::string("\x80\x00\x00\x00", 4) + "\xff\xff\xff\xff"),
            StatusCode::kCorruption);
  EXPECT_EQ(Code(col(10, 2), form(10, 2), "\x80\x00"), StatusCode::kCorruption);
}

TEST(BinlogValues, Bits) {
  EXPECT_EQ(Text({16, std::string("\x01\x00", 2)}, Form("b", "bit", "bit(1)"), "\x01"), "1");
  EXPECT_EQ(Text({16, std::string("\x05\x00", 2)}, Form("b", "bit", "bit(5)"), "\x1f"), "31");
  EXPECT_EQ(
      Text({16, std::string("\x00\x08", 2)}, Form("b", "bit", "bit(64)"), std::string(8, '\xff')),
      "18446744073709551615");
  EXPECT_EQ(Text({16, "\x02\x01"}, Form("b", "bit", "bit(10)"), "\x02\x01"), "513");
}

std::string Datetime2(int y, int mo, int d, int h, int mi, int s) {
  const uint64_t ym = uint64_t(y) * 13 + uint64_t(mo);
  const uint64_t packed =
      (((ym << 5) | uint64_t(d)) << 17) | (uint64_t(h) << 12) | (uint64_t(mi) << 6) | uint64_t(s);
  return Be(packed + 0x8000000000ull, 5);
}
// TIME2 of fsp 5..6: one 6-byte integer offset by 0x800000000000.
std::string Time2Micro(bool negative, int h, int m, int s, int us) {
  int64_t packed = ((int64_t(h) << 12 | m << 6 | s) << 24) + us;
  if (negative) packed = -packed;
  return Be(uint64_t(packed + 0x800000000000ll), 6);
}

TEST(BinlogValues, Temporal) {
  const ColumnForm date = Form("d", "date", "date");
  EXPECT_EQ(Text({10, ""}, date, Le((2024u << 9) | (2 << 5) | 29, 3)), "2024-02-29");
  EXPECT_EQ(Text({10, ""}, date, Le((1u << 9) | (1 << 5) | 1, 3)), "0001-01-01");
  EXPECT_EQ(Text({10, ""}, date, Le(0, 3)), "0000-00-00");
  EXPECT_EQ(Text({10, ""}, date, Le((2024u << 9) | 15, 3)), "2024-00-15");

  EXPECT_EQ(Text({18, std::string(1, '\0')}, Form("t", "datetime", "datetime"),
                 Datetime2(9999, 12, 31, 23, 59, 59)),
            "9999-12-31 23:59:59");
  EXPECT_EQ(Text({18, "\x06"}, Form("t", "datetime", "datetime(6)"),
                 Datetime2(2024, 2, 29, 12, 34, 56) + Be(789012, 3)),
            "2024-02-29 12:34:56.789012");
  EXPECT_EQ(Text({18, "\x03"}, Form("t", "datetime", "datetime(3)"),
                 Datetime2(0, 0, 0, 0, 0, 0) + Be(5000, 2)),
            "0000-00-00 00:00:00.500");
  EXPECT_EQ(Text({18, "\x01"}, Form("t", "datetime", "datetime(1)"),
                 Datetime2(2000, 1, 1, 0, 0, 0) + Be(90, 1)),
            "2000-01-01 00:00:00.9");

  const ColumnForm ts3 = Form("t", "timestamp", "timestamp(3)");
  EXPECT_EQ(Text({17, "\x03"}, ts3, Be(0, 4) + Be(0, 2)), "0000-00-00 00:00:00.000");
  EXPECT_EQ(Text({17, "\x03"}, ts3, Be(2147483647, 4) + Be(9990, 2)), "2038-01-19 03:14:07.999");
  EXPECT_EQ(Text({17, std::string(1, '\0')}, Form("t", "timestamp", "timestamp"), Be(1, 4)),
            "1970-01-01 00:00:01");
  EXPECT_EQ(Text({17, "\x06"}, Form("t", "timestamp", "timestamp(6)"), Be(951782400, 4) + Be(1, 3)),
            "2000-02-29 00:00:00.000001");

  const ColumnForm t0 = Form("t", "time", "time");
  EXPECT_EQ(Text({19, std::string(1, '\0')}, t0, Be(0x800000 - ((838 << 12) | (59 << 6) | 59), 3)),
            "-838:59:59");
  EXPECT_EQ(Text({19, std::string(1, '\0')}, t0, Be(0x800000 + ((25 << 12)), 3)), "25:00:00");
  const ColumnForm t6 = Form("t", "time", "time(6)");
  EXPECT_EQ(Text({19, "\x06"}, t6, Time2Micro(true, 838, 59, 59, 0)), "-838:59:59.000000");
  EXPECT_EQ(Text({19, "\x06"}, t6, Time2Micro(true, 0, 0, 0, 1)), "-00:00:00.000001");
  EXPECT_EQ(Text({19, "\x06"}, t6, Time2Micro(false, 838, 59, 59, 999999)), "838:59:59.999999");
  // fsp 1..4: a negative time's fraction counts down from the next whole second.
  const int64_t minus_1s = 0x800000 - 1;  // -00:00:01 as the integer part
  EXPECT_EQ(Text({19, "\x01"}, Form("t", "time", "time(1)"), Be(0x800000 - 1, 3) + "\xf6"),
            "-00:00:00.1");
  EXPECT_EQ(Text({19, "\x03"}, Form("t", "time", "time(3)"),
                 Be(uint64_t(minus_1s), 3) + Be(0x10000 - 10, 2)),
            "-00:00:00.001");
  EXPECT_EQ(Text({19, "\x04"}, Form("t", "time", "time(4)"),
                 Be(0x800000 - ((12 << 12) | (34 << 6) | 57), 3) + Be(0x10000 - 7891, 2)),
            "-12:34:56.7891");
  EXPECT_EQ(Text({19, "\x02"}, Form("t", "time", "time(2)"), Be(0x800000 + 1, 3) + "\x32"),
            "00:00:01.50");

  const ColumnForm year = Form("y", "year", "year(4)");
  EXPECT_EQ(Text({13, ""}, year, std::string(1, '\0')), "0000");
  EXPECT_EQ(Text({13, ""}, year, "\x01"), "1901");
  EXPECT_EQ(Text({13, ""}, year, "\xff"), "2155");

  // Before MySQL 5.6: DATETIME as YYYYMMDDhhmmss, TIMESTAMP as seconds, TIME as [-]HHMMSS.
  EXPECT_EQ(Text({12, ""}, Form("t", "datetime", "datetime"), Le(20240229123456ull, 8)),
            "2024-02-29 12:34:56");
  EXPECT_EQ(Text({7, ""}, Form("t", "timestamp", "timestamp"), Le(0, 4)), "0000-00-00 00:00:00");
  EXPECT_EQ(Text({11, ""}, Form("t", "time", "time"), Le(uint64_t(-8385959) & 0xFFFFFF, 3)),
            "-838:59:59");
  // MariaDB's old fractional format is not described by the log: refused, not misread.
  EXPECT_EQ(Code({11, ""}, Form("t", "time", "time(3)"), Le(0, 3)), StatusCode::kNotSupported);
  EXPECT_EQ(Code({19, "\x07"}, t6, Time2Micro(false, 0, 0, 0, 0)), StatusCode::kCorruption);
}

std::string Str1(const std::string& s) { return std::string(1, char(s.size())) + s; }

TEST(BinlogValues, TextInCharacterSets) {
  const Col vc{15, Le(40, 2)};
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "utf8mb4"), Str1("Größe 😀")), "Größe 😀");
  // MySQL's latin1 is cp1252, its five holes the C1 controls.
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "latin1"), Str1("caf\xe9 \x80\x81\x9f")),
            "café €\xc2\x81Ÿ");
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "ascii"), Str1("plain")), "plain");
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "ucs2"),
                 Str1(std::string("\x00\xe9\x20\xac", 4))),
            "é€");
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "utf16"),
                 Str1(std::string("\xd8\x3d\xde\x00", 4))),
            "😀");
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "greek"), Str1("\xd9")), "Ω");
  // sjis as MySQL reads it: ASCII in the low half, 0x815f a backslash too.
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "sjis"), Str1("a\\~\x81\x5f\x83\x4a")),
            "a\\~\\カ");
  // big5: the standard set converts; iconv lacks the ETEN extensions MySQL has: refused.
  EXPECT_EQ(Text(vc, Form("s", "varchar", "varchar(10)", "big5"), Str1("\xa4\xa4")), "中");
  EXPECT_EQ(Code(vc, Form("s", "varchar", "varchar(10)", "big5"), Str1("\xc7\xf3")),
            StatusCode::kNotSupported);
  // Bytes that are not text of the column's character set name the column.
  auto bad = DecodeOne(vc, Form("name_of_col", "varchar", "varchar(10)", "utf8mb4"), Str1("\xff"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("name_of_col"), std::string::npos);
  EXPECT_EQ(Code(vc, Form("s", "varchar", "varchar(10)", "ascii"), Str1("\xe9")),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Code(vc, Form("s", "varchar", "varchar(10)", "klingon"), Str1("x")),
            StatusCode::kNotSupported);
  // Lengths of two bytes above 255, text and blob length prefixes of 1..4 bytes.
  const std::string long_text(300, 'x');
  EXPECT_EQ(Text({15, Le(1200, 2)}, Form("s", "varchar", "varchar(300)", "utf8mb4"),
                 Le(300, 2) + long_text),
            long_text);
  EXPECT_EQ(Text({252, "\x04"}, Form("s", "longtext", "longtext", "utf8mb4"), Le(3, 4) + "abc"),
            "abc");
  EXPECT_EQ(Text({252, "\x02"}, Form("s", "blob", "blob"), Le(2, 2) + std::string("\x00\xff", 2)),
            std::string("\x00\xff", 2));
  EXPECT_EQ(Code({252, "\x05"}, Form("s", "blob", "blob"), Le(2, 2)), StatusCode::kCorruption);
  EXPECT_EQ(Code({252, "\x02"}, Form("s", "blob", "blob"), Le(9, 2) + "abc"),
            StatusCode::kCorruption);
  // CHAR comes without its trailing spaces (as the server returns it), BINARY(n) without its
  // trailing zero bytes, which the server returns: padded back.
  EXPECT_EQ(Text({254, "\xfe\x14"}, Form("c", "char", "char(5)", "utf8mb4"), Str1("ab")), "ab");
  EXPECT_EQ(Text({254, "\xfe\x04"}, Form("b", "binary", "binary(4)"), Str1("\xde\xad")),
            std::string("\xde\xad\x00\x00", 4));
  EXPECT_EQ(Code({254, "\xfe\x04"}, Form("b", "binary", "binary(4)"), Str1("12345")),
            StatusCode::kCorruption);
  // MySQL's binary JSON: refused, naming the column.
  auto json = DecodeOne({245, "\x04"}, Form("doc", "json", "json", "utf8mb4"),
                        Le(2, 4) + std::string(2, '\0'));
  EXPECT_EQ(json.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(json.status().message().find("doc"), std::string::npos);
}

TEST(BinlogValues, MariaDbTypes) {
  const Col c16{254, "\xfe\x10"};
  EXPECT_EQ(Text(c16, Form("u", "uuid", "uuid"),
                 Str1("\x12\x3e\x45\x67\xe8\x9b\x12\xd3\xa4\x56\x42\x66\x14\x17\x40")),
            "123e4567-e89b-12d3-a456-426614174000");
  EXPECT_EQ(Text(c16, Form("u", "uuid", "uuid"), Str1("")), "00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(Text({254, "\xfe\x04"}, Form("i", "inet4", "inet4"),
                 Str1(std::string("\x0a\x00\x00\x01", 4))),
            "10.0.0.1");
  EXPECT_EQ(Text({254, "\xfe\x04"}, Form("i", "inet4", "inet4"), Str1("")), "0.0.0.0");
  const ColumnForm ip = Form("i", "inet6", "inet6");
  auto v6 = [](std::initializer_list<uint16_t> words) {
    std::string s;
    for (uint16_t w : words) s += Be(w, 2);
    while (!s.empty() && s.back() == '\0') s.pop_back();  // as the log strips them
    return Str1(s);
  };
  EXPECT_EQ(Text(c16, ip, v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 1})), "2001:db8::1");
  EXPECT_EQ(Text(c16, ip, v6({0, 0, 0, 0, 0, 0, 0, 0})), "::");
  EXPECT_EQ(Text(c16, ip, v6({0, 0, 0, 0, 0, 0, 0, 1})), "::1");
  EXPECT_EQ(Text(c16, ip, v6({0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304})), "::ffff:1.2.3.4");
  EXPECT_EQ(Text(c16, ip, v6({0, 0, 0, 0, 0, 0, 0x0102, 0x0304})), "::1.2.3.4");
  EXPECT_EQ(Text(c16, ip, v6({0x2001, 0xdb8, 0, 1, 1, 1, 1, 1})), "2001:db8::1:1:1:1:1");
  EXPECT_EQ(Text(c16, ip, v6({1, 0, 0, 2, 0, 0, 0, 3})), "1:0:0:2::3");
  EXPECT_EQ(Text(c16, ip, v6({0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff})),
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
}

TEST(BinlogValues, EnumAndSet) {
  const ColumnForm e = Form("e", "enum", R"(enum('a','it''s','x,y','back\\slash',''))", "utf8mb4");
  const Col ec{254, "\xf7\x01"};
  EXPECT_EQ(Text(ec, e, "\x01"), "a");
  EXPECT_EQ(Text(ec, e, "\x02"), "it's");
  EXPECT_EQ(Text(ec, e, "\x03"), "x,y");
  EXPECT_EQ(Text(ec, e, "\x04"), "back\\slash");
  EXPECT_EQ(Text(ec, e, "\x05"), "");
  EXPECT_EQ(Text(ec, e, std::string(1, '\0')),
            "");  // the error value of invalid input under a lax sql_mode
  EXPECT_EQ(Code(ec, e, "\x06"), StatusCode::kInvalidArgument);
  const ColumnForm s = Form("s", "set", "set('a','b''q','c')", "utf8mb4");
  const Col sc{254, "\xf8\x01"};
  EXPECT_EQ(Text(sc, s, "\x07"), "a,b'q,c");
  EXPECT_EQ(Text(sc, s, "\x04"), "c");
  EXPECT_EQ(Text(sc, s, std::string(1, '\0')), "");
  EXPECT_EQ(Code(sc, s, "\x08"), StatusCode::kInvalidArgument);
  // A label with a '?' may be a 4-byte character information_schema could not show.
  const ColumnForm q = Form("q", "enum", "enum('?','ok')", "utf8mb4");
  EXPECT_EQ(Text(ec, q, "\x02"), "ok");
  EXPECT_EQ(Code(ec, q, "\x01"), StatusCode::kInvalidArgument);
}

TEST(BinlogValues, LabelsFromTheTableMap) {
  const FormatDescription fd = Fd();
  // ENUM_STR_VALUE with a 4-byte character, and a latin1 SET's labels in latin1.
  const std::string enums = std::string("\x02") + "\x04\xf0\x9f\x98\x80" + "\x01?";
  const std::string sets = std::string("\x02") + "\x01\xe9" + "\x01\x80";
  const std::string optional = "\x06" + std::string(1, char(enums.size())) + enums + "\x05" +
                               std::string(1, char(sets.size())) + sets;
  auto map = ParseTableMap(TableMapBody(9, {{254, "\xf7\x01"}, {254, "\xf8\x01"}}, optional), fd);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EventHeader h;
  h.type = kWriteRowsV1;
  const std::string body = RowsBody(9, 2, std::string(1, '\0') + "\x01\x03");
  auto rows = ParseRowsEvent(h, body, fd);
  ASSERT_TRUE(rows.ok());
  std::vector<ColumnForm> forms = {Form("e", "enum", "enum('?','?')", "utf8mb4"),
                                   Form("s", "set", "set('é','€')", "latin1")};
  std::string e, s;
  ASSERT_TRUE(DecodeRows(*rows, *map, forms, [&](const RowImage&, const RowImage& after) {
                e = std::string(*after[0]);
                s = std::string(*after[1]);
                return Status::OK();
              }).ok());
  EXPECT_EQ(e, "😀");
  EXPECT_EQ(s, "é,€");
}

// The point of the text: AppendMysqlValue converts a decoded value as it converts the
// snapshot's.
TEST(BinlogValues, ConvertLikeSnapshotValues) {
  auto convert = [](const Col& col, const ColumnForm& form, const std::string& value) {
    auto text = DecodeOne(col, form, value);
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    Column out(MapMysqlColumn(form.column).type);
    std::optional<std::string_view> v;
    if (text.ok() && *text) v = **text;
    Status s = AppendMysqlValue(form.wire, v, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  const ColumnForm f = Form("f", "float", "float");
  for (float x : {0.1f, -3.40282e38f, 1.17549435e-38f, 1e-45f, 16777217.0f, 3.0f}) {
    EXPECT_EQ(convert({4, "\x04"}, f, F32(x)).ValueAt<float>(0), x);
  }
  const ColumnForm t6 = Form("t", "time", "time(6)");
  EXPECT_EQ(convert({19, "\x06"}, t6, Time2Micro(true, 838, 59, 59, 0)).ValueAt<int64_t>(0),
            -int64_t{3020399} * 1000000);
  const ColumnForm ts = Form("t", "timestamp", "timestamp(6)");
  Column zero = convert({17, "\x06"}, ts, Be(0, 4) + Be(0, 3));
  EXPECT_EQ(zero.null_count(), 1u);  // the zero timestamp reads as NULL, as in the snapshot
  const ColumnForm n = Form("n", "decimal", "decimal(10,4)", "", 10, 4);
  EXPECT_EQ(convert({246, "\x0a\x04"}, n, Decimal(true, "0", "05", 10, 4)).ValueAt<int128_t>(0),
            int128_t{-500});
}

// What a value converts to, decoded as text and converted by AppendMysqlValue, or decoded in
// binary form (SetTypedColumns) and appended by AppendMysqlBinary: "null", the value's bytes in
// the column, or "error". `typed_used`: whether the column had a binary form.
std::string Converted(const Col& col, const ColumnForm& form, const std::string& value, bool typed,
                      bool* typed_used = nullptr) {
  const FormatDescription fd = Fd();
  auto map = ParseTableMap(TableMapBody(9, {col}), fd);
  EXPECT_TRUE(map.ok()) << map.status().ToString();
  if (!map.ok()) return "bad map";
  EventHeader h;
  h.type = kWriteRowsV1;
  const std::string body = RowsBody(9, 1, std::string(1, '\0') + value);
  auto rows = ParseRowsEvent(h, body, fd);
  EXPECT_TRUE(rows.ok());
  if (!rows.ok()) return "bad rows";
  auto decoder = RowDecoder::Make(*map, {form});
  EXPECT_TRUE(decoder.ok()) << decoder.status().ToString();
  if (!decoder.ok()) return "bad decoder";
  if (typed) (*decoder)->SetTypedColumns({true});
  const bool binary = (*decoder)->typed()[0];
  if (typed_used != nullptr) *typed_used = binary;
  Column out(MapMysqlColumn(form.column).type);
  Status s = (*decoder)->Decode(*rows, [&](const RowImage&, const RowImage& after) {
    if (!after[0]) {
      out.AppendNull();
      return Status::OK();
    }
    return binary ? AppendMysqlBinary(form.wire, *after[0], &out)
                  : AppendMysqlValue(form.wire, *after[0], &out);
  });
  if (!s.ok()) return "error";
  if (out.size() != 1) return "no value";
  if (!out.IsValid(0)) return "null";
  return std::string(reinterpret_cast<const char*>(out.fixed_data()),
                     static_cast<size_t>(out.type().FixedWidth()));
}

// Numbers, dates and times in binary form convert exactly as their text does: the same value,
// the same NULL for zero dates, the same refusals.
TEST(BinlogValues, BinaryFormConvertsAsTheText) {
  size_t compared = 0;
  auto same = [&](const Col& col, const ColumnForm& form, const std::string& value,
                  bool expect_typed = true) {
    bool used = false;
    const std::string typed = Converted(col, form, value, true, &used);
    EXPECT_EQ(used, expect_typed) << form.column.column_type;
    EXPECT_EQ(typed, Converted(col, form, value, false))
        << form.column.column_type << " value bytes " << value.size();
    ++compared;
    return typed;
  };
  // Integers of every width and sign, at their ends.
  const std::vector<std::tuple<uint8_t, const char*, const char*, size_t>> ints = {
      {1, "tinyint", "tinyint(4)", 1},
      {1, "tinyint", "tinyint(3) unsigned", 1},
      {2, "smallint", "smallint(6)", 2},
      {2, "smallint", "smallint(5) unsigned", 2},
      {9, "mediumint", "mediumint(9)", 3},
      {9, "mediumint", "mediumint(8) unsigned", 3},
      {3, "int", "int(11)", 4},
      {3, "int", "int(10) unsigned", 4},
      {8, "bigint", "bigint(20)", 8},
      {3, "int", "int(8) unsigned zerofill", 4},
      {1, "tinyint", "tinyint(1)", 1}};
  for (const auto& [type, data_type, column_type, n] : ints) {
    const ColumnForm f = Form("n", data_type, column_type);
    for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{42}, ~uint64_t{0},
                       uint64_t{1} << (8 * n - 1), (uint64_t{1} << (8 * n - 1)) - 1}) {
      same({type, ""}, f, Le(v, n));
    }
  }
  // bigint unsigned is a decimal(20,0) in the lake: text, not binary.
  same({8, ""}, Form("n", "bigint", "bigint(20) unsigned"), Le(~0ull, 8), false);
  // Decimals: signs, zeros, the most digits, fractions, and a log of another precision or
  // scale than discovered (converted as the text is, or refused as it is).
  auto dec = [](int p, int sc, const std::string& zerofill = "") {
    return Form("n", "decimal",
                "decimal(" + std::to_string(p) + "," + std::to_string(sc) + ")" + zerofill, "", p,
                sc);
  };
  auto dcol = [](int p, int sc) { return Col{246, std::string{char(p), char(sc)}}; };
  EXPECT_EQ(same(dcol(12, 2), dec(12, 2), Decimal(false, "1234567890", "12", 12, 2)),
            Converted(dcol(12, 2), dec(12, 2), Decimal(false, "1234567890", "12", 12, 2), false));
  same(dcol(12, 2), dec(12, 2), Decimal(true, "1234567890", "12", 12, 2));
  same(dcol(12, 2), dec(12, 2), Decimal(true, "0", "", 12, 2));
  same(dcol(12, 2), dec(12, 2), Decimal(false, "0", "01", 12, 2));
  same(dcol(38, 0), dec(38, 0), Decimal(false, std::string(38, '9'), "", 38, 0));
  same(dcol(38, 0), dec(38, 0), Decimal(true, std::string(38, '9'), "", 38, 0));
  same(dcol(38, 38), dec(38, 38), Decimal(true, "", std::string(38, '9'), 38, 38));
  same(dcol(18, 9), dec(18, 9), Decimal(false, "123456789", "123456789", 18, 9));
  same(dcol(9, 9), dec(9, 9), Decimal(false, "", "000000001", 9, 9));
  same(dcol(8, 3), dec(8, 3, " unsigned zerofill"), Decimal(false, "1", "5", 8, 3));
  same(dcol(10, 2), dec(12, 3), Decimal(false, "12345678", "25", 10, 2));
  same(dcol(12, 3), dec(10, 2), Decimal(false, "1", "125", 12, 3));        // a digit too many
  same(dcol(12, 3), dec(10, 2), Decimal(false, "1", "12", 12, 3));         // a zero too many
  same(dcol(12, 2), dec(10, 2), Decimal(false, "1234567890", "", 12, 2));  // too large
  same(dcol(40, 2), dec(40, 2), Decimal(false, "1", "5", 40, 2), false);   // text beyond 38
  // Dates: ordinary, leap days, year 0, the ends, zero dates and zero parts, not a calendar's.
  const ColumnForm date = Form("d", "date", "date");
  auto d3 = [](uint64_t y, uint64_t m, uint64_t d) { return Le((y << 9) | (m << 5) | d, 3); };
  for (const auto& [y, m, d] : std::vector<std::tuple<int, int, int>>{{2024, 2, 29},
                                                                      {2023, 2, 29},
                                                                      {1900, 2, 29},
                                                                      {2000, 2, 29},
                                                                      {0, 1, 1},
                                                                      {1, 1, 1},
                                                                      {9999, 12, 31},
                                                                      {1969, 12, 31},
                                                                      {1970, 1, 1},
                                                                      {0, 0, 0},
                                                                      {2024, 0, 15},
                                                                      {2024, 6, 0},
                                                                      {2024, 4, 31},
                                                                      {2024, 13, 1},
                                                                      {2024, 15, 31},
                                                                      {10000, 1, 1},
                                                                      {10000, 0, 1},
                                                                      {32767, 0, 0}}) {
    same({10, ""}, date, d3(uint64_t(y), uint64_t(m), uint64_t(d)));
  }
  EXPECT_EQ(Converted({10, ""}, date, d3(2024, 0, 15), true), "null");
  EXPECT_EQ(Converted({10, ""}, date, d3(2024, 4, 31), true), "error");
  // Datetimes of every precision, with zero dates (and a zero date with a fraction), times of
  // day past their ends and the ends of the range.
  for (unsigned fsp = 0; fsp <= 6; ++fsp) {
    const ColumnForm dt =
        Form("t", "datetime", fsp == 0 ? "datetime" : "datetime(" + std::to_string(fsp) + ")");
    const size_t fbytes = (fsp + 1) / 2;
    const uint64_t frac_max = fbytes == 0 ? 0 : fbytes == 1 ? 99 : fbytes == 2 ? 9999 : 999999;
    for (const auto& [y, mo, d, h, mi, sec] :
         std::vector<std::tuple<int, int, int, int, int, int>>{{2024, 2, 29, 12, 34, 56},
                                                               {0, 1, 1, 0, 0, 0},
                                                               {9999, 12, 31, 23, 59, 59},
                                                               {1969, 12, 31, 23, 59, 59},
                                                               {1970, 1, 1, 0, 0, 0},
                                                               {0, 0, 0, 0, 0, 0},
                                                               {2024, 2, 30, 0, 0, 0},
                                                               {2024, 1, 1, 24, 0, 0},
                                                               {2024, 1, 1, 0, 60, 0},
                                                               {2024, 1, 1, 0, 0, 60},
                                                               {2024, 0, 1, 1, 2, 3},
                                                               {10082, 0, 1, 0, 0, 0},
                                                               {10000, 1, 1, 0, 0, 0}}) {
      for (uint64_t frac : {uint64_t{0}, uint64_t{1}, frac_max}) {
        same({18, std::string(1, char(fsp))}, dt,
             Datetime2(y, mo, d, h, mi, sec) + Be(frac, fbytes));
      }
    }
  }
  // Timestamps (UTC): every precision, zero, the epoch's first fraction, the 2038 end.
  for (unsigned fsp = 0; fsp <= 6; ++fsp) {
    const ColumnForm ts =
        Form("t", "timestamp", fsp == 0 ? "timestamp" : "timestamp(" + std::to_string(fsp) + ")");
    const size_t fbytes = (fsp + 1) / 2;
    for (uint64_t secs : {uint64_t{0}, uint64_t{1}, uint64_t{951782400}, uint64_t{2147483647}}) {
      for (uint64_t frac : {uint64_t{0}, uint64_t{1}, uint64_t{90}}) {
        if (fbytes == 0 && frac != 0) continue;
        same({17, std::string(1, char(fsp))}, ts, Be(secs, 4) + Be(frac, fbytes));
      }
    }
  }
  same({7, ""}, Form("t", "timestamp", "timestamp"), Le(0, 4));
  same({7, ""}, Form("t", "timestamp", "timestamp"), Le(1700000000, 4));
  // Types without a binary form stay text.
  same({5, "\x08"}, Form("d", "double", "double"), F64(2.5), false);
  same({19, "\x06"}, Form("t", "time", "time(6)"), Time2Micro(true, 838, 59, 59, 0), false);
  same({13, ""}, Form("y", "year", "year(4)"), "\x7c", false);
  EXPECT_GT(compared, 300u);
}

TEST(BinlogRows, UpdateImagesNullsAndPresentColumns) {
  const FormatDescription fd = Fd();
  auto map = ParseTableMap(TableMapBody(5, {{3, ""}, {15, Le(40, 2)}, {8, ""}}), fd);
  ASSERT_TRUE(map.ok());
  std::vector<ColumnForm> forms = {Form("id", "int", "int(11)"),
                                   Form("v", "varchar", "varchar(10)", "utf8mb4"),
                                   Form("n", "bigint", "bigint(20)")};
  // Before image: id and v (v NULL); after image: all three (n NULL). MINIMAL images look so.
  const std::string body = Le(5, 6) + Le(1, 2) + "\x03" + Bits({true, true, false}) +
                           Bits({true, true, true}) + std::string("\x02", 1) + Le(7, 4) +
                           std::string("\x04", 1) + Le(7, 4) + Str1("new");
  EventHeader h;
  h.type = kUpdateRowsV1;
  auto rows = ParseRowsEvent(h, body, fd);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->kind, RowsEvent::Kind::kUpdate);
  EXPECT_EQ(rows->present, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(rows->present_after, (std::vector<bool>{true, true, true}));
  int n = 0;
  ASSERT_TRUE(DecodeRows(*rows, *map, forms, [&](const RowImage& before, const RowImage& after) {
                ++n;
                EXPECT_EQ(before[0], "7");
                EXPECT_EQ(before[1], std::nullopt);
                EXPECT_EQ(before[2], std::nullopt);
                EXPECT_EQ(after[0], "7");
                EXPECT_EQ(after[1], "new");
                EXPECT_EQ(after[2], std::nullopt);
                return Status::OK();
              }).ok());
  EXPECT_EQ(n, 1);
  // A callback's error stops the decoding and comes back.
  EXPECT_EQ(DecodeRows(*rows, *map, forms,
                       [](const RowImage&, const RowImage&) { return Status::Cancelled("stop"); })
                .code(),
            StatusCode::kCancelled);
  // Every cut of the row bytes: kCorruption, never a read past them.
  for (size_t cut = 0; cut + 1 < rows->rows.size(); ++cut) {
    RowsEvent short_rows = *rows;
    short_rows.rows = rows->rows.substr(0, cut + 1);
    EXPECT_EQ(DecodeRows(short_rows, *map, forms,
                         [](const RowImage&, const RowImage&) { return Status::OK(); })
                  .code(),
              StatusCode::kCorruption)
        << cut;
  }
  // Forms that are not the map's columns: the table changed.
  EXPECT_EQ(DecodeRows(*rows, *map, {forms[0]},
                       [](const RowImage&, const RowImage&) { return Status::OK(); })
                .code(),
            StatusCode::kInvalidArgument);
  std::vector<ColumnForm> wrong = forms;
  wrong[2] = Form("n", "date", "date");
  Status s =
      DecodeRows(*rows, *map, wrong, [](const RowImage&, const RowImage&) { return Status::OK(); });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("`n`"), std::string::npos) << s.message();
  // No column present: images of no bytes cannot account for the bytes there are.
  const std::string none = Le(5, 6) + Le(1, 2) + "\x03" + Bits({false, false, false}) + "\x07";
  EventHeader hw;
  hw.type = kWriteRowsV1;
  auto empty = ParseRowsEvent(hw, none, fd);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(
      DecodeRows(*empty, *map, forms, [](const RowImage&, const RowImage&) { return Status::OK(); })
          .code(),
      StatusCode::kCorruption);
  // Header cuts.
  for (size_t cut = 0; cut < 10; ++cut) {
    EXPECT_EQ(ParseRowsEvent(h, body.substr(0, cut), fd).status().code(), StatusCode::kCorruption);
  }
  h.type = kQueryEvent;
  EXPECT_FALSE(ParseRowsEvent(h, body, fd).ok());
  EXPECT_TRUE(IsRowsEvent(kWriteRowsV1));
  EXPECT_TRUE(IsRowsEvent(kDeleteRowsV2));
  EXPECT_FALSE(IsRowsEvent(kWriteRowsCompressedV1));
}

TEST(BinlogRows, DeleteAndWideRows) {
  const FormatDescription fd = Fd();
  // 20 columns: null bitmaps of 3 bytes, every third NULL, two rows in one event.
  std::vector<Col> cols(20, Col{3, ""});
  auto map = ParseTableMap(TableMapBody(5, cols), fd);
  ASSERT_TRUE(map.ok());
  std::vector<ColumnForm> forms(20, Form("c", "int", "int(11)"));
  std::string rows_bytes;
  for (int r = 0; r < 2; ++r) {
    std::vector<bool> nulls(20);
    std::string values;
    for (int i = 0; i < 20; ++i) {
      nulls[size_t(i)] = (i + r) % 3 == 0;
      if (!nulls[size_t(i)]) values += Le(uint64_t(i * 100 + r), 4);
    }
    rows_bytes += Bits(nulls) + values;
  }
  EventHeader h;
  h.type = kDeleteRowsV1;
  const std::string body = RowsBody(5, 20, rows_bytes);  // the event holds views into it
  auto rows = ParseRowsEvent(h, body, fd);
  ASSERT_TRUE(rows.ok());
  int r = 0;
  ASSERT_TRUE(DecodeRows(*rows, *map, forms, [&](const RowImage& before, const RowImage& after) {
                EXPECT_TRUE(after.empty());
                for (int i = 0; i < 20; ++i) {
                  if ((i + r) % 3 == 0) {
                    EXPECT_EQ(before[size_t(i)], std::nullopt);
                  } else {
                    EXPECT_EQ(before[size_t(i)], std::to_string(i * 100 + r));
                  }
                }
                ++r;
                return Status::OK();
              }).ok());
  EXPECT_EQ(r, 2);
}

// A follower needs an UPDATE's before image for its key only: with SetBeforeColumns the other
// values are read past (every type's width, fixed or length-prefixed), and FullBefore decodes the
// whole image when the row moved to another key.
TEST(BinlogRows, BeforeImagesOfTheKeyAlone) {
  const FormatDescription fd = Fd();
  const std::vector<Col> cols = {
      Col{3, ""},                           // id int (the key)
      Col{15, Le(40, 2)},                   // varchar(10) utf8mb4
      Col{246, "\x0a\x02"},                 // decimal(10,2)
      Col{18, "\x06"},                      // datetime(6)
      Col{17, "\x03"},                      // timestamp(3)
      Col{5, "\x08"},                       // double
      Col{4, "\x04"},                       // float
      Col{10, ""},                          // date
      Col{16, std::string("\x05\x00", 2)},  // bit(5)
      Col{13, ""},                          // year
      Col{19, "\x04"},                      // time(4)
      Col{8, ""},                           // bigint
      Col{1, ""},                           // tinyint
      Col{2, ""},                           // smallint
      Col{9, ""},                           // mediumint
      Col{252, "\x02"},                     // blob
  };
  const std::vector<ColumnForm> forms = {
      Form("id", "int", "int(11)"),
      Form("v", "varchar", "varchar(10)", "utf8mb4"),
      Form("n", "decimal", "decimal(10,2)", "", 10, 2),
      Form("dt", "datetime", "datetime(6)"),
      Form("ts", "timestamp", "timestamp(3)"),
      Form("d", "double", "double"),
      Form("f", "float", "float"),
      Form("day", "date", "date"),
      Form("b", "bit", "bit(5)"),
      Form("y", "year", "year(4)"),
      Form("t", "time", "time(4)"),
      Form("big", "bigint", "bigint(20)"),
      Form("tiny", "tinyint", "tinyint(4)"),
      Form("small", "smallint", "smallint(6)"),
      Form("medium", "mediumint", "mediumint(9)"),
      Form("blob", "blob", "blob"),
  };
  auto image = [&](uint64_t id, const std::string& text, uint64_t big) {
    return Bits(std::vector<bool>(cols.size(), false)) + Le(id, 4) + Str1(text) +
           Decimal(false, "12345678", "9", 10, 2) + Datetime2(2024, 2, 29, 12, 34, 56) +
           Be(789012, 3) + Be(951782400, 4) + Be(1230, 2) + F64(2.5) + F32(1.5f) +
           Le((2024u << 9) | (2 << 5) | 29, 3) + "\x1f" + "\x7c" + Be(0x800000 + (25 << 12), 3) +
           Be(1234, 2) + Le(big, 8) + "\x80" + Le(0x8000, 2) + Le(0x7FFFFF, 3) + Le(3, 2) + "abc";
  };
  // Row 1 keeps its key; row 2 moves from id 8 to id 9.
  const std::string body =
      RowsBody(5, cols.size(),
               image(7, "old", 1) + image(7, "new", 2) + image(8, "gone", 3) + image(9, "moved", 4),
               /*update=*/true);
  auto map = ParseTableMap(TableMapBody(5, cols), fd);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EventHeader h;
  h.type = kUpdateRowsV1;
  auto rows = ParseRowsEvent(h, body, fd);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();

  // Every column decoded: what the masked decoding must agree with.
  std::vector<std::vector<std::optional<std::string>>> whole_before, whole_after;
  auto copy = [](const RowImage& image) {
    std::vector<std::optional<std::string>> out;
    for (const auto& v : image) out.push_back(v ? std::optional<std::string>(*v) : std::nullopt);
    return out;
  };
  ASSERT_TRUE(DecodeRows(*rows, *map, forms, [&](const RowImage& before, const RowImage& after) {
                whole_before.push_back(copy(before));
                whole_after.push_back(copy(after));
                return Status::OK();
              }).ok());
  ASSERT_EQ(whole_before.size(), 2u);
  EXPECT_EQ(whole_before[1][1], "gone");
  EXPECT_EQ(whole_before[1][15], "abc");
  EXPECT_EQ(whole_after[1][0], "9");

  auto decoder = RowDecoder::Make(*map, forms);
  ASSERT_TRUE(decoder.ok());
  std::vector<bool> key(cols.size(), false);
  key[0] = true;
  (*decoder)->SetBeforeColumns(key);
  size_t r = 0;
  ASSERT_TRUE((*decoder)
                  ->Decode(*rows,
                           [&](const RowImage& before, const RowImage& after) {
                             EXPECT_EQ(before[0], whole_before[r][0]);
                             for (size_t i = 1; i < cols.size(); ++i) {
                               EXPECT_EQ(before[i], std::nullopt) << i;
                             }
                             EXPECT_EQ(copy(after), whole_after[r]);
                             auto full = (*decoder)->FullBefore();
                             EXPECT_TRUE(full.ok()) << full.status().ToString();
                             if (full.ok()) {
                               EXPECT_EQ(copy(**full), whole_before[r]);
                             }
                             ++r;
                             return Status::OK();
                           })
                  .ok());
  EXPECT_EQ(r, 2u);
  // Bytes cut anywhere but between the rows are still damage when the values are only read past.
  const size_t first_row = image(7, "old", 1).size() + image(7, "new", 2).size();
  for (size_t cut = 0; cut + 1 < rows->rows.size(); ++cut) {
    if (cut + 1 == first_row) continue;
    RowsEvent short_rows = *rows;
    short_rows.rows = rows->rows.substr(0, cut + 1);
    EXPECT_EQ(
        (*decoder)
            ->Decode(short_rows, [](const RowImage&, const RowImage&) { return Status::OK(); })
            .code(),
        StatusCode::kCorruption)
        << cut;
  }
}

TEST(BinlogRows, ColumnsNoStreamTakesAreReadPast) {
  const FormatDescription fd = Fd();
  // int, blob (2-byte length), enum packed in CHAR, int: the middle two taken by no stream
  // column (invisible, dropped since): read past, given as NULL.
  std::vector<Col> cols = {Col{3, ""}, Col{252, "\x02"}, Col{254, std::string("\xf7\x01", 2)},
                           Col{3, ""}};
  auto map = ParseTableMap(TableMapBody(6, cols), fd);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  std::vector<ColumnForm> forms = {Form("a", "int", "int(11)"), ColumnForm{}, ColumnForm{},
                                   Form("b", "int", "int(11)")};
  EventHeader h;
  h.type = kWriteRowsV1;
  const std::string body =
      RowsBody(6, 4, std::string(1, '\0') + Le(7, 4) + Le(3, 2) + "abc" + "\x02" + Le(9, 4));
  auto rows = ParseRowsEvent(h, body, fd);
  ASSERT_TRUE(rows.ok());
  int images = 0;
  ASSERT_TRUE(DecodeRows(*rows, *map, forms, [&](const RowImage&, const RowImage& after) {
                EXPECT_EQ(after[0], "7");
                EXPECT_EQ(after[1], std::nullopt);
                EXPECT_EQ(after[2], std::nullopt);
                EXPECT_EQ(after[3], "9");
                ++images;
                return Status::OK();
              }).ok());
  EXPECT_EQ(images, 1);
  // A value that runs out is still damage, read past or not.
  const std::string short_body =
      RowsBody(6, 4, std::string(1, '\0') + Le(7, 4) + Le(30, 2) + "abc");
  auto short_rows = ParseRowsEvent(h, short_body, fd);
  ASSERT_TRUE(short_rows.ok());
  EXPECT_EQ(DecodeRows(*short_rows, *map, forms,
                       [](const RowImage&, const RowImage&) { return Status::OK(); })
                .code(),
            StatusCode::kCorruption);
}

}  // namespace
}  // namespace ferry::source::binlog
