// libFuzzer target: arbitrary bytes as a binary log file (the 4-byte magic optional). Events are
// cut by their headers' sizes as a file reader cuts them. The first one is also parsed as a
// FORMAT_DESCRIPTION; the events are then read without checksums (so that the fuzzer reaches the
// bodies) and also with them. Every parser gets the events of its type; TABLE_MAPs are kept by id
// and the rows of ROWS events decoded with forms that agree with the map's types (text in several
// character sets, binary, uuid, inet, enum and set among them), so every value decoder is
// reached. Anything may fail with a Status; nothing may crash or read past its input.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ferry/source/mysql/binlog_events.h"

using namespace ferry::source;          // NOLINT(build/namespaces): a fuzz driver
using namespace ferry::source::binlog;  // NOLINT(build/namespaces)

namespace {

ColumnForm FormFor(const MapColumn& c, size_t i) {
  ColumnForm f;
  MysqlColumn& m = f.column;
  m.name = "c" + std::to_string(i);
  static const char* kCharsets[] = {"utf8mb4", "latin1", "ucs2", "ascii", "utf16", "sjis"};
  switch (c.type) {
    case 1:
    case 2:
    case 9:
    case 3:
    case 8:
      m.data_type = c.type == 8 ? "bigint" : "int";
      m.column_type = i % 3 == 1   ? m.data_type + " unsigned"
                      : i % 3 == 2 ? m.data_type + "(8) unsigned zerofill"
                                   : m.data_type;
      break;
    case 4:
      m.data_type = m.column_type = "float";
      break;
    case 5:
      m.data_type = "double";
      m.column_type = i % 3 == 1   ? "double(30,10)"
                      : i % 3 == 2 ? "double unsigned zerofill"
                                   : "double";
      break;
    case 246:
      m.data_type = "decimal";
      m.precision = c.meta >> 8;
      m.scale = c.meta & 0xFF;
      m.column_type = i % 2 ? "decimal(65,30) unsigned zerofill" : "decimal";
      break;
    case 16:
      m.data_type = "bit";
      m.column_type = "bit(" + std::to_string((c.meta >> 8) * 8 + (c.meta & 0xFF)) + ")";
      break;
    case 10:
    case 14:
      m.data_type = m.column_type = "date";
      break;
    case 12:
    case 18:
      m.data_type = m.column_type = "datetime";
      break;
    case 7:
    case 17:
      m.data_type = m.column_type = "timestamp";
      break;
    case 11:
    case 19:
      m.data_type = m.column_type = "time";
      break;
    case 13:
      m.data_type = m.column_type = "year";
      break;
    case 247:
      m.data_type = "enum";
      m.column_type = "enum('a','b''c','?','x\\\\y')";
      m.charset = kCharsets[i % 6];
      break;
    case 248:
      m.data_type = "set";
      m.column_type = "set('a','b','c')";
      m.charset = kCharsets[i % 6];
      break;
    case 254: {
      static const char* kKinds[] = {"char", "binary", "uuid", "inet4", "inet6"};
      m.data_type = m.column_type = kKinds[i % 5];
      if (i % 5 == 0) m.charset = kCharsets[(i / 5) % 6];
      break;
    }
    default:  // varchar, blobs, json, geometry
      m.data_type = m.column_type = i % 2 ? "varchar" : "blob";
      if (i % 2) m.charset = kCharsets[(i / 2) % 6];
      break;
  }
  f.wire = MapMysqlColumn(m).wire;
  return f;
}

void ReadEvent(std::string_view event, const FormatDescription& fd,
               std::map<uint64_t, TableMap>* maps) {
  EventHeader h;
  std::string_view body;
  if (!ParseEvent(event, fd, &h, &body).ok()) return;
  switch (h.type) {
    case kQueryEvent:
      (void)ParseQuery(body, fd);
      return;
    case kRotateEvent:
      (void)ParseRotate(body);
      return;
    case kXidEvent:
      (void)ParseXid(body);
      return;
    case kMariaGtidEvent:
      (void)ParseMariaGtid(h, body);
      return;
    case kMysqlGtidEvent:
      (void)ParseMysqlGtid(body);
      return;
    case kFormatDescriptionEvent:
      (void)ParseFormatDescription(event);
      return;
    case kTableMapEvent: {
      auto map = ParseTableMap(body, fd);
      if (map.ok() && map->columns.size() <= 4096) (*maps)[map->table_id] = std::move(map).value();
      return;
    }
    default:
      break;
  }
  if (!IsRowsEvent(h.type)) return;
  auto rows = ParseRowsEvent(h, body, fd);
  if (!rows.ok()) return;
  auto m = maps->find(rows->table_id);
  if (m == maps->end()) return;
  std::vector<ColumnForm> forms;
  for (size_t i = 0; i < m->second.columns.size(); ++i) {
    forms.push_back(FormFor(m->second.columns[i], i));
  }
  (void)DecodeRows(*rows, m->second, forms, [](const RowImage& before, const RowImage& after) {
    size_t total = 0;
    for (const auto& v : before) total += v ? v->size() : 0;
    for (const auto& v : after) total += v ? v->size() : 0;
    return total > (size_t{1} << 30) ? ferry::Status::Internal("impossible") : ferry::Status::OK();
  });
  // As a follower reads it: values in binary form where they have one, UPDATE before images of
  // the first column alone, whole on demand.
  auto decoder = RowDecoder::Make(m->second, forms);
  if (!decoder.ok()) return;
  (*decoder)->SetTypedColumns(std::vector<bool>(forms.size(), true));
  std::vector<bool> key(forms.size(), false);
  if (!key.empty()) key[0] = true;
  (*decoder)->SetBeforeColumns(std::move(key));
  RowDecoder& d = **decoder;
  (void)d.Decode(*rows, [&](const RowImage& before, const RowImage&) -> ferry::Status {
    if (rows->kind != RowsEvent::Kind::kUpdate) return ferry::Status::OK();
    for (size_t i = 1; i < before.size(); ++i) {
      if (before[i]) __builtin_trap();  // a value not asked for was decoded
    }
    return d.FullBefore().status();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (in.substr(0, 4) == std::string_view("\xfe"
                                          "bin",
                                          4))
    in.remove_prefix(4);
  FormatDescription plain;  // no checksums: the bodies are reached
  FormatDescription crc;
  crc.checksum = true;
  std::map<uint64_t, TableMap> maps;
  bool first = true;
  while (in.size() >= kEventHeaderSize) {
    const uint32_t n = static_cast<uint8_t>(in[9]) | static_cast<uint8_t>(in[10]) << 8 |
                       static_cast<uint8_t>(in[11]) << 16 |
                       static_cast<uint32_t>(static_cast<uint8_t>(in[12])) << 24;
    const size_t len = n < kEventHeaderSize || n > in.size() ? in.size() : n;
    std::string_view event = in.substr(0, len);
    in.remove_prefix(len);
    if (first) {
      auto fd = ParseFormatDescription(event);
      if (fd.ok()) {
        plain.post_header_len = fd->post_header_len;
        crc.post_header_len = fd->post_header_len;
      }
      first = false;
    }
    ReadEvent(event, plain, &maps);
    ReadEvent(event, crc, &maps);
  }
  return 0;
}
