// The binary log's events from their bytes (binlog_events.h). Layouts follow the server's own
// writers (MariaDB log_event_server.cc, field.cc); every read goes through Reader, which checks
// the bytes are there first, so a damaged event is kCorruption and never a read past its end.
#include "ferry/source/mysql/binlog_events.h"

#include <iconv.h>
#include <zlib.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "ferry/base/assert.h"
#include "ferry/clients/mysql/mysql_server.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::source::binlog {
namespace {

// MYSQL_TYPE_* of the table map's type bytes.
enum FieldType : uint8_t {
  kTypeDecimal = 0,
  kTypeTiny = 1,
  kTypeShort = 2,
  kTypeLong = 3,
  kTypeFloat = 4,
  kTypeDouble = 5,
  kTypeNull = 6,
  kTypeTimestamp = 7,
  kTypeLongLong = 8,
  kTypeInt24 = 9,
  kTypeDate = 10,
  kTypeTime = 11,
  kTypeDatetime = 12,
  kTypeYear = 13,
  kTypeNewDate = 14,
  kTypeVarchar = 15,
  kTypeBit = 16,
  kTypeTimestamp2 = 17,
  kTypeDatetime2 = 18,
  kTypeTime2 = 19,
  kTypeJson = 245,
  kTypeNewDecimal = 246,
  kTypeEnum = 247,
  kTypeSet = 248,
  kTypeTinyBlob = 249,
  kTypeMediumBlob = 250,
  kTypeLongBlob = 251,
  kTypeBlob = 252,
  kTypeVarString = 253,
  kTypeString = 254,
  kTypeGeometry = 255,
};

std::string EventName(uint8_t type) {
  switch (type) {
    case kQueryEvent:
      return "QUERY";
    case kRotateEvent:
      return "ROTATE";
    case kFormatDescriptionEvent:
      return "FORMAT_DESCRIPTION";
    case kXidEvent:
      return "XID";
    case kTableMapEvent:
      return "TABLE_MAP";
    case kWriteRowsV1:
    case kWriteRowsV2:
      return "WRITE_ROWS";
    case kUpdateRowsV1:
    case kUpdateRowsV2:
      return "UPDATE_ROWS";
    case kDeleteRowsV1:
    case kDeleteRowsV2:
      return "DELETE_ROWS";
    case kMysqlGtidEvent:
      return "GTID";
    case kMariaGtidEvent:
      return "MariaDB GTID";
    default:
      return "event type " + std::to_string(type);
  }
}

// Sequential little-endian reads over one event's bytes; each says what it read when the bytes
// run out (`what` names the event in messages).
class Reader {
 public:
  Reader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}

  size_t remaining() const { return data_.size() - pos_; }
  bool empty() const { return pos_ == data_.size(); }
  std::string_view rest() const { return data_.substr(pos_); }

  Status Short(std::string_view field, size_t need) const {
    return Status::Corruption(what_ + " event is truncated: " + std::string(field) + " needs " +
                              std::to_string(need) + " bytes at offset " + std::to_string(pos_) +
                              ", " + std::to_string(remaining()) + " left");
  }
  Status Bytes(size_t n, std::string_view field, std::string_view* out) {
    if (n > remaining()) return Short(field, n);
    *out = data_.substr(pos_, n);
    pos_ += n;
    return Status::OK();
  }
  Status Skip(size_t n, std::string_view field) {
    std::string_view unused;
    return Bytes(n, field, &unused);
  }
  // An unsigned little-endian integer of n (1..8) bytes.
  Status Le(size_t n, std::string_view field, uint64_t* out) {
    std::string_view b;
    FERRY_RETURN_IF_ERROR(Bytes(n, field, &b));
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
    *out = v;
    return Status::OK();
  }
  template <typename T>
  Status LeAs(size_t n, std::string_view field, T* out) {
    uint64_t v = 0;
    FERRY_RETURN_IF_ERROR(Le(n, field, &v));
    *out = static_cast<T>(v);
    return Status::OK();
  }
  // The protocol's length-encoded integer (packed: < 251 one byte; 0xfc 2, 0xfd 3, 0xfe 8).
  Status Packed(std::string_view field, uint64_t* out) {
    uint64_t first = 0;
    FERRY_RETURN_IF_ERROR(Le(1, field, &first));
    if (first < 0xfb) {
      *out = first;
      return Status::OK();
    }
    if (first == 0xfc) return Le(2, field, out);
    if (first == 0xfd) return Le(3, field, out);
    if (first == 0xfe) return Le(8, field, out);
    return Status::Corruption(what_ + " event: " + std::string(field) +
                              " has the invalid length byte 0x" +
                              (first == 0xfb ? std::string("fb") : std::string("ff")));
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
  std::string what_;
};

uint64_t LeAt(std::string_view b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}
uint64_t BeOf(std::string_view b) {
  uint64_t v = 0;
  for (char c : b) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

bool Bit(std::string_view bitmap, size_t i) {
  return (static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1;
}

// The post-header length the format description gives `type`, or `fallback` when it lists none.
size_t PostHeaderLen(const FormatDescription& fd, uint8_t type, size_t fallback) {
  if (type >= 1 && static_cast<size_t>(type) <= fd.post_header_len.size()) {
    return fd.post_header_len[type - 1];
  }
  return fallback;
}

// Whether a server of `version` writes the checksum algorithm byte into its format description
// (MySQL 5.6.1 and later, MariaDB 5.3 and later).
bool ChecksumAware(std::string_view version) {
  int parts[3] = {0, 0, 0};
  const char* p = version.data();
  const char* end = version.data() + version.size();
  for (int i = 0; i < 3 && p < end; ++i) {
    auto [next, ec] = std::from_chars(p, end, parts[i]);
    if (ec != std::errc()) break;
    p = next;
    if (p < end && *p == '.') ++p;
  }
  const bool maria = version.find("MariaDB") != std::string_view::npos;
  const int v = parts[0] * 10000 + parts[1] * 100 + parts[2];
  return maria ? v >= 50300 : v >= 50601;
}

Status ParseHeader(std::string_view event, EventHeader* h) {
  if (event.size() < kEventHeaderSize) {
    return Status::Corruption("binlog event of " + std::to_string(event.size()) +
                              " bytes is shorter than its 19-byte header");
  }
  h->timestamp = static_cast<uint32_t>(LeAt(event, 0, 4));
  h->type = static_cast<uint8_t>(event[4]);
  h->server_id = static_cast<uint32_t>(LeAt(event, 5, 4));
  h->event_size = static_cast<uint32_t>(LeAt(event, 9, 4));
  h->log_pos = static_cast<uint32_t>(LeAt(event, 13, 4));
  h->flags = static_cast<uint16_t>(LeAt(event, 17, 2));
  if (h->event_size != event.size()) {
    return Status::Corruption(EventName(h->type) + " event: its header says " +
                              std::to_string(h->event_size) + " bytes, there are " +
                              std::to_string(event.size()));
  }
  return Status::OK();
}

Status VerifyCrc(std::string_view event, uint8_t type) {
  const size_t n = event.size() - 4;
  const uint32_t want = static_cast<uint32_t>(LeAt(event, n, 4));
  if (n < kEventHeaderSize) return Status::Corruption(EventName(type) + " event is too short");
  uint32_t got = 0;
  if (type == kFormatDescriptionEvent) {
    // The server sets LOG_EVENT_BINLOG_IN_USE_F (0x1) in the first event of a file it is writing
    // and clears it when it closes the file, without changing the checksum: it is computed with
    // the flag clear.
    std::string head(event.substr(0, kEventHeaderSize));
    head[17] = static_cast<char>(static_cast<uint8_t>(head[17]) & ~1u);
    got = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(head.data()), static_cast<uInt>(head.size())));
    got = static_cast<uint32_t>(
        crc32(got, reinterpret_cast<const Bytef*>(event.data() + kEventHeaderSize),
              static_cast<uInt>(n - kEventHeaderSize)));
  } else {
    got = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(event.data()), static_cast<uInt>(n)));
  }
  if (want != got) {
    char buf[80];
    std::snprintf(buf, sizeof(buf), " event: checksum 0x%08x does not match its bytes (0x%08x)",
                  want, got);
    return Status::Corruption(EventName(type) + buf);
  }
  return Status::OK();
}

}  // namespace

Status ParseEvent(std::string_view event, const FormatDescription& fd, EventHeader* header,
                  std::string_view* body) {
  FERRY_RETURN_IF_ERROR(ParseHeader(event, header));
  size_t end = event.size();
  if (fd.checksum) {
    if (end < kEventHeaderSize + 4) {
      return Status::Corruption(EventName(header->type) +
                                " event is too short for its header and checksum");
    }
    FERRY_RETURN_IF_ERROR(VerifyCrc(event, header->type));
    end -= 4;
  }
  *body = event.substr(kEventHeaderSize, end - kEventHeaderSize);
  return Status::OK();
}

Result<FormatDescription> ParseFormatDescription(std::string_view event) {
  EventHeader h;
  FERRY_RETURN_IF_ERROR(ParseHeader(event, &h));
  if (h.type != kFormatDescriptionEvent) {
    return Status::Corruption("expected a FORMAT_DESCRIPTION event, found " + EventName(h.type));
  }
  // binlog_version 2, server_version 50, create_timestamp 4, header_length 1, then the
  // post-header lengths; a checksum-aware server ends it with the algorithm byte and 4 bytes of
  // checksum (written even when checksums are off).
  constexpr size_t kFixed = 2 + 50 + 4 + 1;
  std::string_view body = event.substr(kEventHeaderSize);
  if (body.size() < kFixed) {
    return Status::Corruption("FORMAT_DESCRIPTION event is truncated: " +
                              std::to_string(body.size()) + " bytes of body, at least 57 needed");
  }
  FormatDescription fd;
  fd.binlog_version = static_cast<uint16_t>(LeAt(body, 0, 2));
  std::string_view version = body.substr(2, 50);
  version = version.substr(0, version.find('\0'));
  fd.server_version = std::string(version);
  if (fd.binlog_version != 4) {
    return Status::NotSupported("binary log version " + std::to_string(fd.binlog_version) +
                                " (server " + fd.server_version + "): only version 4 is read");
  }
  const uint8_t header_len = static_cast<uint8_t>(body[56]);
  if (header_len != kEventHeaderSize) {
    return Status::Corruption("FORMAT_DESCRIPTION event: event headers of " +
                              std::to_string(header_len) + " bytes, 19 expected");
  }
  std::string_view lens = body.substr(kFixed);
  if (ChecksumAware(fd.server_version)) {
    if (lens.size() < 5) {
      return Status::Corruption(
          "FORMAT_DESCRIPTION event is truncated: no room for its checksum algorithm and "
          "checksum");
    }
    const uint8_t alg = static_cast<uint8_t>(lens[lens.size() - 5]);
    if (alg == 1) {
      FERRY_RETURN_IF_ERROR(VerifyCrc(event, h.type));
      fd.checksum = true;
    } else if (alg != 0 && alg != 0xff) {
      return Status::NotSupported("binary log checksum algorithm " + std::to_string(alg) +
                                  ": only CRC32 (1) and none (0) are read");
    }
    lens = lens.substr(0, lens.size() - 5);
  }
  fd.post_header_len.assign(lens.begin(), lens.end());
  return fd;
}

