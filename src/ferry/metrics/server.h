// The HTTP endpoints a running ferry answers on `metrics.listen` (civetweb, the server
// prometheus-cpp's own exposer uses):
//   GET /metrics  every series of Metrics::Get() in the Prometheus text format;
//   GET /healthz  200 "ok" while the process runs (liveness);
//   GET /readyz   200 "ready" when `ready()` says so, else 503 with its reason (readiness: the
//                 last round reached the source and the destination, its last checkpoint is
//                 recent; the CLI decides).
// Anything else is 404. Nothing it serves holds a secret (metrics carry names, never settings).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ferry/base/status.h"

namespace ferry::metrics {

struct Readiness {
  bool ready = false;
  std::string reason;  // why not, in words
};

class Server {
 public:
  // `listen`: "host:port" or ":port" (all interfaces); port 0 takes a free one. An address that
  // cannot be bound is kInvalidArgument naming it and the setting.
  static Result<std::unique_ptr<Server>> Start(const std::string& listen,
                                               std::function<Readiness()> ready);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace ferry::metrics
