// The Iceberg REST catalog protocol, client side: the catalogs most lakes are reached through
// (Apache Polaris, Snowflake Open Catalog, Unity Catalog, AWS Glue and S3 Tables, Lakekeeper,
// Nessie, Gravitino, R2 Data Catalog, and `ferry catalog serve`).
//
// Opening: GET /v1/config (with ?warehouse=) first; the server's `defaults` are applied under the
// client's settings and its `overrides` over them (`prefix`, `uri`); its `endpoints` list, when
// it gives one, is what may be called (a missing endpoint is kNotSupported naming it, never a
// request the server would refuse).
//
// Authentication, per request: a bearer token (`token`), or OAuth2 client credentials
// (`credential` "id:secret", `scope`, `oauth2-server-uri`): the token is fetched at open,
// refreshed when 80% of its lifetime has passed and again on a 401 or 419 answer, so a sync that
// runs for days outlives any one token; or AWS SigV4 signing of every catalog request
// (`signing_region`, `signing_name`; the AWS credentials of the environment), as Glue's and S3
// Tables' endpoints require. Secrets never reach a message, a log line or Describe().
//
// Failures: reads and the calls that change nothing twice are retried after a lost connection,
// 429 and 5xx, with backoff. A commit is retried only when the server says it was not applied
// (503, or the request never left); a commit sent whose answer was lost, or answered 500, 502 or
// 504, is kCommitStateUnknown (the spec's "commit state unknown"), settled by the caller reading
// the table back. 409 on a commit is kCommitFailed.
//
// Thread-safety: a RestCatalog may be shared by threads; requests run concurrently.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "ferry/base/status.h"
#include "ferry/lake/catalog.h"

namespace ferry::lake {

struct RestCatalogOptions {
  std::string uri;         // "rest+https://host[:port][/path]" or "rest+http://..."
  std::string warehouse;   // sent to /v1/config as ?warehouse=; empty: not sent
  std::string token;       // a bearer token
  std::string credential;  // OAuth2 client credentials "client_id:client_secret"
  std::string scope = "catalog";
  std::string oauth2_server_uri;  // default: <uri>/v1/oauth/tokens
  std::string signing_region;     // SigV4 signing of catalog requests, e.g. "us-east-1"
  std::string signing_name;       // the service signed for, e.g. "glue" or "s3tables"
  // Extra headers sent with every request (e.g. a tenant header some servers need).
  std::map<std::string, std::string> headers;
  // X-Iceberg-Access-Delegation on table loads and creates: "vended-credentials",
  // "remote-signing", or empty for none.
  std::string access_delegation;
  int64_t connect_timeout_ms = 10000;
  int64_t timeout_ms = 120000;
  int max_attempts = 6;  // for requests that may be sent again
};

// Opens the catalog: fetches the token (OAuth2) and the server's configuration. Errors:
// kInvalidArgument (a malformed uri, conflicting authentication settings), kUnavailable (the
// server cannot be reached), kPermissionDenied (the credentials were refused: 401/403 named as
// such), kNotFound (the warehouse is unknown to the server).
Result<std::unique_ptr<Catalog>> OpenRestCatalog(const RestCatalogOptions& options);

// "rest+https://host/path" -> "https://host/path"; kInvalidArgument for anything else.
Result<std::string> RestBaseUrl(const std::string& uri);

// A namespace in a URL path: its levels ('.'-separated) joined by %1F, each percent-encoded.
std::string EncodeNamespacePath(const std::string& ns);

}  // namespace ferry::lake