Result<Rotate> ParseRotate(std::string_view body) {
  Reader r(body, "ROTATE");
  Rotate rot;
  FERRY_RETURN_IF_ERROR(r.Le(8, "position", &rot.position));
  rot.file = std::string(r.rest());
  if (rot.file.empty()) return Status::Corruption("ROTATE event names no file");
  return rot;
}

Result<Query> ParseQuery(std::string_view body, const FormatDescription& fd) {
  const size_t post = PostHeaderLen(fd, kQueryEvent, 13);
  if (post < 11) {
    return Status::Corruption("QUERY events with a post-header of " + std::to_string(post) +
                              " bytes (at least 11 expected)");
  }
  Reader r(body, "QUERY");
  Query q;
  uint64_t db_len = 0, status_len = 0;
  FERRY_RETURN_IF_ERROR(r.LeAs(4, "thread id", &q.thread_id));
  FERRY_RETURN_IF_ERROR(r.Skip(4, "execution time"));
  FERRY_RETURN_IF_ERROR(r.Le(1, "database length", &db_len));
  FERRY_RETURN_IF_ERROR(r.LeAs(2, "error code", &q.error_code));
  if (post >= 13) FERRY_RETURN_IF_ERROR(r.Le(2, "status variables length", &status_len));
  FERRY_RETURN_IF_ERROR(r.Skip(post - (post >= 13 ? 13 : 11), "post-header"));
  FERRY_RETURN_IF_ERROR(r.Skip(status_len, "status variables"));
  std::string_view db;
  FERRY_RETURN_IF_ERROR(r.Bytes(db_len, "database", &db));
  FERRY_RETURN_IF_ERROR(r.Skip(1, "database terminator"));
  q.database = std::string(db);
  q.sql = std::string(r.rest());
  return q;
}

Result<uint64_t> ParseXid(std::string_view body) {
  Reader r(body, "XID");
  uint64_t xid = 0;
  FERRY_RETURN_IF_ERROR(r.Le(8, "xid", &xid));
  return xid;
}

Result<MariaGtid> ParseMariaGtid(const EventHeader& header, std::string_view body) {
  Reader r(body, "MariaDB GTID");
  MariaGtid g;
  FERRY_RETURN_IF_ERROR(r.Le(8, "sequence number", &g.sequence));
  FERRY_RETURN_IF_ERROR(r.LeAs(4, "domain id", &g.domain));
  FERRY_RETURN_IF_ERROR(r.LeAs(1, "flags", &g.flags));
  g.server_id = header.server_id;
  return g;
}

Result<MysqlGtid> ParseMysqlGtid(std::string_view body) {
  Reader r(body, "GTID");
  std::string_view sid;
  FERRY_RETURN_IF_ERROR(r.Skip(1, "flags"));
  FERRY_RETURN_IF_ERROR(r.Bytes(16, "source uuid", &sid));
  MysqlGtid g;
  FERRY_RETURN_IF_ERROR(r.LeAs(8, "transaction number", &g.number));
  uint8_t bytes[16];
  std::memcpy(bytes, sid.data(), 16);
  g.uuid = FormatUuid(bytes);
  return g;
}

namespace {

// Whether the table map's signedness metadata has a bit for columns of `type`.
bool NumericType(uint8_t type) {
  switch (type) {
    case kTypeTiny:
    case kTypeShort:
    case kTypeInt24:
    case kTypeLong:
    case kTypeLongLong:
    case kTypeFloat:
    case kTypeDouble:
    case kTypeNewDecimal:
    case kTypeDecimal:
      return true;
    default:
      return false;
  }
}

// Reads column `i`'s metadata from the table map's metadata block into `c` (type and meta as
// MapColumn documents them: VARCHAR its maximum length in bytes, CHAR its length in bytes with
// ENUM/SET resolved to their real type and meta their storage size, NEWDECIMAL precision << 8 |
// scale, BIT bytes << 8 | leftover bits, BLOB/TEXT/JSON/GEOMETRY the size of the length prefix,
// FLOAT/DOUBLE their size, the fsp of TIME2/DATETIME2/TIMESTAMP2).
Status ReadColumnMeta(Reader& r, MapColumn* c) {
  uint64_t v = 0;
  switch (c->type) {
    case kTypeFloat:
    case kTypeDouble:
    case kTypeBlob:
    case kTypeTinyBlob:
    case kTypeMediumBlob:
    case kTypeLongBlob:
    case kTypeGeometry:
    case kTypeJson:
    case kTypeTime2:
    case kTypeDatetime2:
    case kTypeTimestamp2:
      FERRY_RETURN_IF_ERROR(r.Le(1, "column metadata", &v));
      c->meta = static_cast<uint16_t>(v);
      return Status::OK();
    case kTypeVarchar:
    case kTypeVarString:
    case kTypeBit:
      FERRY_RETURN_IF_ERROR(r.Le(2, "column metadata", &v));
      c->meta = static_cast<uint16_t>(v);
      return Status::OK();
    case kTypeNewDecimal: {
      std::string_view b;
      FERRY_RETURN_IF_ERROR(r.Bytes(2, "column metadata", &b));
      c->meta =
          static_cast<uint16_t>((static_cast<uint8_t>(b[0]) << 8) | static_cast<uint8_t>(b[1]));
      return Status::OK();
    }
    case kTypeString:
    case kTypeEnum:
    case kTypeSet: {
      std::string_view b;
      FERRY_RETURN_IF_ERROR(r.Bytes(2, "column metadata", &b));
      const uint8_t b0 = static_cast<uint8_t>(b[0]), b1 = static_cast<uint8_t>(b[1]);
      if (b0 == kTypeEnum || b0 == kTypeSet) {
        c->type = b0;
        c->meta = b1;
      } else if ((b0 & 0x30) != 0x30) {
        // A CHAR longer than 255 bytes keeps bits 8 and 9 of its length, inverted, in the
        // type byte.
        c->type = static_cast<uint8_t>(b0 | 0x30);
        c->meta = static_cast<uint16_t>(b1 | (((b0 & 0x30) ^ 0x30) << 4));
      } else {
        c->type = b0;
        c->meta = b1;
      }
      return Status::OK();
    }
    default:
      c->meta = 0;
      return Status::OK();
  }
}

Status ParseOptionalMetadata(Reader& r, TableMap* map) {
  while (!r.empty()) {
    uint64_t kind = 0, len = 0;
    std::string_view value;
    FERRY_RETURN_IF_ERROR(r.Le(1, "optional metadata type", &kind));
    FERRY_RETURN_IF_ERROR(r.Packed("optional metadata length", &len));
    FERRY_RETURN_IF_ERROR(r.Bytes(len, "optional metadata", &value));
    if (kind == 1) {  // SIGNEDNESS: one bit per numeric column, most significant first
      map->is_unsigned.assign(map->columns.size(), false);
      size_t n = 0;
      for (size_t i = 0; i < map->columns.size(); ++i) {
        if (!NumericType(map->columns[i].type)) continue;
        if (n / 8 >= value.size()) {
          return Status::Corruption("TABLE_MAP event: signedness metadata is too short");
        }
        map->is_unsigned[i] = (static_cast<uint8_t>(value[n / 8]) >> (7 - n % 8)) & 1;
        ++n;
      }
    } else if (kind == 5 || kind == 6) {  // SET_STR_VALUE, ENUM_STR_VALUE: per such column
      const uint8_t type = kind == 5 ? kTypeSet : kTypeEnum;
      Reader lists(value, "TABLE_MAP");
      map->labels.resize(map->columns.size());
      for (size_t i = 0; i < map->columns.size(); ++i) {
        if (map->columns[i].type != type) continue;
        uint64_t count = 0;
        FERRY_RETURN_IF_ERROR(lists.Packed("label count", &count));
        if (count > lists.remaining()) return lists.Short("labels", count);
        for (uint64_t k = 0; k < count; ++k) {
          uint64_t n = 0;
          std::string_view label;
          FERRY_RETURN_IF_ERROR(lists.Packed("label length", &n));
          FERRY_RETURN_IF_ERROR(lists.Bytes(n, "label", &label));
          map->labels[i].emplace_back(label);
        }
      }
    } else if (kind == 4) {  // COLUMN_NAME: each a length-prefixed string
      Reader names(value, "TABLE_MAP");
      map->column_names.clear();
      while (!names.empty()) {
        uint64_t n = 0;
        std::string_view name;
        FERRY_RETURN_IF_ERROR(names.Packed("column name length", &n));
        FERRY_RETURN_IF_ERROR(names.Bytes(n, "column name", &name));
        map->column_names.emplace_back(name);
      }
      if (map->column_names.size() != map->columns.size()) {
        return Status::Corruption("TABLE_MAP event: " + std::to_string(map->column_names.size()) +
                                  " column names for " + std::to_string(map->columns.size()) +
                                  " columns");
      }
    }
  }
  return Status::OK();
}

}  // namespace

Result<TableMap> ParseTableMap(std::string_view body, const FormatDescription& fd) {
  const size_t post = PostHeaderLen(fd, kTableMapEvent, 8);
  if (post < 6) {
    return Status::Corruption("TABLE_MAP events with a post-header of " + std::to_string(post) +
                              " bytes");
  }
  Reader r(body, "TABLE_MAP");
  TableMap map;
  const size_t id_len = post == 6 ? 4 : 6;
  FERRY_RETURN_IF_ERROR(r.Le(id_len, "table id", &map.table_id));
  FERRY_RETURN_IF_ERROR(r.LeAs(2, "flags", &map.flags));
  FERRY_RETURN_IF_ERROR(r.Skip(post - id_len - 2, "post-header"));
  uint64_t len = 0;
  std::string_view s;
  FERRY_RETURN_IF_ERROR(r.Le(1, "database name length", &len));
  FERRY_RETURN_IF_ERROR(r.Bytes(len, "database name", &s));
  map.database = std::string(s);
  FERRY_RETURN_IF_ERROR(r.Skip(1, "database name terminator"));
  FERRY_RETURN_IF_ERROR(r.Le(1, "table name length", &len));
  FERRY_RETURN_IF_ERROR(r.Bytes(len, "table name", &s));
  map.table = std::string(s);
  FERRY_RETURN_IF_ERROR(r.Skip(1, "table name terminator"));
  uint64_t ncols = 0;
  FERRY_RETURN_IF_ERROR(r.Packed("column count", &ncols));
  std::string_view types;
  FERRY_RETURN_IF_ERROR(r.Bytes(ncols, "column types", &types));  // fails before any big resize
  map.columns.resize(ncols);
  for (size_t i = 0; i < ncols; ++i) map.columns[i].type = static_cast<uint8_t>(types[i]);
  uint64_t meta_len = 0;
  std::string_view meta;
  FERRY_RETURN_IF_ERROR(r.Packed("metadata length", &meta_len));
  FERRY_RETURN_IF_ERROR(r.Bytes(meta_len, "column metadata", &meta));
  Reader m(meta, "TABLE_MAP");
  for (auto& c : map.columns) FERRY_RETURN_IF_ERROR(ReadColumnMeta(m, &c));
  if (!m.empty()) {
    return Status::Corruption("TABLE_MAP event: " + std::to_string(m.remaining()) +
                              " bytes of column metadata left over");
  }
  std::string_view nulls;
  FERRY_RETURN_IF_ERROR(r.Bytes((ncols + 7) / 8, "null bitmap", &nulls));
  for (size_t i = 0; i < ncols; ++i) map.columns[i].nullable = Bit(nulls, i);
  FERRY_RETURN_IF_ERROR(ParseOptionalMetadata(r, &map));
  return map;
}

