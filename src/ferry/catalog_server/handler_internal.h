// The Iceberg REST catalog protocol over a lake::Catalog, apart from HTTP transport: a request
// (method, raw path, query, body) in, a response (status, JSON body, headers) out. The server
// (rest_server.cc) adds the transport, authentication, the body limit and the request log.
//
// Routes: every one of Endpoints(), under /v1/{prefix}/... with the served prefix and, to be
// lenient, under /v1/... too. An unknown path is 404 (NotFoundException), a known path with a
// method it does not serve is 405 with an Allow header. Every non-2xx answer carries the
// IcebergErrorResponse body {"error": {"message", "type", "code"}}.
//
// Names: a namespace in a path is its levels joined by 0x1F (%1F) and in JSON an array of
// levels; the SQL catalog stores the levels joined by '.', so a level holding a '.' (or empty)
// is refused (400), as it could not be told apart from two levels.
//
// Internal to the catalog server. Thread-safety: Handle may run on many threads at once; the
// catalog serializes (lake::Catalog's contract).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/lake/catalog.h"

namespace ferry::catalog_server {

struct HttpRequest {
  std::string method;  // "GET", "HEAD", "POST", "DELETE", ...
  std::string path;    // as sent: percent-encoded, without the query
  std::string query;   // as sent, without '?'
  std::string body;
  std::string if_none_match;      // the If-None-Match header; empty when absent
  std::string access_delegation;  // the X-Iceberg-Access-Delegation header; empty when absent
};

struct HttpResponse {
  int status = 200;
  std::string body;                                          // JSON text; empty for 204 and 304
  std::vector<std::pair<std::string, std::string>> headers;  // ETag, Allow, ...
};

// The IcebergErrorResponse of `code`, `type` and `message`.
HttpResponse ErrorResponse(int code, const std::string& type, const std::string& message);

// The answer to a failed catalog call: 404 (of `not_found_type`), 409 (AlreadyExistsException;
// CommitFailedException for kCommitFailed), 400, 406, 403, 503, 500 (CommitStateUnknownException
// for kCommitStateUnknown, else InternalServerError).
HttpResponse StatusResponse(const Status& s, const char* not_found_type);

struct HandlerOptions {
  std::string prefix;     // the {prefix} of the paths (the catalog's name)
  std::string warehouse;  // URI; new tables go below it and every table location must
  std::map<std::string, std::string> defaults;  // the `defaults` of GET /v1/config
  // Storage settings handed to clients that ask for vended credentials (the table's `config`
  // and `storage-credentials`, and GET .../credentials); empty: none are vended.
  std::map<std::string, std::string> vended;
};

class RestHandler {
 public:
  // `catalog` is not owned and outlives the handler.
  RestHandler(HandlerOptions options, lake::Catalog* catalog);

  HttpResponse Handle(const HttpRequest& request) const;

  // "GET /v1/{prefix}/namespaces", ...: every route served, as /v1/config lists them.
  static std::vector<std::string> Endpoints();

 private:
  HttpResponse Dispatch(const HttpRequest& req, const std::vector<std::string>& segs,
                        const std::map<std::string, std::string>& query) const;

  HttpResponse GetConfig() const;
  HttpResponse ListNamespaces(const std::map<std::string, std::string>& query) const;
  HttpResponse CreateNamespace(const std::string& body) const;
  HttpResponse LoadNamespace(const std::string& ns, bool head) const;
  HttpResponse DropNamespace(const std::string& ns) const;
  HttpResponse UpdateProperties(const std::string& ns, const std::string& body) const;
  HttpResponse ListTables(const std::string& ns,
                          const std::map<std::string, std::string>& query) const;
  HttpResponse CreateTable(const std::string& ns, const std::string& body, bool vend) const;
  HttpResponse LoadCredentials(const lake::TableIdent& t) const;
  // Whether the request asks for vended credentials and this server vends them.
  bool Vends(const HttpRequest& req) const;
  // The `config` of a LoadTableResult, with the vended settings when `vend`; adds the
  // `storage-credentials` too.
  void AddConfig(lake::Json& body, const std::string& location, bool vend) const;
  HttpResponse LoadTable(const lake::TableIdent& t, const std::map<std::string, std::string>& query,
                         const std::string& if_none_match, bool head, bool vend) const;
  HttpResponse CommitTable(const lake::TableIdent& t, const std::string& body) const;
  HttpResponse CreateByTransaction(const lake::TableIdent& t, const lake::Json& requirements,
                                   const lake::Json& updates) const;
  HttpResponse DropTable(const lake::TableIdent& t,
                         const std::map<std::string, std::string>& query) const;
  HttpResponse RenameTable(const std::string& body) const;
  HttpResponse CommitTransaction(const std::string& body) const;

  // nullopt when the namespace exists; else the 404 (or the catalog's error).
  std::optional<HttpResponse> RequireNamespace(const std::string& ns) const;
  // 400 when an update moves a table outside the warehouse.
  std::optional<HttpResponse> CheckLocations(const lake::Json& updates) const;

  HandlerOptions opts_;
  lake::Catalog* catalog_;
};

}  // namespace ferry::catalog_server
