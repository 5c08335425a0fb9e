// A test reader of binary log files: decodes every row event of the tables it is told about with
// ferry's binlog decoder (binlog_events.h), so that e2e/test_mysql_binlog_decode.py can compare
// each value with what the server itself prints for it.
//
//   ferry_binlog_decode COLUMNS.json BINLOG_FILE...
//
// COLUMNS.json: {"db.table": [{"name", "data_type", "column_type", "nullable", "precision",
// "scale", "charset"}, ...], ...}: each table's columns as information_schema.COLUMNS describes
// them (discovery's MysqlColumn), in table order. A file is the 4-byte magic (fe 'b' 'i' 'n') and
// then events back to back, the first a FORMAT_DESCRIPTION. Prints one JSON line per row:
//   {"table": "db.t", "kind": "write|update|delete", "before": [...] | null, "after": [...] | null}
// each value the hex of its decoded text (null: NULL). Tables not in COLUMNS.json are skipped.
// Exit code 0 when every event decoded, 1 (the error on stderr) otherwise.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ferry/source/mysql/binlog_events.h"

namespace {

using namespace ferry::source;          // NOLINT(build/namespaces): a test tool
using namespace ferry::source::binlog;  // NOLINT(build/namespaces)

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 15]);
  }
  return out;
}

nlohmann::json ImageJson(const RowImage& image) {
  if (image.empty()) return nullptr;
  nlohmann::json a = nlohmann::json::array();
  for (const auto& v : image) a.push_back(v ? nlohmann::json(Hex(*v)) : nlohmann::json(nullptr));
  return a;
}

int Fail(const std::string& file, size_t at, const ferry::Status& s) {
  std::cerr << file << " at " << at << ": " << s.ToString() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: ferry_binlog_decode COLUMNS.json BINLOG_FILE...\n";
    return 2;
  }
  std::map<std::string, std::vector<ColumnForm>> tables;
  {
    std::ifstream in(argv[1]);
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& [name, cols] : j.items()) {
      auto& forms = tables[name];
      for (const auto& c : cols) {
        ColumnForm f;
        f.column.name = c.at("name").get<std::string>();
        f.column.data_type = c.at("data_type").get<std::string>();
        f.column.column_type = c.at("column_type").get<std::string>();
        f.column.nullable = c.value("nullable", true);
        f.column.precision = c.value("precision", int64_t{0});
        f.column.scale = c.value("scale", int64_t{0});
        f.column.charset = c.value("charset", std::string());
        f.wire = MapMysqlColumn(f.column).wire;
        forms.push_back(std::move(f));
      }
    }
  }
  size_t rows = 0;
  for (int a = 2; a < argc; ++a) {
    const std::string file = argv[a];
    std::ifstream in(file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string data = ss.str();
    if (data.size() < 4 || data.compare(0, 4,
                                        "\xfe"
                                        "bin") != 0) {
      std::cerr << file << ": not a binary log file\n";
      return 1;
    }
    FormatDescription fd;
    bool have_fd = false;
    std::map<uint64_t, TableMap> maps;
    size_t at = 4;
    while (at < data.size()) {
      if (data.size() - at < kEventHeaderSize) {
        return Fail(file, at, ferry::Status::Corruption("a partial event header at the end"));
      }
      const uint32_t size = static_cast<uint8_t>(data[at + 9]) |
                            static_cast<uint8_t>(data[at + 10]) << 8 |
                            static_cast<uint8_t>(data[at + 11]) << 16 |
                            static_cast<uint32_t>(static_cast<uint8_t>(data[at + 12])) << 24;
      if (size < kEventHeaderSize || size > data.size() - at) {
        return Fail(file, at, ferry::Status::Corruption("an event that runs past the file"));
      }
      std::string_view event(data.data() + at, size);
      if (!have_fd) {
        auto parsed = ParseFormatDescription(event);
        if (!parsed.ok()) return Fail(file, at, parsed.status());
        fd = std::move(parsed).value();
        have_fd = true;
        at += size;
        continue;
      }
      EventHeader h;
      std::string_view body;
      if (auto s = ParseEvent(event, fd, &h, &body); !s.ok()) return Fail(file, at, s);
      if (h.type == kTableMapEvent) {
        auto map = ParseTableMap(body, fd);
        if (!map.ok()) return Fail(file, at, map.status());
        maps[map->table_id] = std::move(map).value();
      } else if (IsRowsEvent(h.type)) {
        auto ev = ParseRowsEvent(h, body, fd);
        if (!ev.ok()) return Fail(file, at, ev.status());
        auto m = maps.find(ev->table_id);
        if (m == maps.end()) {
          return Fail(file, at, ferry::Status::Corruption("rows of an unmapped table id"));
        }
        const std::string name = m->second.database + "." + m->second.table;
        auto t = tables.find(name);
        if (t != tables.end()) {
          const char* kind = ev->kind == RowsEvent::Kind::kWrite    ? "write"
                             : ev->kind == RowsEvent::Kind::kUpdate ? "update"
                                                                    : "delete";
          auto s = DecodeRows(*ev, m->second, t->second,
                              [&](const RowImage& before, const RowImage& after) {
                                nlohmann::json line = {{"table", name},
                                                       {"kind", kind},
                                                       {"before", ImageJson(before)},
                                                       {"after", ImageJson(after)}};
                                std::cout << line.dump() << "\n";
                                ++rows;
                                return ferry::Status::OK();
                              });
          if (!s.ok()) return Fail(file, at, s);
        }
      } else if (h.type == kRotateEvent) {
        if (auto r = ParseRotate(body); !r.ok()) return Fail(file, at, r.status());
      } else if (h.type == kQueryEvent) {
        if (auto q = ParseQuery(body, fd); !q.ok()) return Fail(file, at, q.status());
      } else if (h.type == kXidEvent) {
        if (auto x = ParseXid(body); !x.ok()) return Fail(file, at, x.status());
      } else if (h.type == kMariaGtidEvent) {
        if (auto g = ParseMariaGtid(h, body); !g.ok()) return Fail(file, at, g.status());
      }
      at += size;
    }
  }
  std::cerr << rows << " rows decoded\n";
  return 0;
}