bool IsRowsEvent(uint8_t type) {
  return (type >= kWriteRowsV1 && type <= kDeleteRowsV1) ||
         (type >= kWriteRowsV2 && type <= kDeleteRowsV2);
}

Result<RowsEvent> ParseRowsEvent(const EventHeader& header, std::string_view body,
                                 const FormatDescription& fd) {
  if (!IsRowsEvent(header.type)) {
    return Status::InvalidArgument(EventName(header.type) + " is not a rows event");
  }
  const bool v2 = header.type >= kWriteRowsV2;
  const uint8_t base = v2 ? kWriteRowsV2 : kWriteRowsV1;
  RowsEvent ev;
  ev.kind = header.type == base       ? RowsEvent::Kind::kWrite
            : header.type == base + 1 ? RowsEvent::Kind::kUpdate
                                      : RowsEvent::Kind::kDelete;
  const std::string name = EventName(header.type);
  const size_t post = PostHeaderLen(fd, header.type, v2 ? 10 : 8);
  if (post < 6) {
    return Status::Corruption(name + " events with a post-header of " + std::to_string(post) +
                              " bytes");
  }
  Reader r(body, name);
  const size_t id_len = post == 6 ? 4 : 6;
  FERRY_RETURN_IF_ERROR(r.Le(id_len, "table id", &ev.table_id));
  FERRY_RETURN_IF_ERROR(r.LeAs(2, "flags", &ev.flags));
  size_t used = id_len + 2;
  if (v2 && post >= 10) {
    uint64_t extra = 0;
    FERRY_RETURN_IF_ERROR(r.Le(2, "extra data length", &extra));
    if (extra < 2) return Status::Corruption(name + " event: extra data length below 2");
    used += 2;
    FERRY_RETURN_IF_ERROR(r.Skip(post - used, "post-header"));
    FERRY_RETURN_IF_ERROR(r.Skip(extra - 2, "extra data"));
  } else {
    FERRY_RETURN_IF_ERROR(r.Skip(post - used, "post-header"));
  }
  uint64_t ncols = 0;
  FERRY_RETURN_IF_ERROR(r.Packed("column count", &ncols));
  std::string_view bits;
  FERRY_RETURN_IF_ERROR(r.Bytes((ncols + 7) / 8, "columns-present bitmap", &bits));
  ev.column_count = ncols;
  ev.present.resize(ncols);
  for (size_t i = 0; i < ncols; ++i) ev.present[i] = Bit(bits, i);
  if (ev.kind == RowsEvent::Kind::kUpdate) {
    FERRY_RETURN_IF_ERROR(r.Bytes((ncols + 7) / 8, "after-image columns-present bitmap", &bits));
    ev.present_after.resize(ncols);
    for (size_t i = 0; i < ncols; ++i) ev.present_after[i] = Bit(bits, i);
  }
  ev.rows = r.rest();
  return ev;
}

// ---- row values ----
namespace {

// Text of a character set other than UTF-8, converted with iconv (opened once per column).
class Iconv {
 public:
  explicit Iconv(const char* from) : cd_(iconv_open("UTF-8", from)) {}
  ~Iconv() {
    if (ok()) iconv_close(cd_);
  }
  Iconv(const Iconv&) = delete;
  Iconv& operator=(const Iconv&) = delete;
  bool ok() const { return cd_ != reinterpret_cast<iconv_t>(-1); }
  bool Convert(std::string_view in, std::string* out) {
    iconv(cd_, nullptr, nullptr, nullptr, nullptr);
    out->assign(in.size() * 4 + 8, '\0');
    char* src = const_cast<char*>(in.data());
    size_t src_left = in.size();
    char* dst = out->data();
    size_t dst_left = out->size();
    if (iconv(cd_, &src, &src_left, &dst, &dst_left) == static_cast<size_t>(-1)) return false;
    if (iconv(cd_, nullptr, nullptr, &dst, &dst_left) == static_cast<size_t>(-1)) return false;
    out->resize(out->size() - dst_left);
    if (ascii_low_half_) {
      // iconv's SHIFT_JIS reads 0x5c as YEN SIGN and 0x7e as OVERLINE; MySQL's sjis, like ASCII,
      // as the backslash and the tilde, and 0x815f (FULLWIDTH REVERSE SOLIDUS to iconv) as the
      // backslash too. No other character decodes to any of those.
      ReplaceAll(out, "\xc2\xa5", "\\");
      ReplaceAll(out, "\xe2\x80\xbe", "~");
      ReplaceAll(out, "\xef\xbc\xbc", "\\");  // 0x815f, MySQL's backslash as well
    }
    return true;
  }
  void set_ascii_low_half() { ascii_low_half_ = true; }
  // Whether a private-use character in the output means iconv and the server disagree.
  bool private_use() const { return private_use_; }
  void set_private_use() { private_use_ = true; }

 private:
  static void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
    for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
      s->replace(at, from.size(), to);
    }
  }
  iconv_t cd_;
  bool ascii_low_half_ = false;
  bool private_use_ = false;
};

// iconv's name of a MySQL character set (those not converted by hand).
const char* IconvName(std::string_view cs) {
  static constexpr std::pair<std::string_view, const char*> kNames[] = {
      {"ucs2", "UCS-2BE"},
      {"utf16", "UTF-16BE"},
      {"utf16le", "UTF-16LE"},
      {"utf32", "UTF-32BE"},
      {"big5", "BIG5"},  // without the ETEN extensions: refused (private use) below
      {"cp850", "CP850"},
      {"hp8", "HP-ROMAN8"},
      {"koi8r", "KOI8-R"},
      {"latin2", "ISO-8859-2"},
      {"ujis", "EUC-JP"},
      {"sjis", "SHIFT_JIS"},
      {"hebrew", "ISO-8859-8"},
      {"tis620", "TIS-620"},
      {"euckr", "EUC-KR"},
      {"koi8u", "KOI8-U"},
      {"gb2312", "GB2312"},
      {"greek", "ISO-8859-7"},
      {"cp1250", "CP1250"},
      {"gbk", "GBK"},
      {"gb18030", "GB18030"},
      {"latin5", "ISO-8859-9"},
      {"armscii8", "ARMSCII-8"},
      {"cp866", "CP866"},
      {"macce", "MAC-CENTRALEUROPE"},
      {"macroman", "MACINTOSH"},
      {"cp852", "CP852"},
      {"latin7", "ISO-8859-13"},
      {"cp1251", "CP1251"},
      {"cp1256", "CP1256"},
      {"cp1257", "CP1257"},
      {"cp932", "CP932"},
      {"eucjpms", "EUC-JP-MS"},
  };
  for (const auto& [name, iconv_name] : kNames) {
    if (name == cs) return iconv_name;
  }
  return nullptr;
}

// MySQL's latin1 is Windows-1252, with the five bytes 1252 leaves undefined (0x81, 0x8d, 0x8f,
// 0x90, 0x9d) mapped to the C1 controls of the same number: every byte converts.
constexpr std::array<uint16_t, 32> kLatin1High = {
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178};

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// A row image's column: how its bytes become the snapshot's text. Built once per DecodeRows.
struct ColumnPlan {
  const MapColumn* map = nullptr;
  const ColumnForm* form = nullptr;
  bool is_unsigned = false;
  enum class Charset { kUtf8, kLatin1, kAscii, kIconv } charset = Charset::kUtf8;
  std::unique_ptr<Iconv> iconv;
  std::vector<std::string> labels;  // enum and set
  // The labels come from COLUMN_TYPE, which is utf8mb3: a '?' in one may be a 4-byte character.
  bool labels_unsure = false;
  // ZEROFILL: the server pads the text with zeros in front to this width (int(n): n; double:
  // 22 or M of double(M,D); decimal(p,s): p - s integer digits).
  int zerofill_width = 0;
  int fixed_decimals = -1;  // double(M,D): the server prints D decimals
  enum class Special { kNone, kInet4, kInet6, kUuid, kBinaryPad } special = Special::kNone;
  // A column no stream column takes (ColumnForm without a column): its bytes are read past.
  bool skip = false;
  // Its values are given in ferry's binary form (RowDecoder::SetTypedColumns), not as text.
  bool typed = false;
};

std::string ColumnName(const ColumnPlan& p) {
  return ferry::mysql::QuoteIdent(p.form->column.name);
}

Status Mismatch(const ColumnPlan& p, const std::string& what) {
  return Status::InvalidArgument("column " + ColumnName(p) + " (" + p.form->column.column_type +
                                 "): " + what +
                                 " (the table changed since it was discovered? run discover)");
}

Status UnsureLabel(const ColumnPlan& p) {
  return Status::InvalidArgument(
      "column " + ColumnName(p) +
      ": its value's label has a '?', which information_schema also "
      "shows for characters beyond 3 bytes of UTF-8: the label cannot be known for sure; set "
      "binlog_row_metadata = FULL on the server (the log then holds the labels)");
}

