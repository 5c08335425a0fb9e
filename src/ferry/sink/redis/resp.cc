#include "ferry/sink/redis/resp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "ferry/config/config.h"
#include "ferry/sink/sink_util.h"

namespace ferry::sink::redis {
namespace {

constexpr int kMaxDepth = 32;
constexpr int64_t kMaxLength = int64_t{1} << 32;  // bulk bytes or array elements
constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kWriteChunk = 1024 * 1024;

std::string Printable(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
  return buf;
}

Status Malformed(const std::string& why) {
  return Status::Corruption("the server's reply is not in Redis's protocol (RESP2): " + why +
                            " (is destination.url the address of a Redis server?)");
}

// The text of the line starting at *p, up to "\r\n" (excluded); false when no line end yet.
bool Line(std::string_view d, size_t* p, std::string_view* line) {
  size_t end = d.find("\r\n", *p);
  if (end == std::string_view::npos) return false;
  *line = d.substr(*p, end - *p);
  *p = end + 2;
  return true;
}

Result<int64_t> Integer(std::string_view s) {
  if (s.empty() || s.size() > 20) return Malformed("a bad integer '" + std::string(s) + "'");
  bool neg = s[0] == '-';
  size_t i = neg ? 1 : 0;
  if (i == s.size()) return Malformed("a bad integer '" + std::string(s) + "'");
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return Malformed("a bad integer '" + std::string(s) + "'");
    uint64_t next = v * 10 + static_cast<uint64_t>(s[i] - '0');
    if (next / 10 != v || next > uint64_t{1} << 63) {
      return Malformed("an integer out of range '" + std::string(s) + "'");
    }
    v = next;
  }
  if (!neg && v > static_cast<uint64_t>(INT64_MAX)) {
    return Malformed("an integer out of range '" + std::string(s) + "'");
  }
  return neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

// Parses one reply at *p into *out; *incomplete when d ends inside it (*p is then meaningless).
Status Parse(std::string_view d, size_t* p, Reply* out, int depth, bool* incomplete) {
  if (*p >= d.size()) {
    *incomplete = true;
    return Status::OK();
  }
  const char type = d[*p];
  ++*p;
  std::string_view line;
  if (!Line(d, p, &line)) {
    *incomplete = true;
    return Status::OK();
  }
  switch (type) {
    case '+':
    case '-':
      out->type = type == '+' ? Reply::Type::kStatus : Reply::Type::kError;
      out->str.assign(line);
      return Status::OK();
    case ':': {
      FERRY_ASSIGN_OR_RETURN(out->integer, Integer(line));
      out->type = Reply::Type::kInteger;
      return Status::OK();
    }
    case '$': {
      FERRY_ASSIGN_OR_RETURN(int64_t n, Integer(line));
      if (n == -1) {
        out->type = Reply::Type::kNil;
        return Status::OK();
      }
      if (n < 0 || n > kMaxLength) return Malformed("a bulk string of length " + std::string(line));
      const size_t len = static_cast<size_t>(n);
      if (d.size() - *p < len + 2) {
        *incomplete = true;
        return Status::OK();
      }
      if (d[*p + len] != '\r' || d[*p + len + 1] != '\n') {
        return Malformed("a bulk string of " + std::to_string(len) + " bytes does not end in CRLF");
      }
      out->type = Reply::Type::kBulk;
      out->str.assign(d.substr(*p, len));
      *p += len + 2;
      return Status::OK();
    }
    case '*': {
      FERRY_ASSIGN_OR_RETURN(int64_t n, Integer(line));
      if (n == -1) {
        out->type = Reply::Type::kNil;
        return Status::OK();
      }
      if (n < 0 || n > kMaxLength) return Malformed("an array of length " + std::string(line));
      if (depth >= kMaxDepth) {
        return Malformed("arrays nested deeper than " + std::to_string(kMaxDepth));
      }
      // Every element takes at least 3 bytes ("+\r\n"): fewer left means more is to come (and
      // bounds what is reserved).
      const size_t count = static_cast<size_t>(n);
      if ((d.size() - *p) / 3 < count) {
        *incomplete = true;
        return Status::OK();
      }
      out->type = Reply::Type::kArray;
      out->elements.clear();
      out->elements.reserve(count);
      for (size_t i = 0; i < count; ++i) {
        out->elements.emplace_back();
        FERRY_RETURN_IF_ERROR(Parse(d, p, &out->elements.back(), depth + 1, incomplete));
        if (*incomplete) return Status::OK();
      }
      return Status::OK();
    }
    default:
      return Malformed("a reply starts with byte " + Printable(type));
  }
}

// The error reply's text without what the server may echo of the arguments.
std::string ErrorText(const std::string& s) {
  size_t cut = s.find(", with args beginning with");
  return cut == std::string::npos ? s : s.substr(0, cut);
}

int PercentValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = PercentValue(s[i + 1]), lo = PercentValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

using SteadyClock = std::chrono::steady_clock;

int MillisLeft(SteadyClock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

std::string Reply::Describe() const {
  switch (type) {
    case Type::kStatus:
      return "status '" + str + "'";
    case Type::kError:
      return "error '" + ErrorText(str) + "'";
    case Type::kInteger:
      return "integer " + std::to_string(integer);
    case Type::kBulk:
      return "bulk string of " + std::to_string(str.size()) + " bytes";
    case Type::kNil:
      return "nil";
    case Type::kArray:
      return "array of " + std::to_string(elements.size());
  }
  return "?";
}

void AppendArrayHeader(size_t n, std::string* out) {
  *out += '*';
  *out += std::to_string(n);
  *out += "\r\n";
}

void AppendBulk(std::string_view s, std::string* out) {
  *out += '$';
  *out += std::to_string(s.size());
  *out += "\r\n";
  out->append(s.data(), s.size());
  *out += "\r\n";
}

void AppendCommand(std::initializer_list<std::string_view> args, std::string* out) {
  AppendArrayHeader(args.size(), out);
  for (std::string_view a : args) AppendBulk(a, out);
}

void AppendCommand(const std::vector<std::string_view>& args, std::string* out) {
  AppendArrayHeader(args.size(), out);
  for (std::string_view a : args) AppendBulk(a, out);
}

Result<std::optional<Reply>> ParseReply(std::string_view data, size_t* pos) {
  size_t p = *pos;
  Reply r;
  bool incomplete = false;
  FERRY_RETURN_IF_ERROR(Parse(data, &p, &r, 0, &incomplete));
  if (incomplete) return std::optional<Reply>();
  *pos = p;
  return std::optional<Reply>(std::move(r));
}

std::string Endpoint::HostPort() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// `url` for messages: everything before the last '@' after the scheme is hidden (a password
// may stand there without a user name, which config::Redact does not recognise).
std::string ShownUrl(const std::string& url) {
  size_t scheme = url.find("://");
  size_t at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) {
    return config::Redact(url);
  }
  return url.substr(0, scheme + 3) + "***" + url.substr(at);
}

Result<Endpoint> ParseRedisUrl(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("destination.url '" + ShownUrl(url) + "' is not a Redis URL: " +
                                   why + "; write redis://[[user]:password@]host[:port][/db]");
  };
  const std::string_view scheme = "redis://";
  if (url.rfind("rediss://", 0) == 0) {
    return Status::NotSupported("destination.url '" + ShownUrl(url) +
                                "': TLS (rediss://) is not supported yet; use redis:// (through a "
                                "TLS tunnel such as stunnel when the network needs one)");
  }
  if (url.rfind("unix:", 0) == 0 || url.rfind("redis+unix:", 0) == 0) {
    return Status::NotSupported("destination.url '" + ShownUrl(url) +
                                "': Unix sockets are not supported; use redis://host:port");
  }
  if (url.compare(0, scheme.size(), scheme) != 0) return bad("it does not start with redis://");
  std::string_view rest = std::string_view(url).substr(scheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return bad("options after '?' are not supported");
  }
  Endpoint e;
  // user info: up to the LAST '@' (a password may hold '@' only percent-encoded, but be lenient)
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view info = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = info.find(':');
    auto user = PercentDecode(info.substr(0, colon));
    if (!user) return bad("the user name has a bad %-escape");
    e.user = *user;
    if (colon != std::string_view::npos) {
      auto pw = PercentDecode(info.substr(colon + 1));
      if (!pw) return bad("the password has a bad %-escape");
      e.password = *pw;
    } else if (!e.user.empty()) {
      // redis://password@host is how some tools spell a password alone.
      e.password = e.user;
      e.user.clear();
    }
  }
  std::string_view hostport = rest;
  size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      int64_t v = 0;
      for (char c : db) {
        if (c < '0' || c > '9' || v > 1000000) return bad("the database is not a number");
        v = v * 10 + (c - '0');
      }
      e.db = v;
    }
  }
  std::string_view port;
  if (!hostport.empty() && hostport[0] == '[') {
    size_t close = hostport.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address lacks its ']'");
    e.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("unexpected text after the IPv6 address");
      port = after.substr(1);
    }
  } else {
    size_t colon = hostport.rfind(':');
    e.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) port = hostport.substr(colon + 1);
  }
  if (e.host.empty()) return bad("the host is missing");
  if (!port.empty()) {
    int v = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || v > 65535) return bad("the port is not a number");
      v = v * 10 + (c - '0');
    }
    if (v < 1 || v > 65535) return bad("the port is out of range");
    e.port = v;
  }
  return e;
}

