// What names a MySQL or MariaDB server and what it is, for every component that talks to one
// (the destination today, the source next): the mysql:// URL, the server's flavor and version
// (which pick collations and features), and identifier quoting. No client library.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/config/config.h"

namespace ferry::mysql {

// What the server is: picks the binary collation.
struct Flavor {
  bool mariadb = true;
  int version = 0;  // 100711 for 10.7.11, 80036 for 8.0.36
  // A collation comparing strings byte by byte WITHOUT padding (so 'a' and 'a ' are two keys, as
  // in the source): utf8mb4_nopad_bin (MariaDB 10.2+), utf8mb4_0900_bin (MySQL 8.0.17+), else
  // utf8mb4_bin (which ignores trailing spaces in comparisons).
  std::string binary_collation() const;
};

// "10.11.19-MariaDB-0+deb12u1" / "8.0.36" -> the flavor.
Flavor ParseServerInfo(std::string_view server_info);

// `name` with embedded backticks doubled: safe for any name.
std::string QuoteIdent(std::string_view name);

// A server's URL: mysql://user:password@host:port/database (also mariadb://); user and password
// percent-decoded; port 3306 when left out. `setting` names where the URL comes from in errors.
struct Url {
  std::string user;
  std::string password;
  std::string host;
  int port = 3306;
  std::string database;
};
Result<Url> ParseUrl(std::string_view url, std::string_view setting = "destination.url");

// The server a pipeline section names, by the keys the MySQL/MariaDB destination and source
// share: `url`, or `host`, `port` (3306), `user`, `password` and `database`; `password` may also
// come apart from a url. Takes those keys from `o` (the caller's CheckAllUsed lists them);
// `section` ("destination", "source") names them in errors. kInvalidArgument for both forms at
// once, a password in both, a bad url, no host or no user. The database may be empty.
Result<Url> TakeServerKeys(config::Options& o, std::string_view section);
// The keys TakeServerKeys takes.
inline const std::vector<std::string>& ServerKeys() {
  static const std::vector<std::string> kKeys = {"url",  "host",     "port",
                                                 "user", "password", "database"};
  return kKeys;
}

}  // namespace ferry::mysql