// The labels of `enum('a','b''c')` / `set(...)` as COLUMN_TYPE prints them: quotes doubled,
// backslashes escaped.
Result<std::vector<std::string>> ParseLabels(std::string_view type) {
  std::vector<std::string> out;
  const size_t open = type.find('(');
  if (open == std::string_view::npos)
    return Status::InvalidArgument("no labels in " + std::string(type));
  size_t i = open + 1;
  while (i < type.size()) {
    if (type[i] != '\'') break;
    ++i;
    std::string label;
    bool closed = false;
    while (i < type.size()) {
      const char c = type[i];
      if (c == '\'') {
        if (i + 1 < type.size() && type[i + 1] == '\'') {
          label.push_back('\'');
          i += 2;
          continue;
        }
        ++i;
        closed = true;
        break;
      }
      if (c == '\\' && i + 1 < type.size()) {
        const char e = type[i + 1];
        label.push_back(e == '0'   ? '\0'
                        : e == 'n' ? '\n'
                        : e == 'r' ? '\r'
                        : e == 'Z' ? '\032'
                        : e == 't' ? '\t'
                                   : e);
        i += 2;
        continue;
      }
      label.push_back(c);
      ++i;
    }
    if (!closed) break;
    out.push_back(std::move(label));
    if (i < type.size() && type[i] == ',') {
      ++i;
      continue;
    }
    if (i < type.size() && type[i] == ')') return out;
    break;
  }
  return Status::InvalidArgument("cannot read the labels of " + std::string(type.substr(0, 200)));
}

bool AllowedWire(uint8_t type, MysqlWire w) {
  switch (type) {
    case kTypeTiny:
    case kTypeShort:
    case kTypeInt24:
    case kTypeLong:
    case kTypeLongLong:
      // Integers also go into columns widened since to decimals or floating point (the log is
      // older than the table): their text converts exactly or is refused there.
      return w == MysqlWire::kInt32 || w == MysqlWire::kInt64 || w == MysqlWire::kUnsigned64 ||
             w == MysqlWire::kDecimal || w == MysqlWire::kDecimalText || w == MysqlWire::kDouble ||
             w == MysqlWire::kFloat;
    case kTypeFloat:
      return w == MysqlWire::kFloat || w == MysqlWire::kDouble;
    case kTypeDouble:
      return w == MysqlWire::kDouble;
    case kTypeNewDecimal:
      return w == MysqlWire::kDecimal || w == MysqlWire::kDecimalText;
    case kTypeBit:
      return w == MysqlWire::kBitBool || w == MysqlWire::kBitInt || w == MysqlWire::kBitUnsigned64;
    case kTypeDate:
    case kTypeNewDate:
      return w == MysqlWire::kDate;
    case kTypeDatetime:
    case kTypeDatetime2:
      return w == MysqlWire::kDatetime;
    case kTypeTimestamp:
    case kTypeTimestamp2:
      return w == MysqlWire::kTimestamp;
    case kTypeTime:
    case kTypeTime2:
      return w == MysqlWire::kTime;
    case kTypeYear:
      return w == MysqlWire::kYear;
    case kTypeString:
      return w == MysqlWire::kText || w == MysqlWire::kBinary || w == MysqlWire::kUuid;
    case kTypeVarchar:
    case kTypeVarString:
    case kTypeBlob:
    case kTypeTinyBlob:
    case kTypeMediumBlob:
    case kTypeLongBlob:
    case kTypeEnum:
    case kTypeSet:
    case kTypeJson:
      return w == MysqlWire::kText || w == MysqlWire::kBinary;
    case kTypeNull:
      return true;
    default:
      return false;
  }
}

Status ToUtf8(ColumnPlan& p, std::string_view in, std::string* out, std::string_view* view);

// How column `mc` of the table map reads as `form` (map_labels: the map's own ENUM/SET labels,
// when it has them).
Status MakePlan(const MapColumn& mc, const ColumnForm& form, bool map_unsigned,
                const std::vector<std::string>* map_labels, ColumnPlan* p) {
  p->map = &mc;
  p->form = &form;
  const MysqlColumn& col = form.column;
  if (col.name.empty() && col.data_type.empty()) {
    p->skip = true;
    return Status::OK();
  }
  if (mc.type == kTypeGeometry) {
    return Status::NotSupported("column " + ColumnName(*p) + " (" + col.column_type +
                                "): geometry values are not read from the binary log");
  }
  if (!AllowedWire(mc.type, form.wire)) {
    return Mismatch(*p, "the binary log holds it as type " + std::to_string(mc.type) +
                            ", which is not what discovery found");
  }
  if ((mc.type == kTypeTime || mc.type == kTypeDatetime || mc.type == kTypeTimestamp) &&
      col.column_type.find('(') != std::string::npos &&
      col.column_type.find("(0)") == std::string::npos) {
    // MariaDB's own format of fractional seconds from before 10.1 (mysql56_temporal_format=OFF)
    // is logged under the old type numbers without metadata: its size cannot be known.
    return Status::NotSupported(
        "column " + ColumnName(*p) + " (" + col.column_type +
        ") is stored in MariaDB's old format of fractional seconds, which the binary log does not "
        "describe; convert the table with ALTER TABLE ... FORCE (mysql56_temporal_format=ON)");
  }
  p->is_unsigned = col.column_type.empty() ? map_unsigned
                                           : col.column_type.find("unsigned") != std::string::npos;
  const bool integer = mc.type == kTypeTiny || mc.type == kTypeShort || mc.type == kTypeInt24 ||
                       mc.type == kTypeLong || mc.type == kTypeLongLong;
  // "(M" and ",D" of the column type, when it has them.
  int type_m = 0, type_d = -1;
  if (const size_t open = col.column_type.find('('); open != std::string::npos) {
    const char* end = col.column_type.data() + col.column_type.size();
    auto [next, ec] = std::from_chars(col.column_type.data() + open + 1, end, type_m);
    if (ec == std::errc() && next < end && *next == ',') std::from_chars(next + 1, end, type_d);
  }
  const bool zerofill = col.column_type.find("zerofill") != std::string::npos;  // unsigned too
  if (integer && zerofill) p->zerofill_width = type_m;
  if (mc.type == kTypeDouble) {
    // (A float is read as CAST(f AS DOUBLE), which has neither.)
    p->fixed_decimals = type_d <= 30 ? type_d : -1;  // (the server allows up to 30)
    if (zerofill) p->zerofill_width = type_m > 0 ? type_m : 22;
  }
  if (mc.type == kTypeNewDecimal && zerofill) {
    const int scale = mc.meta & 0xFF;
    p->zerofill_width = (mc.meta >> 8) - scale + (scale > 0 ? scale + 1 : 0);
  }
  // A decimal of another precision or scale in the log than discovered (the column was changed
  // since these changes were made) is decoded as the log has it; its text converts into the
  // discovered type exactly, or is refused there.
  if (mc.type == kTypeString) {
    if (form.wire == MysqlWire::kUuid) {
      if (mc.meta != 16) return Mismatch(*p, "a uuid that is not 16 bytes in the binary log");
      p->special = ColumnPlan::Special::kUuid;
    } else if (col.data_type == "inet4") {
      if (mc.meta != 4) return Mismatch(*p, "an inet4 that is not 4 bytes in the binary log");
      p->special = ColumnPlan::Special::kInet4;
    } else if (col.data_type == "inet6") {
      if (mc.meta != 16) return Mismatch(*p, "an inet6 that is not 16 bytes in the binary log");
      p->special = ColumnPlan::Special::kInet6;
    } else if (form.wire == MysqlWire::kBinary) {
      p->special = ColumnPlan::Special::kBinaryPad;
    }
  }
  if (form.wire == MysqlWire::kText && p->special == ColumnPlan::Special::kNone) {
    std::string cs = col.charset;
    for (char& c : cs) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (cs.empty() || cs == "utf8mb4" || cs == "utf8mb3" || cs == "utf8") {
      p->charset = ColumnPlan::Charset::kUtf8;
    } else if (cs == "latin1") {
      p->charset = ColumnPlan::Charset::kLatin1;
    } else if (cs == "ascii") {
      p->charset = ColumnPlan::Charset::kAscii;
    } else {
      const char* name = IconvName(cs);
      if (name) p->iconv = std::make_unique<Iconv>(name);
      if (name && cs == "sjis") p->iconv->set_ascii_low_half();
      if (name && cs == "big5") p->iconv->set_private_use();
      if (!name || !p->iconv->ok()) {
        return Status::NotSupported("column " + ColumnName(*p) + ": text in character set " + cs +
                                    " is not converted from the binary log");
      }
      p->charset = ColumnPlan::Charset::kIconv;
    }
  }
  if (mc.type == kTypeEnum || mc.type == kTypeSet) {
    if (map_labels != nullptr && !map_labels->empty()) {
      for (const std::string& raw : *map_labels) {
        std::string text;
        std::string_view view;
        FERRY_RETURN_IF_ERROR(ToUtf8(*p, raw, &text, &view));
        p->labels.emplace_back(view);
      }
    } else {
      auto labels = ParseLabels(col.column_type);
      if (!labels.ok()) return Mismatch(*p, labels.status().message());
      p->labels = std::move(labels).value();
      p->labels_unsure = true;
    }
  }
  return Status::OK();
}

// Whether UTF-8 `s` holds a character of the private use area U+E000..U+F8FF (lead byte 0xee,
// or 0xef then 0x80..0xa3; lead bytes never occur as continuation bytes).
bool HasPrivateUse(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c == 0xee) return true;
    if (c == 0xef && i + 1 < s.size() && static_cast<uint8_t>(s[i + 1]) <= 0xa3) return true;
  }
  return false;
}

// Text bytes of column `p` → UTF-8 in `*out` (or `*view` left as it is when it already is).
Status ToUtf8(ColumnPlan& p, std::string_view in, std::string* out, std::string_view* view) {
  auto invalid = [&](const std::string& cs) {
    return Status::InvalidArgument("column " + ColumnName(p) + ": bytes that are not valid " + cs +
                                   " in the binary log");
  };
  switch (p.charset) {
    case ColumnPlan::Charset::kUtf8:
      if (!ValidUtf8(in))
        return invalid(p.form->column.charset.empty() ? "utf8mb4" : p.form->column.charset);
      *view = in;
      return Status::OK();
    case ColumnPlan::Charset::kAscii:
      for (char c : in) {
        if (static_cast<uint8_t>(c) >= 0x80) return invalid("ascii");
      }
      *view = in;
      return Status::OK();
    case ColumnPlan::Charset::kLatin1: {
      out->clear();
      for (char ch : in) {
        const uint8_t c = static_cast<uint8_t>(ch);
        AppendUtf8(c >= 0x80 && c < 0xA0 ? kLatin1High[c - 0x80] : c, out);
      }
      *view = *out;
      return Status::OK();
    }
    case ColumnPlan::Charset::kIconv:
      if (!p.iconv->Convert(in, out) || !ValidUtf8(*out)) return invalid(p.form->column.charset);
      if (p.iconv->private_use() && HasPrivateUse(*out)) {
        // Where iconv puts what MySQL maps to real characters (big5's ETEN extensions: Cyrillic,
        // kana, box drawing).
        return Status::NotSupported("column " + ColumnName(p) + ": characters of " +
                                    p.form->column.charset +
                                    " that iconv converts differently from the server");
      }
      *view = *out;
      return Status::OK();
  }
  return Status::Internal("unknown character set plan");
}

