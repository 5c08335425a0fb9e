#include "ferry/source/mysql/binlog_statements.h"

#include <cctype>

namespace ferry::source {

bool SqlToken::Is(std::string_view upper) const {
  if (quoted || text.size() != upper.size()) return false;
  for (size_t i = 0; i < upper.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(text[i])) != upper[i]) return false;
  }
  return true;
}

std::vector<SqlToken> SqlTokens(std::string_view sql) {
  std::vector<SqlToken> out;
  size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (sql.substr(i, 2) == "/*") {
      const size_t e = sql.find("*/", i + 2);
      i = e == std::string_view::npos ? sql.size() : e + 2;
    } else if (sql.substr(i, 2) == "--" || c == '#') {
      const size_t e = sql.find('\n', i);
      i = e == std::string_view::npos ? sql.size() : e + 1;
    } else if (c == '`') {
      SqlToken t;
      t.quoted = true;
      for (++i; i < sql.size(); ++i) {
        if (sql[i] == '`') {
          if (i + 1 < sql.size() && sql[i + 1] == '`') {
            t.text += '`';
            ++i;
            continue;
          }
          ++i;
          break;
        }
        t.text += sql[i];
      }
      out.push_back(std::move(t));
    } else if (c == '\'' || c == '"') {
      for (++i; i < sql.size() && sql[i] != c; ++i) {
        if (sql[i] == '\\') ++i;
      }
      ++i;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' ||
               static_cast<unsigned char>(c) >= 0x80) {
      SqlToken t;
      while (i < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[i])) || sql[i] == '_' ||
                                sql[i] == '$' || static_cast<unsigned char>(sql[i]) >= 0x80)) {
        t.text += sql[i++];
      }
      // Bare identifiers keep their case; keywords are compared upper-cased (Is).
      out.push_back(std::move(t));
    } else {
      out.push_back(SqlToken{std::string(1, c), false});
      ++i;
    }
  }
  return out;
}

std::string UnfollowableStatement(
    std::string_view sql, const std::string& database,
    const std::function<bool(const std::string& db, const std::string& table)>& followed) {
  const std::vector<SqlToken> tok = SqlTokens(sql);
  size_t i = 0;
  auto at = [&](std::string_view w) { return i < tok.size() && tok[i].Is(w); };
  auto skip = [&](std::string_view w) {
    if (!at(w)) return false;
    ++i;
    return true;
  };
  // A table name at i ([db.]table); false at the end.
  auto name = [&](std::string* db, std::string* table) {
    if (i >= tok.size() ||
        (!tok[i].quoted && !std::isalnum(static_cast<unsigned char>(tok[i].text[0])) &&
         tok[i].text[0] != '_' && tok[i].text[0] != '$' &&
         static_cast<unsigned char>(tok[i].text[0]) < 0x80)) {
      return false;
    }
    *db = database;
    *table = tok[i++].text;
    if (i + 1 < tok.size() && tok[i].text == "." && !tok[i].quoted) {
      *db = *table;
      *table = tok[i + 1].text;
      i += 2;
    }
    return true;
  };
  auto said = [](const std::string& db, const std::string& table, const char* did) {
    return "table " + db + "." + table + " was " + did;
  };
  std::string db, table;
  if (skip("TRUNCATE")) {
    skip("TABLE");
    if (name(&db, &table) && followed(db, table)) return said(db, table, "truncated");
    return "";
  }
  if (skip("DROP")) {
    if (!skip("TABLE") && !skip("TABLES")) return "";  // DROP TEMPORARY, DATABASE, INDEX ...
    if (skip("IF")) skip("EXISTS");
    while (name(&db, &table)) {
      if (followed(db, table)) return said(db, table, "dropped");
      if (!skip(",")) break;
    }
    return "";
  }
  if (skip("RENAME")) {
    if (!skip("TABLE") && !skip("TABLES")) return "";
    while (name(&db, &table)) {
      if (followed(db, table)) return said(db, table, "renamed");
      if (skip("WAIT") || skip("NOWAIT")) ++i;
      if (!skip("TO")) break;
      std::string d2, t2;
      if (!name(&d2, &t2)) break;
      if (!skip(",")) break;
    }
    return "";
  }
  if (skip("ALTER")) {
    skip("ONLINE");
    skip("IGNORE");
    if (!skip("TABLE")) return "";
    if (!name(&db, &table) || !followed(db, table)) return "";
    for (; i < tok.size(); ++i) {
      if (tok[i].Is("RENAME") &&
          !(i + 1 < tok.size() &&
            (tok[i + 1].Is("COLUMN") || tok[i + 1].Is("INDEX") || tok[i + 1].Is("KEY")))) {
        return said(db, table, "renamed");
      }
    }
    return "";
  }
  if (skip("CREATE")) {
    if (!skip("OR") || !skip("REPLACE")) return "";
    if (!skip("TABLE")) return "";  // TEMPORARY tables and views are not followed tables
    if (name(&db, &table) && followed(db, table)) return said(db, table, "replaced");
  }
  return "";
}

}  // namespace ferry::source
