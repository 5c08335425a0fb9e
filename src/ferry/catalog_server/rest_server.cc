#include "ferry/catalog_server/rest_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "ferry/base/log.h"
#include "ferry/catalog_server/handler_internal.h"

namespace ferry::catalog_server {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 422:
      return "Unprocessable Content";
    case 503:
      return "Service Unavailable";
    default:
      return status >= 500 ? "Internal Server Error" : "Error";
  }
}

// Equal strings, in a time that depends on their lengths only.
bool SameSecret(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

// Whether the request carries "Authorization: Bearer <token>".
bool Authorized(const mg_connection* conn, const std::string& token) {
  const char* h = mg_get_header(conn, "Authorization");
  if (h == nullptr) return false;
  const std::string v = h;
  if (v.size() < 7 || strncasecmp(v.c_str(), "Bearer ", 7) != 0) return false;
  size_t start = 7;
  while (start < v.size() && v[start] == ' ') ++start;
  return SameSecret(v.substr(start), token);
}

struct Listen {
  std::string host;  // "" for every interface
  int port = 0;
};

Result<Listen> ParseListen(const std::string& listen) {
  auto bad = [&] {
    return Status::InvalidArgument("the listen address is '" + listen +
                                   "'; it is host:port (127.0.0.1:8181, [::1]:8181, "
                                   "localhost:8181) or :port (every interface)");
  };
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return bad();
  const std::string port = listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    return bad();
  }
  Listen l;
  l.port = std::stoi(port);
  l.host = listen.substr(0, colon);
  if (l.host.size() >= 2 && l.host.front() == '[' && l.host.back() == ']') {
    l.host = l.host.substr(1, l.host.size() - 2);
  } else if (l.host.find(':') != std::string::npos) {
    return bad();  // an IPv6 address goes in brackets
  }
  if (l.host == "localhost") l.host = "127.0.0.1";
  if (!l.host.empty() &&
      l.host.find_first_not_of("0123456789abcdefABCDEF.:") != std::string::npos) {
    return Status::InvalidArgument("the listen address '" + listen +
                                   "' names a host; give an IP address (127.0.0.1, 0.0.0.0, "
                                   "[::1]) or localhost");
  }
  return l;
}

// Connects to the listener and hangs up at once.
void WakeListener(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    a.sin6_addr = in6addr_loopback;
    if (host != "::") ::inet_pton(AF_INET6, host.c_str(), &a.sin6_addr);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (host != "0.0.0.0") ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  ::close(fd);
}

