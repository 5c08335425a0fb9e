// A small blocking client for Redis's protocol, RESP2
// (https://redis.io/docs/reference/protocol-spec/), for the Redis destination: commands are arrays
// of binary-safe bulk strings; replies are simple strings, errors, integers, bulk strings, arrays
// (nested) and nil.
//
// Pipelining: Connection::Pipeline sends many commands encoded into one buffer and reads their
// replies WHILE it sends (poll on both directions), so neither side's socket buffers can fill up
// and stall the other; replies are handed over one by one, in order.
//
// Failures (what the caller does with them):
//   kUnavailable       the server could not be reached, the connection was lost or a reply did not
//                      come within the I/O timeout; the connection is closed (broken() is true).
//                      Whether commands already sent ran is unknown.
//   kPermissionDenied  the server refused the credentials (WRONGPASS, NOAUTH) or a command
//                      (NOPERM).
//   kCorruption        the bytes received are not RESP2 (not a Redis server?); the connection is
//                      closed.
//   others             an error reply, by its kind (ErrorReplyStatus).
// Messages name the server as host:port and the command, never the password or other arguments.
//
// Thread-safety: a Connection is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"

namespace ferry::sink::redis {

struct Reply {
  enum class Type : uint8_t { kStatus, kError, kInteger, kBulk, kNil, kArray };
  Type type = Type::kNil;
  std::string str;              // kStatus, kError, kBulk
  int64_t integer = 0;          // kInteger
  std::vector<Reply> elements;  // kArray

  bool IsError() const { return type == Type::kError; }
  bool IsNil() const { return type == Type::kNil; }
  bool IsStatus(std::string_view s) const { return type == Type::kStatus && str == s; }
  // For messages: "error 'ERR ...'", "integer 3", "bulk string of 12 bytes", "array of 2", "nil".
  std::string Describe() const;
};

// ---- encoding ----

// "*<n>\r\n": the header of a command of n arguments; each argument follows as AppendBulk.
void AppendArrayHeader(size_t n, std::string* out);
// "$<len>\r\n<bytes>\r\n".
void AppendBulk(std::string_view s, std::string* out);
// A whole command.
void AppendCommand(std::initializer_list<std::string_view> args, std::string* out);
void AppendCommand(const std::vector<std::string_view>& args, std::string* out);

// ---- decoding ----

// Reads one reply starting at data[*pos]. When data holds all of it: the reply, *pos moved past
// it. When data ends inside it: nullopt, *pos unchanged. kCorruption when the bytes are not
// RESP2 (or nest deeper than 32 arrays).
Result<std::optional<Reply>> ParseReply(std::string_view data, size_t* pos);

// ---- connections ----

struct Endpoint {
  std::string host;
  int port = 6379;
  std::string user;      // empty: the default user
  std::string password;  // empty: no AUTH
  int64_t db = 0;
  // "127.0.0.1:6379", "[::1]:6379".
  std::string HostPort() const;
};

// redis://[[user]:password@]host[:port][/db]; user and password may be percent-encoded. Errors
// show the URL redacted (config::Redact).
Result<Endpoint> ParseRedisUrl(const std::string& url);

struct Timeouts {
  int connect_ms = 10000;
  int io_ms = 60000;  // longest wait for the server to take or send any byte
};

// The status for error reply `reply` to command `command` (its name only) from the server at
// `where`: WRONGPASS/NOAUTH/NOPERM -> kPermissionDenied; LOADING/BUSY/MASTERDOWN/TRYAGAIN/OOM ->
// kUnavailable; READONLY -> kInvalidArgument (a replica); MOVED/ASK/CLUSTERDOWN -> kNotSupported
// (Redis Cluster); unknown command -> kNotSupported; WRONGTYPE -> kInvalidArgument; else kIOError.
Status ErrorReplyStatus(std::string_view command, const Reply& reply, const std::string& where);

class Connection {
 public:
  // Connects, authenticates (AUTH) and selects the database (SELECT).
  static Result<std::unique_ptr<Connection>> Open(const Endpoint& endpoint,
                                                  const Timeouts& timeouts = {});
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One command; an error reply becomes ErrorReplyStatus naming args[0].
  Result<Reply> Command(std::initializer_list<std::string_view> args);
  Result<Reply> Command(const std::vector<std::string_view>& args);

  // Sends the bytes of `parts` (together `count` encoded commands) and hands each reply, in order,
  // to `each(i, reply)` (error replies too: `each` decides). An error returned by `each`, a lost
  // connection or a timeout closes the connection and is returned; `what` names the work in
  // messages ("committing to ferry:orders").
  Status Pipeline(const std::vector<std::string_view>& parts, size_t count,
                  const std::function<Status(size_t, Reply&)>& each, std::string_view what);

  // Sends `bytes` (whole commands) and cuts the connection before any answer is read: a lost
  // answer, for fault injection. Returns the kUnavailable a lost connection gives.
  Status SendAndCut(std::string_view bytes, std::string_view what);

  bool broken() const { return fd_ < 0; }
  const Endpoint& endpoint() const { return endpoint_; }
  // Bytes sent so far.
  uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  Connection(Endpoint endpoint, Timeouts timeouts, int fd);
  Status Lost(std::string_view what, std::string_view why);
  void Close();

  Endpoint endpoint_;
  Timeouts timeouts_;
  int fd_ = -1;
  std::string in_;     // received bytes not yet parsed, from in_pos_
  size_t in_pos_ = 0;  // start of the unparsed bytes in in_
  uint64_t bytes_sent_ = 0;
};

}  // namespace ferry::sink::redis