Status ErrorReplyStatus(std::string_view command, const Reply& reply, const std::string& where) {
  const std::string text = ErrorText(reply.str);
  const std::string cmd(command);
  const std::string first = text.substr(0, text.find(' '));
  if (first == "WRONGPASS") {
    return Status::PermissionDenied(where + " refused the user name or password (" + text +
                                    "); correct the credentials in destination.url");
  }
  if (first == "NOAUTH") {
    return Status::PermissionDenied(
        where + " requires a password (" + text +
        "); give it in destination.url as redis://:PASSWORD@host:port, e.g. from an environment "
        "variable: redis://:${REDIS_PASSWORD}@host:port");
  }
  if (first == "NOPERM") {
    return Status::PermissionDenied(where + " does not let this user run " + cmd + " (" + text +
                                    "); grant it in the server's ACL (ACL SETUSER)");
  }
  if (text.find("without any password configured") != std::string::npos ||
      text.find("no password is set") != std::string::npos) {
    return Status::InvalidArgument(where + " has no password set, but destination.url gives one (" +
                                   text + "); remove the password from the URL");
  }
  if (first == "LOADING" || first == "BUSY" || first == "MASTERDOWN" || first == "TRYAGAIN") {
    return Status::Unavailable(where + " cannot run " + cmd + " now (" + text + ")");
  }
  if (first == "OOM") {
    return Status::Unavailable(where + " is out of memory (" + text +
                               "); raise its maxmemory or free memory");
  }
  if (first == "READONLY") {
    return Status::InvalidArgument(where + " is a read-only replica (" + text +
                                   "); point destination.url at the primary");
  }
  if (first == "MOVED" || first == "ASK" || first == "CLUSTERDOWN" || first == "CROSSSLOT") {
    return Status::NotSupported(where + " is part of a Redis Cluster (" + text +
                                "); ferry writes to a single Redis server (or a primary with "
                                "replicas), not a cluster");
  }
  if (Lower(text).find("unknown command") != std::string::npos) {
    return Status::NotSupported(where + " does not know command " + cmd + " (" + text +
                                "); ferry needs Redis 6.2 or newer");
  }
  if (first == "WRONGTYPE") {
    return Status::InvalidArgument(where + ": " + cmd + " found a key holding another type (" +
                                   text + ")");
  }
  return Status::IOError(where + " refused " + cmd + ": " + text);
}