bool SafePrefix(const std::string& p) {
  if (p.empty()) return false;
  for (unsigned char c : p) {
    if (c <= ' ' || c == '/' || c == '%' || c == '?' || c == '#' || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

struct RestCatalogServer::Impl {
  ServeOptions opts;
  RestHandler handler;
  mg_context* ctx = nullptr;

  Impl(const ServeOptions& o, lake::Catalog* catalog)
      : opts(o),
        handler(HandlerOptions{o.prefix, o.warehouse, o.config_defaults, o.vended}, catalog) {}

  static int OnRequest(mg_connection* conn) {
    auto* self = static_cast<Impl*>(mg_get_user_data(mg_get_context(conn)));
    return self->Serve(conn);
  }

  // Reads the body; false when it is larger than the limit.
  bool ReadBody(mg_connection* conn, const mg_request_info* info, std::string* body) const {
    if (info->content_length > 0 &&
        static_cast<uint64_t>(info->content_length) > opts.body_bytes_max) {
      return false;
    }
    // On the heap: civetweb's threads have small stacks.
    std::vector<char> buf(64 * 1024);
    for (;;) {
      const int n = mg_read(conn, buf.data(), buf.size());
      if (n <= 0) return true;
      if (body->size() + static_cast<size_t>(n) > opts.body_bytes_max) return false;
      body->append(buf.data(), static_cast<size_t>(n));
    }
  }

  static void Send(mg_connection* conn, const HttpResponse& r, bool head) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + Reason(r.status) + "\r\n";
    const bool has_body = r.status != 204 && r.status != 304;
    if (has_body) {
      out += "Content-Type: application/json\r\nContent-Length: " +
             std::to_string(head ? 0 : r.body.size()) + "\r\n";
    }
    for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
    out += "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
    mg_write(conn, out.data(), out.size());
    if (has_body && !head && !r.body.empty()) mg_write(conn, r.body.data(), r.body.size());
  }

  HttpResponse Answer(mg_connection* conn, const mg_request_info* info, HttpRequest& req) const {
    if (!opts.token.empty() && !Authorized(conn, opts.token)) {
      HttpResponse r = ErrorResponse(401, "NotAuthorizedException",
                                     "this catalog needs the header 'Authorization: Bearer "
                                     "<token>' with the token the server was started with "
                                     "(FERRY_CATALOG_TOKEN)");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
    if (!ReadBody(conn, info, &req.body)) {
      return ErrorResponse(413, "BadRequestException",
                           "the request body is larger than " +
                               std::to_string(opts.body_bytes_max) + " bytes, this server's limit");
    }
    if (const char* inm = mg_get_header(conn, "If-None-Match")) req.if_none_match = inm;
    if (const char* d = mg_get_header(conn, "X-Iceberg-Access-Delegation")) {
      req.access_delegation = d;
    }
    return HandleOnOwnThread(req);
  }

  // The catalog's work (SQL, file reads, JSON) runs on a thread of the default stack size:
  // civetweb's threads have small stacks. At most `threads` at once, as civetweb's.
  HttpResponse HandleOnOwnThread(const HttpRequest& req) const {
    HttpResponse out;
    auto work = [&] {
      try {
        out = handler.Handle(req);
      } catch (const std::exception& e) {
        out = ErrorResponse(500, "InternalServerError",
                            std::string("the server failed on this request: ") + e.what());
      }
    };
    try {
      std::thread t(work);
      t.join();
    } catch (const std::system_error& e) {
      return ErrorResponse(503, "ServiceUnavailableException",
                           std::string("the server cannot start a thread: ") + e.what());
    }
    return out;
  }

  int Serve(mg_connection* conn) const {
    const auto start = std::chrono::steady_clock::now();
    const mg_request_info* info = mg_get_request_info(conn);
    HttpRequest req;
    req.method = info->request_method ? info->request_method : "";
    // decode_url is off: the path is as sent, and the handler decodes each segment itself.
    const char* uri = info->local_uri_raw ? info->local_uri_raw : info->local_uri;
    req.path = uri ? uri : "";
    req.query = info->query_string ? info->query_string : "";
    const HttpResponse r = Answer(conn, info, req);
    Send(conn, r, req.method == "HEAD");
    const auto ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    FERRY_LOG(kDebug) << "catalog server: " << req.method << " " << req.path << " " << r.status
                      << " " << static_cast<int64_t>(ms) << "ms";
    return r.status;
  }

  static int OnLog(const mg_connection*, const char* message) {
    FERRY_LOG(kDebug) << "catalog server (civetweb): " << message;
    return 1;  // handled: civetweb prints nothing itself
  }
};

RestCatalogServer::RestCatalogServer(std::unique_ptr<Impl> impl, std::string host, int port)
    : impl_(std::move(impl)), host_(std::move(host)), port_(port) {}

RestCatalogServer::~RestCatalogServer() {
  if (impl_ && impl_->ctx) {
    // civetweb's listener notices the stop only when its poll (2 s) ends or a connection comes:
    // connections are made until it has stopped.
    std::atomic<bool> stopped{false};
    std::thread waker([&] {
      while (!stopped.load()) {
        WakeListener(host_, port_);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    mg_stop(impl_->ctx);
    stopped = true;
    waker.join();
  }
  mg_exit_library();
}

std::string RestCatalogServer::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_);
}

Result<std::unique_ptr<RestCatalogServer>> RestCatalogServer::Start(const ServeOptions& options,
                                                                    lake::Catalog* catalog) {
  FERRY_ASSIGN_OR_RETURN(Listen l, ParseListen(options.listen));
  if (!SafePrefix(options.prefix)) {
    return Status::InvalidArgument("the catalog name '" + options.prefix +
                                   "' cannot be a URL path segment (the REST prefix): pick one "
                                   "without '/', '%', '?', '#', spaces or control characters");
  }
  if (options.warehouse.empty()) {
    return Status::InvalidArgument("the REST catalog server needs the warehouse it serves");
  }
  if (options.token.empty() && !IsLoopbackHost(l.host)) {
    return Status::InvalidArgument(
        "refusing to serve the catalog on " + options.listen +
        " without authentication: anyone who reaches it could change every table. Set "
        "FERRY_CATALOG_TOKEN to a secret clients send as 'Authorization: Bearer <token>', or "
        "listen on a loopback address (127.0.0.1)");
  }
  auto impl = std::make_unique<Impl>(options, catalog);
  const std::string host = l.host.empty() ? "0.0.0.0" : l.host;
  const bool v6 = host.find(':') != std::string::npos;
  const std::string ports = (v6 ? "[" + host + "]" : host) + ":" + std::to_string(l.port);
  const std::string threads = std::to_string(std::max(1, options.threads));
  const char* config[] = {"listening_ports",
                          ports.c_str(),
                          "num_threads",
                          threads.c_str(),
                          "request_timeout_ms",
                          "60000",
                          "enable_keep_alive",
                          "no",
                          "decode_url",
                          "no",
                          nullptr};
  mg_callbacks callbacks{};
  callbacks.begin_request = &Impl::OnRequest;
  callbacks.log_message = &Impl::OnLog;
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = impl.get();
  init.configuration_options = config;
  char error_text[256] = {0};
  unsigned error_code = 0;
  mg_error_data error{};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof error_text;
  mg_init_library(0);
  impl->ctx = mg_start2(&init, &error);
  if (impl->ctx == nullptr) {
    mg_exit_library();
    return Status::InvalidArgument("cannot serve the REST catalog on " + options.listen + ": " +
                                   (error_text[0] ? error_text : "civetweb could not start") +
                                   "; is another process listening there? Pick a free port");
  }
  mg_server_port bound[4];
  const int n = mg_get_server_ports(impl->ctx, 4, bound);
  const int port = n > 0 ? bound[0].port : l.port;
  return std::unique_ptr<RestCatalogServer>(new RestCatalogServer(std::move(impl), host, port));
}

}  // namespace ferry::catalog_server