void Append2(std::string* out, unsigned v) {
  out->push_back(static_cast<char>('0' + (v / 10) % 10));
  out->push_back(static_cast<char>('0' + v % 10));
}
void AppendN(std::string* out, uint64_t v, int width) {
  char buf[24];
  char* const end = buf + sizeof buf;
  char* p = end;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  const int n = static_cast<int>(end - p);
  if (width > n) out->append(static_cast<size_t>(width - n), '0');
  out->append(p, static_cast<size_t>(n));
}
// Exactly `width` digits of v (v < 10^width) at `to`.
void PutDigits(char* to, uint64_t v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    to[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
}
// ".ffffff" cut to `fsp` digits (nothing for fsp 0).
void AppendFraction(std::string* out, uint32_t micros, unsigned fsp) {
  if (fsp == 0) return;
  std::string digits;
  AppendN(&digits, micros, 6);
  out->push_back('.');
  out->append(digits, 0, fsp);
}
void AppendDate(std::string* out, uint64_t y, unsigned m, unsigned d) {
  AppendN(out, y, 4);
  out->push_back('-');
  Append2(out, m);
  out->push_back('-');
  Append2(out, d);
}
void AppendClock(std::string* out, uint64_t h, unsigned m, unsigned s) {
  AppendN(out, h, 2);
  out->push_back(':');
  Append2(out, m);
  out->push_back(':');
  Append2(out, s);
}

// Days since 1970-01-01 → civil date (proleptic Gregorian).
void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t yy = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yy + (*m <= 2 ? 1 : 0);
}

// The shortest digits of finite, non-zero |v| that read back as v, and where the decimal point
// falls among them (decpt digits before it; may be <= 0 or beyond the digits).
void ShortestDigits(double v, std::string* digits, int* decpt) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  const size_t e = sci.find('e');
  digits->clear();
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits->push_back(c);
  }
  int exp10 = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp10);
  *decpt = exp10 + 1;
}

// The server's text of a double(M,D) value: its shortest digits in positional notation with
// exactly D decimals (the stored value was rounded to D decimals, so they fit; when they do not,
// the value correctly rounded to D).
void AppendFixedDouble(std::string* out, double v, int decimals) {
  std::string digits;
  int decpt = 0;
  if (v != 0) ShortestDigits(v, &digits, &decpt);
  const int len = static_cast<int>(digits.size());
  if (v != 0 && len - decpt > decimals) {
    char buf[400];
    auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, decimals);
    if (res.ec == std::errc()) out->append(buf, res.ptr);
    return;
  }
  if (std::signbit(v) && v != 0) out->push_back('-');
  if (decpt <= 0) {
    out->push_back('0');
  } else {
    out->append(digits, 0, static_cast<size_t>(std::min(decpt, len)));
    if (decpt > len) out->append(static_cast<size_t>(decpt - len), '0');
  }
  if (decimals == 0) return;
  out->push_back('.');
  std::string frac;
  if (decpt < 0) frac.append(static_cast<size_t>(-decpt), '0');
  if (len > decpt) frac.append(digits, static_cast<size_t>(std::max(decpt, 0)));
  frac.resize(static_cast<size_t>(decimals), '0');
  out->append(frac);
}

void PadZeros(std::string* out, int width) {
  if (static_cast<int>(out->size()) < width) {
    out->insert(0, static_cast<size_t>(width) - out->size(), '0');
  }
}

// The server's text of a double (the text protocol's my_gcvt): the shortest digits that read
// back as the same double, in positional notation when the decimal point falls within 15 digits
// of the first one (and no further than 14 zeros after the point), else d.ddde[-]x.
void AppendDouble(std::string* out, double v) {
  if (v == 0) {
    out->append(std::signbit(v) ? "-0" : "0");
    return;
  }
  const bool negative = v < 0;
  std::string digits;
  int decpt = 0;
  ShortestDigits(v, &digits, &decpt);
  const int len = static_cast<int>(digits.size());
  if (negative) out->push_back('-');
  if (decpt >= -14 && (decpt <= 15 || len > decpt)) {
    if (decpt <= 0) {
      out->append("0.");
      out->append(static_cast<size_t>(-decpt), '0');
      out->append(digits);
    } else if (decpt < len) {
      out->append(digits, 0, static_cast<size_t>(decpt));
      out->push_back('.');
      out->append(digits, static_cast<size_t>(decpt));
    } else {
      out->append(digits);
      out->append(static_cast<size_t>(decpt - len), '0');
    }
    return;
  }
  out->push_back(digits[0]);
  if (len > 1) {
    out->push_back('.');
    out->append(digits, 1);
  }
  out->push_back('e');
  out->append(std::to_string(decpt - 1));
}

// NEWDECIMAL: 9 digits per 4 bytes, big-endian, the leftover digits of each side in the fewest
// bytes; the sign bit inverted, negative values with every bit inverted.
constexpr int kDigitBytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
// Reads a NEWDECIMAL value: `group(ndigits, value, fraction)` is called for each digit group in
// order (the integer part's, then the fraction's); *negative says its sign.
template <typename Group>
Status ReadDecimal(const ColumnPlan& p, Reader& r, bool* negative, Group&& group) {
  const int precision = p.map->meta >> 8, scale = p.map->meta & 0xFF;
  if (precision < 1 || precision > 65 || scale > precision) {
    return Status::Corruption("ROWS event: decimal(" + std::to_string(precision) + "," +
                              std::to_string(scale) + ") in the table map of column " +
                              ColumnName(p));
  }
  const int intg = precision - scale;
  const int intg0 = intg / 9, intg0x = intg % 9, frac0 = scale / 9, frac0x = scale % 9;
  const size_t size =
      static_cast<size_t>(intg0 * 4 + kDigitBytes[intg0x] + frac0 * 4 + kDigitBytes[frac0x]);
  std::string_view raw;
  FERRY_RETURN_IF_ERROR(r.Bytes(size, "decimal value", &raw));
  uint8_t b[32];  // 65 digits take at most 30 bytes
  std::memcpy(b, raw.data(), size);
  *negative = (b[0] & 0x80) == 0;
  b[0] ^= 0x80;
  if (*negative) {
    for (size_t i = 0; i < size; ++i) b[i] = static_cast<uint8_t>(~b[i]);
  }
  size_t at = 0;
  auto next = [&](int ndigits, bool fraction) -> Status {
    const size_t nbytes = ndigits == 9 ? 4 : static_cast<size_t>(kDigitBytes[ndigits]);
    uint64_t v = 0;
    for (size_t i = 0; i < nbytes; ++i) v = (v << 8) | b[at + i];
    at += nbytes;
    uint64_t limit = 1;
    for (int i = 0; i < ndigits; ++i) limit *= 10;
    if (v >= limit) {
      return Status::Corruption("ROWS event: a decimal digit group of column " + ColumnName(p) +
                                " holds " + std::to_string(v));
    }
    group(ndigits, v, fraction);
    return Status::OK();
  };
  if (intg0x > 0) FERRY_RETURN_IF_ERROR(next(intg0x, false));
  for (int i = 0; i < intg0; ++i) FERRY_RETURN_IF_ERROR(next(9, false));
  for (int i = 0; i < frac0; ++i) FERRY_RETURN_IF_ERROR(next(9, true));
  if (frac0x > 0) FERRY_RETURN_IF_ERROR(next(frac0x, true));
  return Status::OK();
}

Status DecodeDecimal(const ColumnPlan& p, Reader& r, std::string* out) {
  char int_digits[72], frac_digits[72];
  int n_int = 0, n_frac = 0;
  bool negative = false;
  FERRY_RETURN_IF_ERROR(ReadDecimal(p, r, &negative, [&](int ndigits, uint64_t v, bool fraction) {
    PutDigits((fraction ? frac_digits : int_digits) + (fraction ? n_frac : n_int), v, ndigits);
    (fraction ? n_frac : n_int) += ndigits;
  }));
  const int scale = p.map->meta & 0xFF;
  int first = 0;
  while (first < n_int && int_digits[first] == '0') ++first;
  bool zero = first == n_int;
  for (int i = 0; zero && i < n_frac; ++i) zero = frac_digits[i] == '0';
  if (negative && !zero) out->push_back('-');
  if (first == n_int) {
    out->push_back('0');
  } else {
    out->append(int_digits + first, static_cast<size_t>(n_int - first));
  }
  if (scale > 0) {
    out->push_back('.');
    out->append(frac_digits, static_cast<size_t>(n_frac));
  }
  return Status::OK();
}

// A NEWDECIMAL of at most 38 digits as its unscaled value at the log's scale.
Status DecodeDecimalValue(const ColumnPlan& p, Reader& r, int128_t* unscaled) {
  int128_t v = 0;
  bool negative = false;
  FERRY_RETURN_IF_ERROR(ReadDecimal(p, r, &negative, [&](int ndigits, uint64_t group, bool) {
    v = v * static_cast<int128_t>(Pow10(ndigits)) + static_cast<int128_t>(group);
  }));
  *unscaled = negative ? -v : v;
  return Status::OK();
}

// MariaDB's inet6 text: the longest run of zero groups (the first of equal ones) as "::", hex
// groups without leading zeros, IPv4-compatible and IPv4-mapped addresses with a dotted quad.
void AppendInet6(std::string* out, const uint8_t a[16]) {
  uint16_t w[8];
  for (int i = 0; i < 8; ++i) w[i] = static_cast<uint16_t>((a[2 * i] << 8) | a[2 * i + 1]);
  int gap_pos = -1, gap_len = 0, run_pos = -1, run_len = 0;
  for (int i = 0; i < 8; ++i) {
    if (w[i] == 0) {
      if (run_pos < 0) run_pos = i, run_len = 0;
      ++run_len;
    } else if (run_pos >= 0) {
      if (run_len > gap_len) gap_pos = run_pos, gap_len = run_len;
      run_pos = -1;
    }
  }
  if (run_pos >= 0 && run_len > gap_len) gap_pos = run_pos, gap_len = run_len;
  char buf[8];
  if (gap_pos == 0 && (gap_len == 6 || (gap_len == 5 && w[5] == 0xffff))) {
    out->append(gap_len == 5 ? "::ffff:" : "::");
    for (int i = 12; i < 16; ++i) {
      out->append(std::to_string(a[i]));
      if (i < 15) out->push_back('.');
    }
    return;
  }
  for (int i = 0; i < 8; ++i) {
    if (i == gap_pos) {
      if (i == 0) out->push_back(':');
      out->push_back(':');
      i += gap_len - 1;
      continue;
    }
    std::snprintf(buf, sizeof(buf), "%x", w[i]);
    out->append(buf);
    if (i < 7) out->push_back(':');
  }
}