// ---- Connection ----

Connection::Connection(Endpoint endpoint, Timeouts timeouts, int fd)
    : endpoint_(std::move(endpoint)), timeouts_(timeouts), fd_(fd) {}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  in_.clear();
  in_pos_ = 0;
}

Status Connection::Lost(std::string_view what, std::string_view why) {
  Close();
  return Status::Unavailable("lost the connection to Redis at " + endpoint_.HostPort() + " while " +
                             std::string(what) + ": " + std::string(why));
}

Result<std::unique_ptr<Connection>> Connection::Open(const Endpoint& e, const Timeouts& t) {
  const std::string where = "Redis at " + e.HostPort();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  const std::string port = std::to_string(e.port);
  int rc = ::getaddrinfo(e.host.c_str(), port.c_str(), &hints, &addrs);
  if (rc != 0) {
    return Status::Unavailable("cannot resolve the host of " + where + ": " + gai_strerror(rc) +
                               "; correct destination.url");
  }
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(t.connect_ms);
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* a = addrs; a != nullptr && fd < 0; a = a->ai_next) {
    int s = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(s, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{s, POLLOUT, 0};
        int n;
        do {
          n = ::poll(&p, 1, MillisLeft(deadline));
        } while (n < 0 && errno == EINTR);
        if (n == 0) {
          err = ETIMEDOUT;
        } else if (n < 0) {
          err = errno;
        } else {
          socklen_t len = sizeof err;
          if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
    }
    if (err != 0) {
      last_error = err == ETIMEDOUT
                       ? "no answer within " + std::to_string(t.connect_ms / 1000) + " s"
                       : std::strerror(err);
      ::close(s);
      continue;
    }
    int one = 1;
    (void)::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fd = s;
  }
  ::freeaddrinfo(addrs);
  if (fd < 0) {
    return Status::Unavailable("cannot connect to " + where + ": " + last_error +
                               "; start the Redis server or correct destination.url");
  }
  std::unique_ptr<Connection> c(new Connection(e, t, fd));
  // AUTH, SELECT and a PING in one round trip; the PING tells whether a password is required.
  std::string hello;
  std::vector<std::string> names;
  if (!e.password.empty()) {
    if (e.user.empty()) {
      AppendCommand({"AUTH", e.password}, &hello);
    } else {
      AppendCommand({"AUTH", e.user, e.password}, &hello);
    }
    names.push_back("AUTH");
  }
  if (e.db != 0) {
    AppendCommand({"SELECT", std::to_string(e.db)}, &hello);
    names.push_back("SELECT");
  }
  AppendCommand({"PING"}, &hello);
  names.push_back("PING");
  Status first_error;
  FERRY_RETURN_IF_ERROR(c->Pipeline(
      {hello}, names.size(),
      [&](size_t i, Reply& r) {
        if (r.IsError() && first_error.ok()) {
          first_error = ErrorReplyStatus(names[i], r, where);
          if (names[i] == "SELECT" && first_error.code() == StatusCode::kIOError) {
            first_error = Status::InvalidArgument(where + " has no database " +
                                                  std::to_string(e.db) + " (" + ErrorText(r.str) +
                                                  "); correct the /db part of destination.url");
          }
        }
        return Status::OK();
      },
      "connecting"));
  if (!first_error.ok()) return first_error;
  return c;
}

