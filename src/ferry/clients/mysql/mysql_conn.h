// One connection to a MySQL or MariaDB server (libmariadb, the MariaDB Connector/C), in the
// session settings the destination relies on: utf8mb4, sql_mode with STRICT_ALL_TABLES (a value
// that does not fit is an error, never silently truncated) and without NO_BACKSLASH_ESCAPES or
// ANSI_QUOTES, time_zone '+00:00', autocommit on (transactions are opened explicitly).
//
// Errors map to Status codes by the server's error number: lost or refused connections are
// kUnavailable, missing privileges kPermissionDenied, deadlocks and lock wait timeouts
// kCommitFailed (the transaction was rolled back: retry), values a column cannot take
// kInvalidArgument, everything else kIOError. Messages never hold the password.
//
// Not thread-safe: one thread uses a connection at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/clients/mysql/mysql_server.h"

struct st_mysql;

namespace ferry::mysql {

struct ConnectParams {
  std::string host;
  int port = 3306;
  std::string user;
  std::string password;
  std::string database;  // the default database (must exist), or empty for none
  int connect_timeout_s = 10;
  // How long a read may wait for the server (0: the library's default, no limit). A binary log
  // reader sets it above the heartbeat period: a silent connection is then a lost one.
  int read_timeout_s = 0;
  // Where these settings come from, for the fixes messages name ("destination", "source").
  std::string setting = "destination";
  // The fix a missing privilege's message names; empty: the destination's (ALL PRIVILEGES on
  // its databases).
  std::string denied_fix;
};

// A result's rows; NULL is nullopt.
using Row = std::vector<std::optional<std::string>>;
using Rows = std::vector<Row>;
// A streamed row: views valid only during the callback.
using RowView = std::vector<std::optional<std::string_view>>;

class BinlogStream;

class Connection {
 public:
  // Connects and sets up the session. kPermissionDenied (bad user or password, naming the user
  // and the fix), kUnavailable (server not reachable).
  static Result<std::unique_ptr<Connection>> Connect(const ConnectParams& p);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one statement, discarding any rows. `what` prefixes an error's message.
  Status Exec(const std::string& sql, std::string_view what = "");
  // Sends `sql` and cuts the connection before its answer arrives (fault injection: a statement
  // whose outcome is unknown). Always kUnavailable; lost() is true afterwards.
  Status SendAndCut(const std::string& sql);
  // Runs one query and returns all of its rows.
  Result<Rows> Query(const std::string& sql, std::string_view what = "");
  // Runs one query and hands its rows one at a time as the server sends them (memory stays flat).
  Status Stream(const std::string& sql, const std::function<Status(const RowView&)>& each,
                std::string_view what = "");

  // 'text' as a string literal, escaped for this connection.
  std::string Literal(std::string_view text);
  // Appends `text` escaped (without quotes).
  void AppendEscaped(std::string_view text, std::string* out);

  const Flavor& flavor() const { return flavor_; }
  // "MariaDB 10.11.19" / "MySQL 8.0.36"
  std::string ServerName() const;
  // "127.0.0.1:3306"
  std::string Where() const;
  const std::string& user() const { return params_.user; }
  const ConnectParams& params() const { return params_; }
  // The server's id of this connection's session (what KILL QUERY names).
  unsigned long thread_id() const { return thread_id_; }
  // The server's max_allowed_packet (bytes a statement may have).
  int64_t max_allowed_packet() const { return max_allowed_packet_; }
  // Whether the last error lost the connection (it must be opened again).
  bool lost() const { return lost_; }
  // The server's message of the last error, with its number, without hints.
  const std::string& last_error() const { return last_error_; }

 private:
  friend class BinlogStream;  // dumps the binary log on a connection of its own
  explicit Connection(ConnectParams p) : params_(std::move(p)) {}
  Status Error(std::string_view what);
  std::string Clean(std::string text) const;

  ConnectParams params_;
  st_mysql* mysql_ = nullptr;
  Flavor flavor_;
  std::string server_info_;
  int64_t max_allowed_packet_ = 1 << 20;
  unsigned long thread_id_ = 0;
  bool lost_ = false;
  std::string last_error_;
};

}  // namespace ferry::mysql