// Microseconds of a fraction of `fsp` digits stored in ceil(fsp/2) big-endian bytes.
Status ReadFraction(Reader& r, unsigned fsp, bool is_signed, int64_t* micros) {
  const size_t n = (fsp + 1) / 2;
  *micros = 0;
  if (n == 0) return Status::OK();
  std::string_view b;
  FERRY_RETURN_IF_ERROR(r.Bytes(n, "fractional seconds", &b));
  int64_t v = static_cast<int64_t>(BeOf(b));
  if (is_signed && (static_cast<uint8_t>(b[0]) & 0x80)) v -= int64_t{1} << (8 * n);
  *micros = v * (n == 1 ? 10000 : n == 2 ? 100 : 1);
  return Status::OK();
}

// A TIMESTAMP (4 little-endian bytes of seconds) or TIMESTAMP2 (4 big-endian bytes, then the
// fraction of `fsp` digits) value: seconds and microseconds since the epoch.
Status ReadTimestamp(const MapColumn& mc, Reader& r, unsigned fsp, uint64_t* secs,
                     int64_t* micros) {
  *micros = 0;
  if (mc.type == kTypeTimestamp) return r.Le(4, "timestamp value", secs);
  std::string_view b;
  FERRY_RETURN_IF_ERROR(r.Bytes(4, "timestamp value", &b));
  *secs = BeOf(b);
  return ReadFraction(r, fsp, false, micros);
}

// A DATETIME2 value's fields: 5 bytes of year*13+month, day, hour, minute, second (offset by
// 0x8000000000), then the fraction of `fsp` digits.
struct Datetime {
  uint64_t y = 0;
  unsigned m = 0, d = 0, h = 0, mi = 0, s = 0;
  int64_t micros = 0;
};
Status ReadDatetime2(const ColumnPlan& p, Reader& r, unsigned fsp, Datetime* t) {
  std::string_view b;
  FERRY_RETURN_IF_ERROR(r.Bytes(5, "datetime value", &b));
  FERRY_RETURN_IF_ERROR(ReadFraction(r, fsp, true, &t->micros));
  const int64_t packed = static_cast<int64_t>(BeOf(b)) - 0x8000000000LL;
  if (packed < 0 || t->micros < 0) return Mismatch(p, "a negative datetime");
  const auto ymdhms = static_cast<uint64_t>(packed);
  const uint64_t ymd = ymdhms >> 17, ym = ymd >> 5, hms = ymdhms & ((1 << 17) - 1);
  t->y = ym / 13;
  t->m = static_cast<unsigned>(ym % 13);
  t->d = static_cast<unsigned>(ymd & 31);
  t->h = static_cast<unsigned>(hms >> 12);
  t->mi = static_cast<unsigned>((hms >> 6) & 63);
  t->s = static_cast<unsigned>(hms & 63);
  return Status::OK();
}
// Its text as the server prints it.
void AppendDatetime(std::string* out, const Datetime& t, unsigned fsp) {
  AppendDate(out, t.y, t.m, t.d);
  out->push_back(' ');
  AppendClock(out, t.h, t.mi, t.s);
  AppendFraction(out, static_cast<uint32_t>(t.micros), fsp);
}

Status DecodeValue(ColumnPlan& p, Reader& r, std::string* out, std::string_view* view) {
  const MapColumn& mc = *p.map;
  out->clear();
  auto integer = [&](size_t n) -> Status {
    uint64_t v = 0;
    FERRY_RETURN_IF_ERROR(r.Le(n, "integer value", &v));
    if (p.is_unsigned) {
      AppendN(out, v, p.zerofill_width);
    } else {
      const unsigned shift = static_cast<unsigned>(64 - 8 * n);
      *out = std::to_string(static_cast<int64_t>(v << shift) >> shift);
    }
    return Status::OK();
  };
  auto fsp_of = [&]() -> Result<unsigned> {
    if (mc.meta > 6) {
      return Status::Corruption("ROWS event: fractional seconds precision " +
                                std::to_string(mc.meta) + " of column " + ColumnName(p));
    }
    return static_cast<unsigned>(mc.meta);
  };
  switch (mc.type) {
    case kTypeTiny:
      FERRY_RETURN_IF_ERROR(integer(1));
      break;
    case kTypeShort:
      FERRY_RETURN_IF_ERROR(integer(2));
      break;
    case kTypeInt24:
      FERRY_RETURN_IF_ERROR(integer(3));
      break;
    case kTypeLong:
      FERRY_RETURN_IF_ERROR(integer(4));
      break;
    case kTypeLongLong:
      FERRY_RETURN_IF_ERROR(integer(8));
      break;
    case kTypeFloat: {
      uint32_t bits = 0;
      FERRY_RETURN_IF_ERROR(r.LeAs(4, "float value", &bits));
      float f;
      std::memcpy(&f, &bits, 4);
      if (!std::isfinite(f)) return Mismatch(p, "a float that is not finite");
      AppendDouble(out, static_cast<double>(f));
      break;
    }
    case kTypeDouble: {
      uint64_t bits = 0;
      FERRY_RETURN_IF_ERROR(r.Le(8, "double value", &bits));
      double d;
      std::memcpy(&d, &bits, 8);
      if (!std::isfinite(d)) return Mismatch(p, "a double that is not finite");
      if (p.fixed_decimals >= 0) {
        AppendFixedDouble(out, d, p.fixed_decimals);
      } else {
        AppendDouble(out, d);
      }
      PadZeros(out, p.zerofill_width);
      break;
    }
    case kTypeNewDecimal:
      FERRY_RETURN_IF_ERROR(DecodeDecimal(p, r, out));
      PadZeros(out, p.zerofill_width);
      break;
    case kTypeBit: {
      const size_t nbits = static_cast<size_t>(mc.meta >> 8) * 8 + (mc.meta & 0xFF);
      if (nbits == 0 || nbits > 64) {
        return Status::Corruption("ROWS event: bit(" + std::to_string(nbits) + ") column " +
                                  ColumnName(p));
      }
      std::string_view b;
      FERRY_RETURN_IF_ERROR(r.Bytes((nbits + 7) / 8, "bit value", &b));
      *out = std::to_string(BeOf(b));
      break;
    }
    case kTypeDate:
    case kTypeNewDate: {
      uint64_t v = 0;
      FERRY_RETURN_IF_ERROR(r.Le(3, "date value", &v));
      AppendDate(out, v >> 9, (v >> 5) & 15, v & 31);
      break;
    }
    case kTypeYear: {
      uint64_t v = 0;
      FERRY_RETURN_IF_ERROR(r.Le(1, "year value", &v));
      AppendN(out, v == 0 ? 0 : 1900 + v, 4);
      break;
    }
    case kTypeTimestamp:
    case kTypeTimestamp2: {
      uint64_t secs = 0;
      int64_t micros = 0;
      unsigned fsp = 0;
      if (mc.type == kTypeTimestamp2) {
        FERRY_ASSIGN_OR_RETURN(fsp, fsp_of());
      }
      FERRY_RETURN_IF_ERROR(ReadTimestamp(mc, r, fsp, &secs, &micros));
      if (secs == 0 && micros == 0) {
        out->append("0000-00-00 00:00:00");
      } else {
        int64_t y;
        unsigned m, d;
        CivilFromDays(static_cast<int64_t>(secs / 86400), &y, &m, &d);
        const uint64_t tod = secs % 86400;
        AppendDate(out, static_cast<uint64_t>(y), m, d);
        out->push_back(' ');
        AppendClock(out, tod / 3600, (tod / 60) % 60, tod % 60);
      }
      AppendFraction(out, static_cast<uint32_t>(micros), fsp);
      break;
    }
    case kTypeDatetime: {  // before 5.6: YYYYMMDDhhmmss as an integer
      uint64_t v = 0;
      FERRY_RETURN_IF_ERROR(r.Le(8, "datetime value", &v));
      const uint64_t date = v / 1000000, time = v % 1000000;
      AppendDate(out, date / 10000, (date / 100) % 100, date % 100);
      out->push_back(' ');
      AppendClock(out, time / 10000, (time / 100) % 100, time % 100);
      break;
    }
    case kTypeDatetime2: {
      FERRY_ASSIGN_OR_RETURN(unsigned fsp, fsp_of());
      Datetime t;
      FERRY_RETURN_IF_ERROR(ReadDatetime2(p, r, fsp, &t));
      AppendDatetime(out, t, fsp);
      break;
    }
    case kTypeTime: {  // before 5.6: [-]HHMMSS as a signed 3-byte integer
      uint64_t raw = 0;
      FERRY_RETURN_IF_ERROR(r.Le(3, "time value", &raw));
      int64_t v = static_cast<int64_t>(raw << 40) >> 40;
      if (v < 0) {
        out->push_back('-');
        v = -v;
      }
      AppendClock(out, static_cast<uint64_t>(v / 10000), (v / 100) % 100, v % 100);
      break;
    }
    case kTypeTime2: {
      // 3 bytes of [sign]hour(10)minute(6)second(6) offset by 0x800000, then the fraction; a
      // negative time's fraction is stored counting down from the next whole second.
      FERRY_ASSIGN_OR_RETURN(unsigned fsp, fsp_of());
      std::string_view b;
      FERRY_RETURN_IF_ERROR(r.Bytes(3, "time value", &b));
      // Packed as MySQL packs a time: whole seconds (h << 12 | m << 6 | s) * 2^24 + micros.
      constexpr int64_t kShift = int64_t{1} << 24;
      int64_t intpart = static_cast<int64_t>(BeOf(b)) - 0x800000;
      const size_t nfrac = (fsp + 1) / 2;
      std::string_view fb;
      FERRY_RETURN_IF_ERROR(r.Bytes(nfrac, "fractional seconds", &fb));
      int64_t frac = static_cast<int64_t>(BeOf(fb));
      int64_t packed = 0;
      if (nfrac == 3) {
        // Six digits: the 6 bytes together are one integer offset by 0x800000000000.
        packed = (intpart + 0x800000) * kShift + frac - 0x800000000000LL;
      } else {
        if (intpart < 0 && frac != 0) {
          intpart += 1;
          frac -= nfrac == 1 ? 0x100 : 0x10000;
        }
        packed = intpart * kShift + frac * (nfrac == 0 ? 0 : nfrac == 1 ? 10000 : 100);
      }
      if (packed < 0) {
        out->push_back('-');
        packed = -packed;
      }
      const uint64_t hms = static_cast<uint64_t>(packed) >> 24;
      const uint32_t micros = static_cast<uint32_t>(packed & 0xFFFFFF);
      if (micros > 999999)
        return Status::Corruption("ROWS event: time fraction of column " + ColumnName(p) +
                                  " above 999999");
      AppendClock(out, (hms >> 12) & 1023, (hms >> 6) & 63, hms & 63);
      AppendFraction(out, micros, fsp);
      break;
    }
    case kTypeEnum:
    case kTypeSet: {
      if (mc.meta < 1 || mc.meta > 8 || (mc.type == kTypeEnum && mc.meta > 2)) {
        return Status::Corruption(
            "ROWS event: " + std::string(mc.type == kTypeEnum ? "enum" : "set") + " of " +
            std::to_string(mc.meta) + " bytes, column " + ColumnName(p));
      }
      uint64_t v = 0;
      FERRY_RETURN_IF_ERROR(r.Le(mc.meta, "enum or set value", &v));
      if (mc.type == kTypeEnum) {
        if (v > p.labels.size())
          return Mismatch(p, "enum index " + std::to_string(v) + " beyond its labels");
        *view = v > 0 ? std::string_view(p.labels[v - 1]) : std::string_view("");
        if (p.labels_unsure && view->find('?') != std::string_view::npos) return UnsureLabel(p);
        return Status::OK();
      }
      for (size_t i = 0; i < 64; ++i) {
        if (!((v >> i) & 1)) continue;
        if (i >= p.labels.size())
          return Mismatch(p, "set bit " + std::to_string(i) + " beyond its labels");
        if (!out->empty()) out->push_back(',');
        if (p.labels_unsure && p.labels[i].find('?') != std::string::npos) return UnsureLabel(p);
        out->append(p.labels[i]);
      }
      break;
    }
    case kTypeVarchar:
    case kTypeVarString:
    case kTypeString:
    case kTypeBlob:
    case kTypeTinyBlob:
    case kTypeMediumBlob:
    case kTypeLongBlob:
    case kTypeJson: {
      size_t prefix = 0;
      if (mc.type == kTypeVarchar || mc.type == kTypeVarString || mc.type == kTypeString) {
        prefix = mc.meta > 255 ? 2 : 1;
      } else {
        if (mc.meta < 1 || mc.meta > 4) {
          return Status::Corruption("ROWS event: a " + std::to_string(mc.meta) +
                                    "-byte length prefix of column " + ColumnName(p));
        }
        prefix = mc.meta;
      }
      uint64_t len = 0;
      std::string_view bytes;
      FERRY_RETURN_IF_ERROR(r.Le(prefix, "length", &len));
      FERRY_RETURN_IF_ERROR(r.Bytes(len, "string value", &bytes));
      if (mc.type == kTypeJson) {
        return Status::NotSupported(
            "column " + ColumnName(p) +
            ": MySQL's binary JSON is not decoded from the binary log (MariaDB logs JSON as text); "
            "read it with a view as CAST(... AS CHAR) or leave the table out of CDC");
      }
      if (mc.type == kTypeString && len > mc.meta) {
        return Status::Corruption("ROWS event: " + std::to_string(len) + " bytes in the " +
                                  std::to_string(mc.meta) + "-byte column " + ColumnName(p));
      }
      switch (p.special) {
        case ColumnPlan::Special::kNone:
          if (p.form->wire == MysqlWire::kBinary) {
            *view = bytes;
            return Status::OK();
          }
          return ToUtf8(p, bytes, out, view);
        case ColumnPlan::Special::kBinaryPad:
          // The log drops a BINARY(n)'s trailing zero bytes; the server returns all n.
          out->assign(bytes);
          out->resize(mc.meta, '\0');
          break;
        case ColumnPlan::Special::kUuid: {
          uint8_t u[16] = {};
          std::memcpy(u, bytes.data(), len);
          *out = FormatUuid(u);
          break;
        }
        case ColumnPlan::Special::kInet4: {
          uint8_t a[4] = {};
          std::memcpy(a, bytes.data(), len);
          for (int i = 0; i < 4; ++i) {
            out->append(std::to_string(a[i]));
            if (i < 3) out->push_back('.');
          }
          break;
        }
        case ColumnPlan::Special::kInet6: {
          uint8_t a[16] = {};
          std::memcpy(a, bytes.data(), len);
          AppendInet6(out, a);
          break;
        }
      }
      break;
    }
    case kTypeNull:
      return Status::Corruption("ROWS event: a value of NULL type that is not null, column " +
                                ColumnName(p));
    default:
      return Mismatch(p, "type " + std::to_string(mc.type) + " is not read from the binary log");
  }
  *view = *out;
  return Status::OK();
}

