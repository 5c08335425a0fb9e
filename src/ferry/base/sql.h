// SQL text helpers shared by every SQL source and destination.
#pragma once

#include <string>
#include <string_view>

namespace ferry {

// A double-quoted SQL identifier with embedded quotes doubled: safe for any table or column name
// (spaces, capitals, quotes, unicode, reserved words) in PostgreSQL, SQLite and standard SQL.
inline std::string QuoteSqlIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace ferry
