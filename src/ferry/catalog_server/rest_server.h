// `ferry catalog serve`: a lake::Catalog (ferry's SQL catalog) served over the Iceberg REST
// catalog protocol (the OpenAPI document rest-catalog-open-api.yaml), so that DuckDB, pyiceberg,
// Spark, Trino, iceberg-js and ferry's own REST client attach to a ferry lake with nothing else
// installed.
//
// What it serves: GET /v1/config and the routes RestHandler::Endpoints() lists (namespaces,
// tables, commits, multi-table transactions, renames, metrics reports), under /v1/{prefix}/...
// and /v1/... Every non-2xx answer is an IcebergErrorResponse {"error": {message, type, code}}.
// The metadata it returns is the metadata file as stored; commits are checked and applied by the
// catalog (requirements, updates, compare-and-swap), so a 409 means nothing changed and a 500 of
// type CommitStateUnknownException means the outcome is not known.
//
// Security: with a token, every request (GET /v1/config too) must carry
// "Authorization: Bearer <token>" (compared in constant time), else 401. Without one, Start
// refuses any address but a loopback one. Neither the token nor request bodies are ever logged.
// Plain HTTP: put a TLS proxy in front for other machines.
//
// Limits: request bodies up to body_bytes_max (larger: 413); `threads` requests at once (the
// catalog serializes its own calls).
//
// Thread-safety: Start and the destructor from one thread; requests run on civetweb's threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ferry/base/status.h"
#include "ferry/lake/catalog.h"

namespace ferry::catalog_server {

struct ServeOptions {
  // "host:port" (an IP address, "[v6]" or localhost), or ":port" for every interface; port 0
  // takes a free port (port() says which).
  std::string listen = "127.0.0.1:8181";
  // The {prefix} clients put in their paths, sent as the `prefix` override of /v1/config: the
  // catalog's name.
  std::string prefix = "ferry";
  // The served warehouse (a URI: file:///abs/folder, s3://bucket/prefix). Tables created
  // without a location go to <warehouse>/<namespace>/<table>; a table location outside it is
  // refused (400), so that clients make the server write only below it.
  std::string warehouse;
  // The bearer token every request must carry; empty: none (loopback addresses only).
  std::string token;
  // The `defaults` of /v1/config: settings for the clients' FileIO (an S3 endpoint, its region;
  // never a secret).
  std::map<std::string, std::string> config_defaults;
  // Storage settings with credentials, handed to clients that send
  // "X-Iceberg-Access-Delegation: vended-credentials" (the Iceberg S3FileIO keys:
  // s3.access-key-id, ...); empty: nothing is vended. They are secrets: never logged.
  std::map<std::string, std::string> vended;
  uint64_t body_bytes_max = 64ull << 20;
  int threads = 8;
};

class RestCatalogServer {
 public:
  // Listens and serves `catalog` (not owned; it outlives the server). Errors, all
  // kInvalidArgument: a malformed listen address or prefix, no warehouse, a non-loopback
  // address without a token (naming FERRY_CATALOG_TOKEN), an address that cannot be bound
  // (naming it).
  static Result<std::unique_ptr<RestCatalogServer>> Start(const ServeOptions& options,
                                                          lake::Catalog* catalog);
  // Stops listening and waits for the requests in flight.
  ~RestCatalogServer();
  RestCatalogServer(const RestCatalogServer&) = delete;
  RestCatalogServer& operator=(const RestCatalogServer&) = delete;

  int port() const { return port_; }
  // The address it listens on ("127.0.0.1", "::1", "0.0.0.0").
  const std::string& host() const { return host_; }
  // "http://127.0.0.1:8181" ("http://[::1]:8181").
  std::string url() const;

 private:
  struct Impl;
  RestCatalogServer(std::unique_ptr<Impl> impl, std::string host, int port);
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
};

// Whether `host` (of a listen address) is a loopback address: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackHost(const std::string& host);

}  // namespace ferry::catalog_server