// The bytes of a value of `mc` whose size is its type's (numbers, dates and times); 0 for the
// others, and for metadata out of range (decoding the value names the problem).
size_t FixedWidth(const MapColumn& mc) {
  const size_t fraction = mc.meta <= 6 ? (mc.meta + 1u) / 2 : 0;
  switch (mc.type) {
    case kTypeTiny:
    case kTypeYear:
      return 1;
    case kTypeShort:
      return 2;
    case kTypeInt24:
    case kTypeDate:
    case kTypeNewDate:
    case kTypeTime:
      return 3;
    case kTypeLong:
    case kTypeFloat:
    case kTypeTimestamp:
      return 4;
    case kTypeLongLong:
    case kTypeDouble:
    case kTypeDatetime:
      return 8;
    case kTypeTimestamp2:
      return mc.meta <= 6 ? 4 + fraction : 0;
    case kTypeDatetime2:
      return mc.meta <= 6 ? 5 + fraction : 0;
    case kTypeTime2:
      return mc.meta <= 6 ? 3 + fraction : 0;
    case kTypeNewDecimal: {
      const int precision = mc.meta >> 8, scale = mc.meta & 0xFF;
      if (precision < 1 || precision > 65 || scale > precision) return 0;
      const int intg = precision - scale;
      return static_cast<size_t>(intg / 9 * 4 + kDigitBytes[intg % 9] + scale / 9 * 4 +
                                 kDigitBytes[scale % 9]);
    }
    default:
      return 0;
  }
}

// Whether values of `p` can be given in binary form (mysql_types.h): its wire has one, and the
// log's type is one whose values always fit it.
bool HasBinaryForm(const ColumnPlan& p) {
  if (p.skip) return false;
  const MapColumn& mc = *p.map;
  const bool small = mc.type == kTypeTiny || mc.type == kTypeShort || mc.type == kTypeInt24;
  switch (p.form->wire) {
    case MysqlWire::kInt32:
      return small || (mc.type == kTypeLong && !p.is_unsigned);
    case MysqlWire::kInt64:
      return small || mc.type == kTypeLong || (mc.type == kTypeLongLong && !p.is_unsigned);
    case MysqlWire::kDecimal:
      return mc.type == kTypeNewDecimal && (mc.meta >> 8) >= 1 && (mc.meta >> 8) <= 38 &&
             (mc.meta & 0xFF) <= (mc.meta >> 8);
    case MysqlWire::kDate:
      return mc.type == kTypeDate || mc.type == kTypeNewDate;
    case MysqlWire::kDatetime:
      return mc.type == kTypeDatetime2 && mc.meta <= 6;
    case MysqlWire::kTimestamp:
      return (mc.type == kTypeTimestamp2 && mc.meta <= 6) || mc.type == kTypeTimestamp;
    default:
      return false;
  }
}

unsigned DaysInMonth(uint64_t y, unsigned m) {
  static constexpr unsigned kDays[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m];
}

// Microseconds cut to `fsp` digits, as the text of a value of that precision holds them.
int64_t CutToFsp(int64_t micros, unsigned fsp) {
  static constexpr int64_t kUnit[7] = {1000000, 100000, 10000, 1000, 100, 10, 1};
  return micros - micros % kUnit[fsp];
}

// A value of a column with a binary form (HasBinaryForm) in that form; *null for a zero date (a
// zero month or day), which converts to NULL. A date or time of day that is not a calendar's
// converts as its text does (ParseDate, ParseTimestamp): refused.
Status DecodeTyped(ColumnPlan& p, Reader& r, std::string* out, std::string_view* view, bool* null) {
  const MapColumn& mc = *p.map;
  *null = false;
  auto put = [&](int64_t v) {
    PutMysqlBinaryInt64(v, out);
    *view = *out;
    return Status::OK();
  };
  // Not a calendar's date or time: what its text (in *out) gives, an error naming it.
  auto as_text = [&](bool has_time) -> Status {
    const std::string text = *out;
    Status s;
    if (has_time) {
      auto us = ParseTimestamp(text, /*allow_zone=*/false);
      if (us.ok()) return put(*us);
      s = us.status();
    } else {
      auto days = ParseDate(text);
      if (days.ok()) return put(*days);
      s = days.status();
    }
    return Status(s.code(), "column " + ColumnName(p) + ": " + s.message());
  };
  out->clear();
  switch (p.form->wire) {
    case MysqlWire::kInt32:
    case MysqlWire::kInt64: {
      const size_t n = FixedWidth(mc);  // HasBinaryForm: an integer type
      uint64_t v = 0;
      FERRY_RETURN_IF_ERROR(r.Le(n, "integer value", &v));
      if (p.is_unsigned) return put(static_cast<int64_t>(v));
      const unsigned shift = static_cast<unsigned>(64 - 8 * n);
      return put(static_cast<int64_t>(v << shift) >> shift);
    }
    case MysqlWire::kDecimal: {
      int128_t v = 0;
      FERRY_RETURN_IF_ERROR(DecodeDecimalValue(p, r, &v));
      PutMysqlBinaryDecimal(v, mc.meta & 0xFF, out);
      *view = *out;
      return Status::OK();
    }
    case MysqlWire::kDate: {
      uint64_t v = 0;
      FERRY_RETURN_IF_ERROR(r.Le(3, "date value", &v));
      const uint64_t y = v >> 9;
      const auto m = static_cast<unsigned>((v >> 5) & 15), d = static_cast<unsigned>(v & 31);
      if (y <= 9999 && (m == 0 || d == 0)) {  // (a longer year's text is no zero date)
        *null = true;
        return Status::OK();
      }
      if (y <= 9999 && m >= 1 && m <= 12 && d >= 1 && d <= DaysInMonth(y, m)) {
        return put(DaysFromCivil(static_cast<int64_t>(y), m, d));
      }
      AppendDate(out, y, m, d);
      return as_text(false);
    }
    case MysqlWire::kDatetime: {
      const unsigned fsp = mc.meta;
      Datetime t;
      FERRY_RETURN_IF_ERROR(ReadDatetime2(p, r, fsp, &t));
      if (t.y <= 9999 && (t.m == 0 || t.d == 0)) {  // (a longer year's text is no zero date)
        *null = true;
        return Status::OK();
      }
      if (t.y <= 9999 && t.m >= 1 && t.m <= 12 && t.d >= 1 && t.d <= DaysInMonth(t.y, t.m) &&
          t.h <= 23 && t.mi <= 59 && t.s <= 59) {
        const int64_t days = DaysFromCivil(static_cast<int64_t>(t.y), t.m, t.d);
        return put(days * 86400000000LL + ((t.h * 60 + t.mi) * 60 + t.s) * int64_t{1000000} +
                   CutToFsp(t.micros, fsp));
      }
      AppendDatetime(out, t, fsp);
      return as_text(true);
    }
    case MysqlWire::kTimestamp: {
      const unsigned fsp = mc.type == kTypeTimestamp ? 0 : mc.meta;  // HasBinaryForm: <= 6
      uint64_t secs = 0;
      int64_t micros = 0;
      FERRY_RETURN_IF_ERROR(ReadTimestamp(mc, r, fsp, &secs, &micros));
      if (secs == 0 && micros == 0) {
        *null = true;
        return Status::OK();
      }
      return put(static_cast<int64_t>(secs) * 1000000 + CutToFsp(micros, fsp));
    }
    default:
      return Status::Internal("column " + ColumnName(p) + " has no binary form");
  }
}