Result<Reply> Connection::Command(std::initializer_list<std::string_view> args) {
  return Command(std::vector<std::string_view>(args));
}

Result<Reply> Connection::Command(const std::vector<std::string_view>& args) {
  std::string buf;
  AppendCommand(args, &buf);
  Reply out;
  const std::string name(args.size() ? args.begin()[0] : std::string_view());
  FERRY_RETURN_IF_ERROR(Pipeline(
      {buf}, 1,
      [&](size_t, Reply& r) {
        out = std::move(r);
        return Status::OK();
      },
      "running " + name));
  if (out.IsError()) return ErrorReplyStatus(name, out, "Redis at " + endpoint_.HostPort());
  return out;
}

Status Connection::SendAndCut(std::string_view bytes, std::string_view what) {
  if (fd_ < 0) return Lost(what, "the connection was closed after an earlier failure");
  while (!bytes.empty()) {
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, timeouts_.io_ms) <= 0) return Lost(what, "cannot send");
    ssize_t w = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return Lost(what, std::strerror(errno));
    }
    bytes_sent_ += static_cast<uint64_t>(w);
    bytes.remove_prefix(static_cast<size_t>(w));
  }
  ::shutdown(fd_, SHUT_RDWR);
  return Lost(what, "the connection was cut after sending (fault injected)");
}

Status Connection::Pipeline(const std::vector<std::string_view>& parts, size_t count,
                            const std::function<Status(size_t, Reply&)>& each,
                            std::string_view what) {
  if (fd_ < 0) {
    return Status::Unavailable("the connection to Redis at " + endpoint_.HostPort() +
                               " was closed after an earlier failure");
  }
  size_t part = 0, offset = 0;  // the next byte to send
  size_t got = 0;
  auto all_sent = [&] { return part >= parts.size(); };
  auto skip_empty = [&] {
    while (part < parts.size() && offset >= parts[part].size()) {
      ++part;
      offset = 0;
    }
  };
  skip_empty();
  while (got < count || !all_sent()) {
    // Hand over every complete reply received.
    while (got < count) {
      auto r = ParseReply(in_, &in_pos_);
      if (!r.ok()) {
        Close();
        return r.status().WithContext(std::string(what) + " (Redis at " + endpoint_.HostPort() +
                                      ")");
      }
      if (!r->has_value()) break;
      Status s = each(got, **r);
      ++got;
      if (!s.ok()) {
        Close();
        return s;
      }
    }
    if (got >= count && all_sent()) break;
    if (in_pos_ > 0 && in_pos_ * 2 >= in_.size()) {
      in_.erase(0, in_pos_);
      in_pos_ = 0;
    }
    pollfd p{fd_, static_cast<short>(POLLIN | (all_sent() ? 0 : POLLOUT)), 0};
    int n = ::poll(&p, 1, timeouts_.io_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Lost(what, std::strerror(errno));
    }
    if (n == 0) {
      return Lost(what,
                  "no progress within " + std::to_string(timeouts_.io_ms / 1000) + " s (timeout)");
    }
    if ((p.revents & POLLOUT) && !all_sent()) {
      std::string_view rest = parts[part].substr(offset);
      ssize_t w =
          ::send(fd_, rest.data(), std::min(rest.size(), kWriteChunk), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          return Lost(what, std::strerror(errno));
        }
      } else {
        offset += static_cast<size_t>(w);
        bytes_sent_ += static_cast<uint64_t>(w);
        skip_empty();
      }
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const size_t old = in_.size();
      in_.resize(old + kReadChunk);
      ssize_t r = ::recv(fd_, in_.data() + old, kReadChunk, MSG_DONTWAIT);
      if (r < 0) {
        in_.resize(old);
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          return Lost(what, std::strerror(errno));
        }
      } else if (r == 0) {
        in_.resize(old);
        return Lost(what, "the server closed the connection");
      } else {
        in_.resize(old + static_cast<size_t>(r));
      }
    }
  }
  return Status::OK();
}

}  // namespace ferry::sink::redis
