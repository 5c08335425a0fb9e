#include "ferry/clients/mysql/mysql_server.h"

#include "ferry/base/sql.h"

namespace ferry::mysql {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::string Flavor::binary_collation() const {
  if (mariadb && version >= 100200) return "utf8mb4_nopad_bin";
  if (!mariadb && version >= 80017) return "utf8mb4_0900_bin";
  return "utf8mb4_bin";
}

Flavor ParseServerInfo(std::string_view info) {
  Flavor f;
  f.mariadb = info.find("MariaDB") != std::string_view::npos;
  // Old clients see MariaDB as "5.5.5-10.11.19-MariaDB" (a replication compatibility prefix).
  if (f.mariadb && StartsWith(info, "5.5.5-")) info.remove_prefix(6);
  int parts[3] = {0, 0, 0};
  size_t p = 0;
  for (int k = 0; k < 3 && p < info.size(); ++k) {
    int v = 0;
    bool any = false;
    while (p < info.size() && info[p] >= '0' && info[p] <= '9') {
      v = v * 10 + (info[p] - '0');
      ++p;
      any = true;
    }
    if (!any) break;
    parts[k] = v;
    if (p < info.size() && info[p] == '.') {
      ++p;
    } else {
      break;
    }
  }
  f.version = parts[0] * 10000 + parts[1] * 100 + parts[2];
  return f;
}

std::string QuoteIdent(std::string_view name) { return QuoteSqlIdentifier(name, '`'); }

Result<Url> ParseUrl(std::string_view url, std::string_view setting) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(setting) + " " + why +
                                   "; write it as mysql://user:password@host:port/database");
  };
  auto decode = [](std::string_view s, std::string* out) {
    out->clear();
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        auto hex = [](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          return -1;
        };
        int a = hex(s[i + 1]), b = hex(s[i + 2]);
        if (a < 0 || b < 0) return false;
        out->push_back(static_cast<char>(a * 16 + b));
        i += 2;
      } else if (s[i] == '%') {
        return false;
      } else {
        out->push_back(s[i]);
      }
    }
    return true;
  };
  std::string_view rest;
  if (StartsWith(url, "mysql://")) {
    rest = url.substr(8);
  } else if (StartsWith(url, "mariadb://")) {
    rest = url.substr(10);
  } else {
    return bad("must start with mysql:// or mariadb://");
  }
  if (rest.find('?') != std::string_view::npos || rest.find('#') != std::string_view::npos) {
    return bad("takes no options (?...)");
  }
  Url u;
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && db.back() == '/') db.remove_suffix(1);
    if (!decode(db, &u.database)) return bad("has a bad %-escape in the database name");
  }
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (!decode(userinfo.substr(0, colon), &u.user)) return bad("has a bad %-escape in the user");
    if (colon != std::string_view::npos && !decode(userinfo.substr(colon + 1), &u.password)) {
      return bad("has a bad %-escape in the password");
    }
  }
  std::string_view host = authority;
  std::string_view port;
  if (StartsWith(authority, "[")) {  // [::1]:3306
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("has an unclosed [ in the host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("has text after the host");
      port = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
    }
  }
  u.host = std::string(host);
  if (u.host.empty()) return bad("names no host");
  if (!port.empty()) {
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || p > 65535) return bad("has a bad port");
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return bad("has a bad port");
    u.port = p;
  }
  return u;
}

Result<Url> TakeServerKeys(config::Options& o, std::string_view section) {
  const std::string sec(section);
  auto url = o.TakeOptionalString("url");
  auto host = o.TakeOptionalString("host");
  auto user = o.TakeOptionalString("user");
  auto password = o.TakeOptionalString("password");
  auto database = o.TakeOptionalString("database");
  const bool has_port = o.Has("port");
  FERRY_ASSIGN_OR_RETURN(int64_t port, o.TakeInt("port", 3306, 1, 65535));
  Url u;
  if (url) {
    if (host || user || database || has_port) {
      return Status::InvalidArgument(
          sec + ": give either url or host, port, user and database, not both");
    }
    FERRY_ASSIGN_OR_RETURN(u, ParseUrl(*url, sec + ".url"));
    if (password && !u.password.empty()) {
      return Status::InvalidArgument(sec + ": the password is in both url and password; keep one");
    }
    if (password) u.password = *password;
  } else {
    if (!host || host->empty()) {
      return Status::InvalidArgument(
          sec +
          ": host is missing; give host, port, user, password and database, or url: "
          "mysql://user:password@host:port/database");
    }
    u.host = *host;
    u.port = static_cast<int>(port);
    u.user = user.value_or("");
    u.password = password.value_or("");
    u.database = database.value_or("");
  }
  if (u.user.empty()) {
    return Status::InvalidArgument(sec + ": user is missing (the MySQL/MariaDB user to log in as)");
  }
  return u;
}

}  // namespace ferry::mysql