// Reads past the value of a column not decoded: one no stream column takes (ColumnPlan::skip),
// or one an image does not need (RowDecoder::SetBeforeColumns).
Status SkipValue(ColumnPlan& p, Reader& r, std::string* scratch) {
  const MapColumn& mc = *p.map;
  std::string_view bytes;
  if (const size_t width = FixedWidth(mc); width > 0) return r.Bytes(width, "value", &bytes);
  switch (mc.type) {
    case kTypeEnum:
    case kTypeSet:
      return r.Bytes(mc.meta, "enum or set value", &bytes);
    case kTypeVarchar:
    case kTypeVarString:
    case kTypeString:
    case kTypeBlob:
    case kTypeTinyBlob:
    case kTypeMediumBlob:
    case kTypeLongBlob:
    case kTypeJson:
    case kTypeGeometry: {
      size_t prefix = 0;
      if (mc.type == kTypeVarchar || mc.type == kTypeVarString || mc.type == kTypeString) {
        prefix = mc.meta > 255 ? 2 : 1;
      } else {
        if (mc.meta < 1 || mc.meta > 4) {
          return Status::Corruption("ROWS event: a " + std::to_string(mc.meta) +
                                    "-byte length prefix of a column not read");
        }
        prefix = mc.meta;
      }
      uint64_t len = 0;
      FERRY_RETURN_IF_ERROR(r.Le(prefix, "length", &len));
      return r.Bytes(len, "string value", &bytes);
    }
    default: {
      // Numbers, bits, dates and times: their size is the type's; decoding reads exactly it.
      std::string_view view;
      return DecodeValue(p, r, scratch, &view);
    }
  }
}

// How the images of one ROWS event are read: the bytes of their null bitmap, and per map column
// whether the images hold it and whether its value is decoded or read past.
struct ImageLayout {
  enum Mode : uint8_t { kAbsent, kDecode, kTyped, kSkip };
  size_t null_bytes = 0;
  std::vector<Mode> modes;
};
// The layout of images holding the columns in `present`; `only` (when not empty): the columns
// decoded, the others read past (and read as nullopt).
void LayOut(const std::vector<ColumnPlan>& plans, const std::vector<bool>& present,
            const std::vector<bool>& only, ImageLayout* layout) {
  layout->modes.assign(plans.size(), ImageLayout::kAbsent);
  size_t npresent = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (!present[i]) continue;
    ++npresent;
    if (plans[i].skip || (!only.empty() && !only[i])) {
      layout->modes[i] = ImageLayout::kSkip;
    } else {
      layout->modes[i] = plans[i].typed ? ImageLayout::kTyped : ImageLayout::kDecode;
    }
  }
  layout->null_bytes = (npresent + 7) / 8;
}

// One row image: its null bitmap, then the values of its columns.
Status DecodeImage(Reader& r, std::vector<ColumnPlan>& plans, const ImageLayout& layout,
                   std::vector<std::string>& texts, RowImage* image) {
  std::string_view nulls;
  FERRY_RETURN_IF_ERROR(r.Bytes(layout.null_bytes, "null bitmap", &nulls));
  image->assign(plans.size(), std::nullopt);
  size_t k = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const ImageLayout::Mode mode = layout.modes[i];
    if (mode == ImageLayout::kAbsent || Bit(nulls, k++)) continue;
    if (mode == ImageLayout::kSkip) {
      FERRY_RETURN_IF_ERROR(SkipValue(plans[i], r, &texts[i]));
      continue;
    }
    std::string_view v;
    if (mode == ImageLayout::kTyped) {
      bool null = false;
      FERRY_RETURN_IF_ERROR(DecodeTyped(plans[i], r, &texts[i], &v, &null));
      if (null) continue;
    } else {
      FERRY_RETURN_IF_ERROR(DecodeValue(plans[i], r, &texts[i], &v));
    }
    (*image)[i] = v;
  }
  return Status::OK();
}

}  // namespace

struct RowDecoder::Impl {
  TableMap map;
  std::vector<ColumnForm> forms;
  std::vector<ColumnPlan> plans;  // point into map and forms
  std::vector<std::string> before_texts, after_texts;
  RowImage before, after;
  std::vector<bool> before_columns;  // SetBeforeColumns (empty: all)
  // Of the event being decoded: each row's first image (a WRITE's or DELETE's row, an UPDATE's
  // before) and an UPDATE's after image.
  ImageLayout first_layout, after_layout;
  // During the callback of an UPDATE row: its before image's bytes, for FullBefore.
  std::string_view before_bytes;
  const std::vector<bool>* before_present = nullptr;
  ImageLayout full_layout;
  std::vector<std::string> full_texts;
  RowImage full_before;
};

RowDecoder::RowDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RowDecoder::~RowDecoder() = default;
const TableMap& RowDecoder::map() const { return impl_->map; }

Result<std::unique_ptr<RowDecoder>> RowDecoder::Make(TableMap map, std::vector<ColumnForm> forms) {
  const size_t n = map.columns.size();
  if (forms.size() != n) {
    return Status::InvalidArgument("table " + map.database + "." + map.table + ": " +
                                   std::to_string(forms.size()) +
                                   " discovered columns, the binary log has " + std::to_string(n) +
                                   " (the table changed since it was discovered? run discover)");
  }
  auto impl = std::make_unique<Impl>();
  impl->map = std::move(map);
  impl->forms = std::move(forms);
  impl->plans.resize(n);
  const TableMap& m = impl->map;
  for (size_t i = 0; i < n; ++i) {
    const bool uns = i < m.is_unsigned.size() && m.is_unsigned[i];
    const std::vector<std::string>* labels = i < m.labels.size() ? &m.labels[i] : nullptr;
    FERRY_RETURN_IF_ERROR(MakePlan(m.columns[i], impl->forms[i], uns, labels, &impl->plans[i]));
  }
  impl->before_texts.resize(n);
  impl->after_texts.resize(n);
  impl->full_texts.resize(n);
  return std::unique_ptr<RowDecoder>(new RowDecoder(std::move(impl)));
}

void RowDecoder::SetTypedColumns(const std::vector<bool>& allowed) {
  Impl& d = *impl_;
  FERRY_CHECK(allowed.empty() || allowed.size() == d.plans.size());
  for (size_t i = 0; i < d.plans.size(); ++i) {
    d.plans[i].typed = !allowed.empty() && allowed[i] && HasBinaryForm(d.plans[i]);
  }
}

std::vector<bool> RowDecoder::typed() const {
  std::vector<bool> out;
  for (const ColumnPlan& p : impl_->plans) out.push_back(p.typed);
  return out;
}

void RowDecoder::SetBeforeColumns(std::vector<bool> columns) {
  FERRY_CHECK(columns.empty() || columns.size() == impl_->map.columns.size());
  impl_->before_columns = std::move(columns);
}

Result<const RowImage*> RowDecoder::FullBefore() {
  Impl& d = *impl_;
  FERRY_CHECK(d.before_present != nullptr);  // only during an UPDATE row's callback
  if (d.before_columns.empty()) return &d.before;
  Reader r(d.before_bytes, "UPDATE_ROWS");
  LayOut(d.plans, *d.before_present, {}, &d.full_layout);
  FERRY_RETURN_IF_ERROR(DecodeImage(r, d.plans, d.full_layout, d.full_texts, &d.full_before));
  return &d.full_before;
}

Status RowDecoder::Decode(
    const RowsEvent& rows,
    const std::function<Status(const RowImage& before, const RowImage& after)>& each) {
  Impl& d = *impl_;
  const TableMap& map = d.map;
  const size_t n = map.columns.size();
  const std::string name = rows.kind == RowsEvent::Kind::kWrite    ? "WRITE_ROWS"
                           : rows.kind == RowsEvent::Kind::kUpdate ? "UPDATE_ROWS"
                                                                   : "DELETE_ROWS";
  if (rows.column_count != n || rows.present.size() != n ||
      (rows.kind == RowsEvent::Kind::kUpdate && rows.present_after.size() != n)) {
    return Status::Corruption(name + " event of " + std::to_string(rows.column_count) +
                              " columns for table " + map.database + "." + map.table + " of " +
                              std::to_string(n) + " in its table map");
  }
  Reader r(rows.rows, name);
  const RowImage none;
  const bool update = rows.kind == RowsEvent::Kind::kUpdate;
  LayOut(d.plans, rows.present, update ? d.before_columns : std::vector<bool>(), &d.first_layout);
  if (update) LayOut(d.plans, rows.present_after, {}, &d.after_layout);
  while (!r.empty()) {
    const size_t left = r.remaining();
    switch (rows.kind) {
      case RowsEvent::Kind::kWrite:
        FERRY_RETURN_IF_ERROR(DecodeImage(r, d.plans, d.first_layout, d.after_texts, &d.after));
        FERRY_RETURN_IF_ERROR(each(none, d.after));
        break;
      case RowsEvent::Kind::kDelete:
        FERRY_RETURN_IF_ERROR(DecodeImage(r, d.plans, d.first_layout, d.before_texts, &d.before));
        FERRY_RETURN_IF_ERROR(each(d.before, none));
        break;
      case RowsEvent::Kind::kUpdate: {
        const std::string_view image = r.rest();
        FERRY_RETURN_IF_ERROR(DecodeImage(r, d.plans, d.first_layout, d.before_texts, &d.before));
        d.before_bytes = image.substr(0, left - r.remaining());
        d.before_present = &rows.present;
        FERRY_RETURN_IF_ERROR(DecodeImage(r, d.plans, d.after_layout, d.after_texts, &d.after));
        Status s = each(d.before, d.after);
        d.before_present = nullptr;
        FERRY_RETURN_IF_ERROR(s);
        break;
      }
    }
    if (r.remaining() == left) {  // no column present: the images are empty, the bytes are not
      return Status::Corruption(name + " event: row images of no bytes with " +
                                std::to_string(left) + " bytes left over");
    }
  }
  return Status::OK();
}

Status DecodeRows(
    const RowsEvent& rows, const TableMap& map, const std::vector<ColumnForm>& forms,
    const std::function<Status(const RowImage& before, const RowImage& after)>& each) {
  FERRY_ASSIGN_OR_RETURN(auto decoder, RowDecoder::Make(map, forms));
  return decoder->Decode(rows, each);
}

}  // namespace ferry::source::binlog
