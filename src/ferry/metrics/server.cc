#include "ferry/metrics/server.h"

#include <CivetServer.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "ferry/metrics/metrics.h"

namespace ferry::metrics {
namespace {

void Reply(mg_connection* conn, int code, const char* reason, const char* type,
           const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: "
            "no-store\r\nConnection: close\r\n\r\n",
            code, reason, type, body.size());
  mg_write(conn, body.data(), body.size());
}

// The exact path only ("/metrics", not "/metrics/x": civetweb matches handlers by prefix).
bool Exact(mg_connection* conn, const char* path) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr || std::strcmp(info->local_uri, path) != 0) {
    Reply(conn, 404, "Not Found", "text/plain; charset=utf-8", "not found\n");
    return false;
  }
  return true;
}

class MetricsHandler final : public CivetHandler {
 public:
  bool handleGet(CivetServer*, mg_connection* conn) override {
    if (Exact(conn, "/metrics")) {
      Reply(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", Metrics::Get().Text());
    }
    return true;
  }
};

class HealthHandler final : public CivetHandler {
 public:
  bool handleGet(CivetServer*, mg_connection* conn) override {
    if (Exact(conn, "/healthz")) Reply(conn, 200, "OK", "text/plain; charset=utf-8", "ok\n");
    return true;
  }
};

class ReadyHandler final : public CivetHandler {
 public:
  explicit ReadyHandler(std::function<Readiness()> ready) : ready_(std::move(ready)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    if (!Exact(conn, "/readyz")) return true;
    const Readiness r = ready_();
    if (r.ready) {
      Reply(conn, 200, "OK", "text/plain; charset=utf-8", "ready\n");
    } else {
      Reply(conn, 503, "Service Unavailable", "text/plain; charset=utf-8",
            "not ready: " + r.reason + "\n");
    }
    return true;
  }

 private:
  std::function<Readiness()> ready_;
};

// Whether host:port can be listened on (a socket bound and closed again).
Status ProbeListen(const std::string& host, const std::string& port, const std::string& listen) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return Status::InvalidArgument("metrics.listen is '" + listen + "': '" + host +
                                   "' is not an address of this machine");
  }
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, 0);
  int err = 0;
  if (fd < 0) {
    err = errno;
  } else {
    const int one = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (err == EADDRINUSE) {
    return Status::InvalidArgument(listen +
                                   " is in use: another process listens there (metrics"
                                   ".listen, or --metrics); pick a free port or stop that process");
  }
  if (err != 0) {
    return Status::InvalidArgument("cannot serve metrics on " + listen +
                                   " (metrics.listen): " + std::strerror(err));
  }
  return Status::OK();
}

}  // namespace

struct Server::Impl {
  MetricsHandler metrics;
  HealthHandler health;
  ReadyHandler ready;
  std::unique_ptr<CivetServer> server;
  explicit Impl(std::function<Readiness()> r) : ready(std::move(r)) {}
};

Server::Server(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

Server::~Server() {
  if (impl_ && impl_->server) impl_->server->close();
}

Result<std::unique_ptr<Server>> Server::Start(const std::string& listen,
                                              std::function<Readiness()> ready) {
  const size_t colon = listen.rfind(':');
  const std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    return Status::InvalidArgument("metrics.listen is '" + listen +
                                   "'; it is host:port (127.0.0.1:9464) or :port (every "
                                   "interface)");
  }
  // civetweb takes "port" alone for every interface.
  const std::string host = listen.substr(0, colon);
  const std::string where = host.empty() ? port : listen;
  auto impl = std::make_unique<Impl>(std::move(ready));
  const std::vector<std::string> options = {
      "listening_ports",    where,   "num_threads",       "2",
      "request_timeout_ms", "10000", "enable_keep_alive", "no"};
  // civetweb says only "null context when constructing CivetServer" when it cannot listen: the
  // address is tried here first, so that the message says what is wrong.
  if (Status probe = ProbeListen(host, port, listen); !probe.ok()) return probe;
  try {
    impl->server = std::make_unique<CivetServer>(options);
  } catch (const CivetException&) {
    return Status::InvalidArgument("cannot serve metrics on " + listen +
                                   " (metrics.listen); is another process listening there? Pick "
                                   "a free port");
  }
  impl->server->addHandler("/metrics", impl->metrics);
  impl->server->addHandler("/healthz", impl->health);
  impl->server->addHandler("/readyz", impl->ready);
  const std::vector<int> ports = impl->server->getListeningPorts();
  const int bound = ports.empty() ? 0 : ports.front();
  return std::unique_ptr<Server>(new Server(std::move(impl), bound));
}

}  // namespace ferry::metrics
