// SQL text helpers shared by every SQL source and destination.
#pragma once

#include <string>
#include <string_view>

namespace ferry {

// `name` between `quote`s, embedded quotes doubled: safe for any table or column name (spaces,
// capitals, quotes, unicode, reserved words). Double quotes are standard SQL (PostgreSQL,
// SQLite); MySQL and MariaDB quote with backticks.
inline std::string QuoteSqlIdentifier(std::string_view name, char quote = '"') {
  std::string out(1, quote);
  for (char c : name) {
    if (c == quote) out += quote;
    out += c;
  }
  out += quote;
  return out;
}

}  // namespace ferry
