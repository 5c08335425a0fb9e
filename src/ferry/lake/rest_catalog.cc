#include "ferry/lake/rest_catalog.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/base/uuid.h"
#include "ferry/config/config.h"
#include "ferry/lake/s3_client.h"
#include "ferry/lake/s3_settings.h"
#include "ferry/lake/sigv4.h"
#include "ferry/lake/table_commit.h"

namespace ferry::lake {
namespace {

constexpr int64_t kBackoffFirstMs = 100;
constexpr int64_t kBackoffMaxMs = 5000;
constexpr size_t kMaxErrorText = 400;  // characters of a server's message kept in ours

std::string PercentEncode(std::string_view s) { return UriEncode(s, false); }

std::vector<std::string> Levels(const std::string& ns) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t dot = ns.find('.', start);
    out.push_back(ns.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

Json NamespaceJson(const std::string& ns) { return Json(Levels(ns)); }

std::string JoinLevels(const Json& levels) {
  std::string out;
  if (!levels.is_array()) return out;
  for (const auto& l : levels) {
    if (!out.empty()) out += '.';
    if (l.is_string()) out += l.get<std::string>();
  }
  return out;
}

struct HttpResponse {
  long status = 0;
  std::string body;
};

size_t OnWrite(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

// The message of an IcebergErrorResponse, or the start of whatever the body is.
std::string ErrorText(const HttpResponse& r) {
  Json j = Json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) {
    // OAuth2's error shape: {"error": "invalid_client", "error_description": "..."}.
    std::string text = j["error"].get<std::string>();
    if (j.contains("error_description") && j["error_description"].is_string()) {
      text += ": " + j["error_description"].get<std::string>().substr(0, kMaxErrorText);
    }
    return text;
  }
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const Json& e = j["error"];
    std::string type = e.value("type", std::string());
    std::string msg = e.value("message", std::string());
    if (msg.size() > kMaxErrorText) msg = msg.substr(0, kMaxErrorText) + "...";
    return type.empty() ? msg : type + ": " + msg;
  }
  std::string text = r.body.substr(0, kMaxErrorText);
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text.empty() ? "no explanation" : text;
}

enum class Kind {
  kRead,    // safe to send again
  kCommit,  // changes the table: sent again only when surely not applied
  kCreate,  // creates something: a repeat finds it existing, which the caller settles
};

class RestCatalog final : public Catalog {
 public:
  explicit RestCatalog(RestCatalogOptions opts) : opts_(std::move(opts)) {}
  ~RestCatalog() override {
    for (CURL* c : idle_) curl_easy_cleanup(c);
  }

  Status Open() {
    InitCurlOnce();
    FERRY_ASSIGN_OR_RETURN(base_, RestBaseUrl(opts_.uri));
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
    display_ = config::Redact(base_);  // a URL may carry user:password@
    const int ways =
        !opts_.token.empty() + !opts_.credential.empty() + !opts_.signing_region.empty();
    if (ways > 1) {
      return Status::InvalidArgument(
          "destination.rest: set one of token, credential (OAuth2) and signing_region (SigV4), "
          "not several");
    }
    if (!opts_.signing_region.empty()) {
      if (opts_.signing_name.empty()) opts_.signing_name = "execute-api";
      S3Config none;
      FERRY_ASSIGN_OR_RETURN(S3Settings s3, ResolveS3Settings(none, ProcessEnvironment()));
      aws_ = s3.credentials;
      sign_v4_ = true;
    }
    if (!opts_.credential.empty() && opts_.credential.find(':') == std::string::npos) {
      return Status::InvalidArgument(
          "destination.rest.credential must be client_id:client_secret (OAuth2 client "
          "credentials)");
    }
    if (!opts_.token.empty()) token_ = opts_.token;
    if (!opts_.credential.empty()) FERRY_RETURN_IF_ERROR(FetchToken());
    std::string path = "/v1/config";
    if (!opts_.warehouse.empty()) path += "?warehouse=" + PercentEncode(opts_.warehouse);
    FERRY_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", base_ + path, "", Kind::kRead, ""));
    if (r.status == 404) {
      return Status::NotFound(
          "the REST catalog " + display_ + " answered GET /v1/config with 404 (" + ErrorText(r) +
          "): check that destination.catalog is the catalog's base URL, the part before /v1" +
          (opts_.warehouse.empty() ? std::string()
                                   : ", and that the server knows the warehouse '" +
                                         opts_.warehouse + "' (destination.warehouse)"));
    }
    FERRY_RETURN_IF_ERROR(Check(r, "reading the catalog's configuration (GET /v1/config)"));
    Json config = Json::parse(r.body, nullptr, false);
    if (!config.is_object()) {
      return Status::Corruption("the REST catalog " + display_ +
                                " answered GET /v1/config with something that is not JSON; is "
                                "destination.catalog the catalog's base URL?");
    }
    std::map<std::string, std::string> props;
    for (const char* part : {"defaults", "overrides"}) {
      if (!config.contains(part) || !config[part].is_object()) continue;
      for (auto it = config[part].begin(); it != config[part].end(); ++it) {
        if (it.value().is_string()) props[it.key()] = it.value().get<std::string>();
      }
    }
    if (props.count("uri")) {
      auto b = props["uri"];
      while (!b.empty() && b.back() == '/') b.pop_back();
      if (b.rfind("http://", 0) == 0 || b.rfind("https://", 0) == 0) base_ = b;
    }
    prefix_ = props.count("prefix") ? props["prefix"] : "";
    if (config.contains("endpoints") && config["endpoints"].is_array()) {
      advertised_ = true;
      for (const auto& e : config["endpoints"]) {
        if (e.is_string()) endpoints_.insert(e.get<std::string>());
      }
    }
    return Status::OK();
  }

  // ---- namespaces ----

  Status CreateNamespace(const std::string& ns,
                         const std::map<std::string, std::string>& properties) override {
    FERRY_RETURN_IF_ERROR(Offers("POST /v1/{prefix}/namespaces"));
    Json body{{"namespace", NamespaceJson(ns)}, {"properties", Json::object()}};
    for (const auto& [k, v] : properties) body["properties"][k] = v;
    FERRY_ASSIGN_OR_RETURN(HttpResponse r,
                           Send("POST", Url("/namespaces"), body.dump(), Kind::kCreate, ""));
    if (r.status == 409) return Status::OK();  // it exists
    return Check(r, "creating namespace '" + ns + "'");
  }

  Result<std::vector<std::string>> ListNamespaces(const std::string& parent) override {
    FERRY_RETURN_IF_ERROR(Offers("GET /v1/{prefix}/namespaces"));
    std::vector<std::string> out;
    std::string page;
    for (;;) {
      std::string url = Url("/namespaces");
      std::string sep = "?";
      if (!parent.empty()) {
        url += sep + "parent=" + PercentEncode(NamespacePath(parent, '\x1f'));
        sep = "&";
      }
      if (!page.empty()) url += sep + "pageToken=" + PercentEncode(page);
      FERRY_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", url, "", Kind::kRead, ""));
      FERRY_RETURN_IF_ERROR(Check(r, "listing namespaces"));
      FERRY_ASSIGN_OR_RETURN(Json j, ParseBody(r, "the namespace list"));
      for (const auto& n : j.value("namespaces", Json::array())) out.push_back(JoinLevels(n));
      if (!j.contains("next-page-token") || !j["next-page-token"].is_string()) break;
      page = j["next-page-token"].get<std::string>();
      if (page.empty()) break;
    }
    return out;
  }

  Result<std::optional<std::map<std::string, std::string>>> LoadNamespace(
      const std::string& ns) override {
    FERRY_RETURN_IF_ERROR(Offers("GET /v1/{prefix}/namespaces/{namespace}"));
    FERRY_ASSIGN_OR_RETURN(
        HttpResponse r,
        Send("GET", Url("/namespaces/" + EncodeNamespacePath(ns)), "", Kind::kRead, ""));
    if (r.status == 404) return std::optional<std::map<std::string, std::string>>();
    FERRY_RETURN_IF_ERROR(Check(r, "loading namespace '" + ns + "'"));
    FERRY_ASSIGN_OR_RETURN(Json j, ParseBody(r, "the namespace"));
    std::map<std::string, std::string> props;
    if (j.contains("properties") && j["properties"].is_object()) {
      for (auto it = j["properties"].begin(); it != j["properties"].end(); ++it) {
        if (it.value().is_string()) props[it.key()] = it.value().get<std::string>();
      }
    }
    return std::optional<std::map<std::string, std::string>>(std::move(props));
  }

  Status UpdateNamespace(const std::string& ns, const std::map<std::string, std::string>& set,
                         const std::vector<std::string>& remove) override {
    FERRY_RETURN_IF_ERROR(Offers("POST /v1/{prefix}/namespaces/{namespace}/properties"));
    Json body{{"removals", remove}, {"updates", Json::object()}};
    for (const auto& [k, v] : set) body["updates"][k] = v;
    FERRY_ASSIGN_OR_RETURN(
        HttpResponse r, Send("POST", Url("/namespaces/" + EncodeNamespacePath(ns) + "/properties"),
                             body.dump(), Kind::kRead, ""));
    return Check(r, "updating the properties of namespace '" + ns + "'");
  }

  Status DropNamespace(const std::string& ns) override {
    FERRY_RETURN_IF_ERROR(Offers("DELETE /v1/{prefix}/namespaces/{namespace}"));
    FERRY_ASSIGN_OR_RETURN(
        HttpResponse r,
        Send("DELETE", Url("/namespaces/" + EncodeNamespacePath(ns)), "", Kind::kRead, ""));
    return Check(r, "dropping namespace '" + ns + "'");
  }

  // ---- tables ----

  Result<std::vector<TableIdent>> ListTables(const std::string& ns) override {
    FERRY_RETURN_IF_ERROR(Offers("GET /v1/{prefix}/namespaces/{namespace}/tables"));
    std::vector<TableIdent> out;
    std::string page;
    for (;;) {
      std::string url = Url("/namespaces/" + EncodeNamespacePath(ns) + "/tables");
      if (!page.empty()) url += "?pageToken=" + PercentEncode(page);
      FERRY_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", url, "", Kind::kRead, ""));
      if (r.status == 404) return out;  // no namespace: no tables
      FERRY_RETURN_IF_ERROR(Check(r, "listing the tables of namespace '" + ns + "'"));
      FERRY_ASSIGN_OR_RETURN(Json j, ParseBody(r, "the table list"));
      for (const auto& id : j.value("identifiers", Json::array())) {
        out.push_back(TableIdent{JoinLevels(id.value("namespace", Json::array())),
                                 id.value("name", std::string())});
      }
      if (!j.contains("next-page-token") || !j["next-page-token"].is_string()) break;
      page = j["next-page-token"].get<std::string>();
      if (page.empty()) break;
    }
    return out;
  }

  Result<std::optional<LoadedTable>> LoadTable(const TableIdent& t) override {
    FERRY_RETURN_IF_ERROR(Offers("GET /v1/{prefix}/namespaces/{namespace}/tables/{table}"));
    FERRY_ASSIGN_OR_RETURN(HttpResponse r,
                           Send("GET", TableUrl(t), "", Kind::kRead, opts_.access_delegation));
    if (r.status == 404) return std::optional<LoadedTable>();
    FERRY_RETURN_IF_ERROR(Check(r, "loading table " + t.ToString()));
    FERRY_ASSIGN_OR_RETURN(LoadedTable loaded, ParseLoaded(r, t));
    return std::optional<LoadedTable>(std::move(loaded));
  }

  Result<std::map<std::string, std::string>> LoadStorageConfig(const TableIdent& t) override {
    const char* endpoint = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials";
    if (!Offers(endpoint, /*assumed=*/false).ok()) return Catalog::LoadStorageConfig(t);
    FERRY_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", TableUrl(t) + "/credentials", "",
                                                Kind::kRead, opts_.access_delegation));
    FERRY_RETURN_IF_ERROR(Check(r, "loading the storage credentials of table " + t.ToString()));
    FERRY_ASSIGN_OR_RETURN(Json j, ParseBody(r, "the storage credentials"));
    std::map<std::string, std::string> config;
    MergeStorageCredentials(j, "", &config);
    return config;
  }

  Result<LoadedTable> CreateTable(const TableIdent& t, const TableMetadata& initial) override {
    FERRY_RETURN_IF_ERROR(Offers("POST /v1/{prefix}/namespaces/{namespace}/tables"));
    const Json& doc = initial.doc();
    Json body{{"name", t.name}, {"stage-create", false}};
    for (const auto& s : doc.value("schemas", Json::array())) {
      if (s.value("schema-id", -1) == initial.current_schema_id()) body["schema"] = s;
    }
    for (const auto& s : doc.value("partition-specs", Json::array())) {
      if (s.value("spec-id", -1) == initial.default_spec_id()) {
        body["partition-spec"] =
            Json{{"spec-id", s.value("spec-id", 0)}, {"fields", s.value("fields", Json::array())}};
      }
    }
    if (!initial.location().empty()) body["location"] = initial.location();
    body["properties"] = doc.value("properties", Json::object());
    FERRY_ASSIGN_OR_RETURN(HttpResponse r,
                           Send("POST", Url("/namespaces/" + EncodeNamespacePath(t.ns) + "/tables"),
                                body.dump(), Kind::kCreate, opts_.access_delegation));
    if (r.status == 409) {
      return Status::AlreadyExists("table " + t.ToString() + " already exists in " + Describe());
    }
    FERRY_RETURN_IF_ERROR(Check(r, "creating table " + t.ToString()));
    return ParseLoaded(r, t);
  }

  Result<LoadedTable> CommitTable(const TableCommit& commit) override {
    FERRY_RETURN_IF_ERROR(Offers("POST /v1/{prefix}/namespaces/{namespace}/tables/{table}"));
    const TableIdent& t = commit.ident;
    Json body{{"identifier", Identifier(t)},
              {"requirements", commit.requirements},
              {"updates", commit.updates}};
    const std::string what = "committing to table " + t.ToString() + " in " + Describe();
    FERRY_ASSIGN_OR_RETURN(HttpResponse r,
                           Send("POST", TableUrl(t), body.dump(), Kind::kCommit, ""));
    FaultPoint("rest.commit_answered");
    FERRY_RETURN_IF_ERROR(CheckCommit(r, what));
    FERRY_ASSIGN_OR_RETURN(LoadedTable out, ParseLoaded(r, t));
    return out;
  }

  Status CommitTables(const std::vector<TableCommit>& commits) override {
    FERRY_RETURN_IF_ERROR(Offers("POST /v1/{prefix}/transactions/commit", /*assumed=*/false));
    Json changes = Json::array();
    for (const auto& c : commits) {
      changes.push_back(Json{{"identifier", Identifier(c.ident)},
                             {"requirements", c.requirements},
                             {"updates", c.updates}});
    }
    Json body{{"table-changes", changes}};
    const std::string what = "committing " + std::to_string(commits.size()) +
                             " tables in one transaction in " + Describe();
    FERRY_ASSIGN_OR_RETURN(
        HttpResponse r, Send("POST", Url("/transactions/commit"), body.dump(), Kind::kCommit, ""));
    FaultPoint("rest.commit_answered");
    return CheckCommit(r, what);
  }

  Status DropTable(const TableIdent& t) override {
    FERRY_RETURN_IF_ERROR(Offers("DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}"));
    FERRY_ASSIGN_OR_RETURN(HttpResponse r, Send("DELETE", TableUrl(t), "", Kind::kRead, ""));
    return Check(r, "dropping table " + t.ToString());
  }

  Status RenameTable(const TableIdent& from, const TableIdent& to) override {
    FERRY_RETURN_IF_ERROR(Offers("POST /v1/{prefix}/tables/rename"));
    Json body{{"source", Identifier(from)}, {"destination", Identifier(to)}};
    FERRY_ASSIGN_OR_RETURN(HttpResponse r,
                           Send("POST", Url("/tables/rename"), body.dump(), Kind::kCreate, ""));
    return Check(r, "renaming table " + from.ToString() + " to " + to.ToString());
  }

  std::string Describe() const override { return "REST catalog " + display_; }

 private:
  static Json Identifier(const TableIdent& t) {
    return Json{{"namespace", NamespaceJson(t.ns)}, {"name", t.name}};
  }

  static std::string NamespacePath(const std::string& ns, char sep) {
    std::string out;
    for (const auto& l : Levels(ns)) {
      if (!out.empty()) out += sep;
      out += l;
    }
    return out;
  }

  std::string Url(const std::string& rest) const {
    return base_ + "/v1" + (prefix_.empty() ? "" : "/" + PercentEncode(prefix_)) + rest;
  }

  std::string TableUrl(const TableIdent& t) const {
    return Url("/namespaces/" + EncodeNamespacePath(t.ns) + "/tables/" + PercentEncode(t.name));
  }

  // kNotSupported when the server lists its endpoints and `endpoint` is not among them. A server
  // that lists none is assumed to offer the standard calls, not the optional ones (`assumed`).
  Status Offers(const std::string& endpoint, bool assumed = true) const {
    if (advertised_ ? endpoints_.count(endpoint) > 0 : assumed) return Status::OK();
    return Status::NotSupported("the REST catalog " + display_ + " does not offer " + endpoint +
                                (advertised_ ? " (it is not in the endpoints of its /v1/config)"
                                             : " (its /v1/config lists no endpoints)"));
  }

  Result<Json> ParseBody(const HttpResponse& r, const std::string& what) const {
    Json j = Json::parse(r.body, nullptr, false);
    if (!j.is_object()) {
      return Status::Corruption("the REST catalog " + display_ + " sent " + what +
                                " as something that is not a JSON object");
    }
    return j;
  }

  Result<LoadedTable> ParseLoaded(const HttpResponse& r, const TableIdent& t) const {
    FERRY_ASSIGN_OR_RETURN(Json j, ParseBody(r, "table " + t.ToString()));
    if (!j.contains("metadata") || !j["metadata"].is_object()) {
      return Status::Corruption("the REST catalog " + display_ + " sent table " + t.ToString() +
                                " without its metadata");
    }
    LoadedTable out;
    out.metadata_location = j.value("metadata-location", std::string());
    FERRY_ASSIGN_OR_RETURN(out.metadata, TableMetadata::FromJson(std::move(j["metadata"]),
                                                                 out.metadata_location.empty()
                                                                     ? "table " + t.ToString()
                                                                     : out.metadata_location));
    if (j.contains("config") && j["config"].is_object()) {
      for (auto it = j["config"].begin(); it != j["config"].end(); ++it) {
        if (it.value().is_string()) out.config[it.key()] = it.value().get<std::string>();
      }
    }
    MergeStorageCredentials(j, out.metadata.location(), &out.config);
    return out;
  }

  // The `storage-credentials` of an answer: the entry whose prefix is the longest one of
  // `location` (or the only one) goes over *config.
  static void MergeStorageCredentials(const Json& j, const std::string& location,
                                      std::map<std::string, std::string>* config) {
    if (!j.contains("storage-credentials") || !j["storage-credentials"].is_array()) return;
    const Json* best = nullptr;
    size_t best_len = 0;
    for (const auto& c : j["storage-credentials"]) {
      const std::string prefix = c.value("prefix", std::string());
      const bool fits = location.empty() || location.rfind(prefix, 0) == 0;
      if (fits && (best == nullptr || prefix.size() > best_len) && c.contains("config")) {
        best = &c;
        best_len = prefix.size();
      }
    }
    if (best == nullptr || !(*best)["config"].is_object()) return;
    for (auto it = (*best)["config"].begin(); it != (*best)["config"].end(); ++it) {
      if (it.value().is_string()) (*config)[it.key()] = it.value().get<std::string>();
    }
  }

  // The error of a non-2xx answer, by status.
  Status Check(const HttpResponse& r, const std::string& what) const {
    if (r.status >= 200 && r.status < 300) return Status::OK();
    const std::string m =
        what + " in " + Describe() + ": HTTP " + std::to_string(r.status) + " " + ErrorText(r);
    switch (r.status) {
      case 400:
      case 422:
        return Status::InvalidArgument(m);
      case 401:
      case 419:
        return Status::PermissionDenied(m +
                                        "; check destination.rest.token or .credential (the "
                                        "catalog did not accept them)");
      case 403:
        return Status::PermissionDenied(m + "; the catalog's principal lacks this privilege");
      case 404:
        return Status::NotFound(m);
      case 406:
        return Status::NotSupported(m);
      case 409:
        return Status::AlreadyExists(m);
      default:
        return Status::Unavailable(m);
    }
  }

  // A commit's answer: 409 lost a race; 500, 502, 504 and a lost answer leave it unknown.
  Status CheckCommit(const HttpResponse& r, const std::string& what) const {
    if (r.status >= 200 && r.status < 300) return Status::OK();
    const std::string m = what + ": HTTP " + std::to_string(r.status) + " " + ErrorText(r);
    if (r.status == 409) return Status::CommitFailed(m);
    if (r.status == 500 || r.status == 502 || r.status == 504 || r.status >= 505) {
      return Status::CommitStateUnknown(m + " (the catalog may or may not have applied it)");
    }
    return Check(r, what);
  }

  // POST <oauth2-server-uri> grant_type=client_credentials.
  Status FetchToken() {
    const std::string uri =
        opts_.oauth2_server_uri.empty() ? base_ + "/v1/oauth/tokens" : opts_.oauth2_server_uri;
    const size_t colon = opts_.credential.find(':');
    const std::string form = "grant_type=client_credentials&client_id=" +
                             PercentEncode(opts_.credential.substr(0, colon)) +
                             "&client_secret=" + PercentEncode(opts_.credential.substr(colon + 1)) +
                             "&scope=" + PercentEncode(opts_.scope);
    HttpResponse r;
    Status last;
    int64_t backoff = kBackoffFirstMs;
    for (int attempt = 1; attempt <= opts_.max_attempts; ++attempt) {
      Exchange x = Perform("POST", uri, form, "application/x-www-form-urlencoded", "", false);
      if (x.error.ok() && x.response.status < 500 && x.response.status != 429) {
        r = std::move(x.response);
        last = Status::OK();
        break;
      }
      last = x.error.ok() ? Status::Unavailable("HTTP " + std::to_string(x.response.status) + " " +
                                                ErrorText(x.response))
                          : x.error;
      if (attempt < opts_.max_attempts) Sleep(backoff);
    }
    if (!last.ok()) {
      return last.WithContext("fetching an OAuth2 token for " + Describe() + " from " + uri);
    }
    if (r.status != 200) {
      return Status::PermissionDenied("the OAuth2 server " + uri +
                                      " refused the client credentials of " + Describe() +
                                      ": HTTP " + std::to_string(r.status) + " " + ErrorText(r) +
                                      "; check destination.rest.credential and scope");
    }
    Json j = Json::parse(r.body, nullptr, false);
    if (!j.is_object() || !j.contains("access_token") || !j["access_token"].is_string()) {
      return Status::Corruption("the OAuth2 server " + uri + " answered without an access_token");
    }
    std::lock_guard<std::mutex> lock(token_mu_);
    token_ = j["access_token"].get<std::string>();
    const int64_t now = NowMs();
    if (j.contains("expires_in") && j["expires_in"].is_number()) {
      const int64_t life_ms = static_cast<int64_t>(j["expires_in"].get<double>() * 1000);
      refresh_at_ms_ = now + life_ms * 8 / 10;
    } else {
      refresh_at_ms_ = 0;  // no expiry said: refreshed on a 401 only
    }
    FERRY_LOG(kDebug) << "fetched an OAuth2 token for " << Describe();
    return Status::OK();
  }

  // A new token in place of `stale`, unless another thread has fetched one since `stale` was
  // read: threads that find the token due or refused at once fetch one between them.
  Status RefreshToken(const std::string& stale) {
    std::lock_guard<std::mutex> serial(refresh_mu_);
    if (Token() != stale) return Status::OK();
    return FetchToken();
  }

  std::string Token() {
    std::lock_guard<std::mutex> lock(token_mu_);
    return token_;
  }

  bool TokenDue() {
    std::lock_guard<std::mutex> lock(token_mu_);
    return !opts_.credential.empty() && refresh_at_ms_ > 0 && NowMs() >= refresh_at_ms_;
  }

  static void Sleep(int64_t& backoff) {
    static thread_local std::minstd_rand rng(std::random_device{}());
    std::uniform_int_distribution<int64_t> d(backoff / 2, backoff);
    std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
    backoff = std::min(backoff * 2, kBackoffMaxMs);
  }

  // One request with authentication, retried as its kind allows. A 2xx..4xx answer (but 401/419
  // once, after a token refresh, and 429) is returned; 5xx too for commits after the retries a
  // 503 allows. Errors: kUnavailable (never reached, or kept failing), kCommitStateUnknown (a
  // commit sent whose answer was lost).
  Result<HttpResponse> Send(const std::string& method, const std::string& url,
                            const std::string& body, Kind kind, const std::string& delegation) {
    if (const std::string seen = Token(); TokenDue()) {
      Status s = RefreshToken(seen);
      if (!s.ok()) {
        FERRY_LOG(kWarn) << "refreshing the OAuth2 token: " << s.message();
      }
    }
    int64_t backoff = kBackoffFirstMs;
    bool refreshed = false;
    Status last;
    for (int attempt = 1; attempt <= opts_.max_attempts; ++attempt) {
      const std::string used = Token();
      Exchange x =
          Perform(method, url, body, "application/json", delegation, true, kind == Kind::kCommit);
      HttpResponse& r = x.response;
      if (!x.error.ok()) {
        if (kind == Kind::kCommit && x.sent) {
          return Status::CommitStateUnknown(
              "the connection to " + display_ + " failed after the commit was sent (" +
              x.error.message() + "); the catalog may or may not have applied it");
        }
        last = x.error;
      } else if ((r.status == 401 || r.status == 419) && !opts_.credential.empty() && !refreshed) {
        // An expired or revoked token: a new one, then the same request once more (it was
        // refused, so nothing was applied).
        refreshed = true;
        FERRY_RETURN_IF_ERROR(RefreshToken(used));
        --attempt;
        continue;
      } else if (r.status == 429 || r.status == 503 || (r.status >= 500 && kind != Kind::kCommit)) {
        last = Status::Unavailable("HTTP " + std::to_string(r.status) + " " + ErrorText(r));
      } else {
        return std::move(r);
      }
      if (attempt < opts_.max_attempts) {
        FERRY_LOG(kDebug) << method << " " << Shorten(url) << ": " << last.message()
                          << "; trying again";
        Sleep(backoff);
      }
    }
    return last.WithContext(method + " " + Shorten(url) + " on " + display_ + " after " +
                            std::to_string(opts_.max_attempts) + " attempt(s)");
  }

  // The URL without the base, for messages.
  std::string Shorten(const std::string& url) const {
    return url.rfind(base_, 0) == 0 ? url.substr(base_.size()) : url;
  }

  // One HTTP exchange: the answer, or the transport's error and whether any of the request left
  // this machine.
  struct Exchange {
    Status error;
    bool sent = false;
    HttpResponse response;
  };

  // Called by libcurl as the transfer moves: the first call after the whole request body has
  // left is the commit's "sent, not answered" fault point.
  static int OnProgress(void* user, curl_off_t, curl_off_t dlnow, curl_off_t ultotal,
                        curl_off_t ulnow) {
    bool* fired = static_cast<bool*>(user);
    if (!*fired && ultotal > 0 && ulnow >= ultotal && dlnow == 0) {
      *fired = true;
      FaultPoint("rest.commit_sent");
    }
    return 0;
  }

  Exchange Perform(const std::string& method, const std::string& url, const std::string& body,
                   const char* content_type, const std::string& delegation, bool authorize,
                   bool commit = false) {
    CURL* c = TakeHandle();
    if (c == nullptr) return Exchange{Status::Internal("curl_easy_init failed"), false, {}};
    curl_easy_reset(c);
    char errbuf[CURL_ERROR_SIZE] = {0};
    HttpResponse out;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opts_.connect_timeout_ms));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(opts_.timeout_ms));
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    struct curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, (std::string("Content-Type: ") + content_type).c_str());
    headers = curl_slist_append(headers, "Accept: application/json");
    // Not a header of the list: SigV4 signs those, and proxies rewrite User-Agent.
    curl_easy_setopt(c, CURLOPT_USERAGENT, "ferry/0.1.0");
    headers = curl_slist_append(headers, "X-Client-Version: ferry 0.1.0");
    std::string auth;
    if (authorize) {
      const std::string token = Token();
      if (!token.empty()) {
        auth = "Authorization: Bearer " + token;
        headers = curl_slist_append(headers, auth.c_str());
      }
    }
    if (!delegation.empty()) {
      headers = curl_slist_append(headers, ("X-Iceberg-Access-Delegation: " + delegation).c_str());
    }
    for (const auto& [k, v] : opts_.headers) {
      headers = curl_slist_append(headers, (k + ": " + v).c_str());
    }
    std::vector<std::string> signed_headers;
    if (authorize && sign_v4_) {
      signed_headers =
          SignV4({method, url, method == "GET" || method == "HEAD" ? "" : body, content_type}, aws_,
                 opts_.signing_region, opts_.signing_name, AmzDateNow());
      for (const auto& h : signed_headers) headers = curl_slist_append(headers, h.c_str());
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    if (method == "GET") {
      curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (method == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      if (method != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnWrite);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out.body);
    bool fired = false;
    if (commit) {
      // A commit never rides a kept-alive connection: libcurl silently sends a request again
      // when a reused connection turns out closed, and a commit must be sent once per decision.
      curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
      curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
      curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
      curl_easy_setopt(c, CURLOPT_XFERINFODATA, &fired);
    }
    const CURLcode rc = curl_easy_perform(c);
    long request_bytes = 0;
    curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &request_bytes);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, static_cast<struct curl_slist*>(nullptr));
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));
    curl_slist_free_all(headers);
    // Scrub the copies of secrets this call made.
    std::fill(auth.begin(), auth.end(), '\0');
    if (rc != CURLE_OK) {
      curl_easy_cleanup(c);  // its connection is in an unknown state
      const bool sent = request_bytes > 0 || rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR ||
                        rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE ||
                        rc == CURLE_OPERATION_TIMEDOUT;
      const bool never_left = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
                              rc == CURLE_COULDNT_RESOLVE_PROXY ||
                              (rc == CURLE_OPERATION_TIMEDOUT && request_bytes == 0);
      return Exchange{
          Status::Unavailable(std::string(errbuf[0] ? errbuf : curl_easy_strerror(rc)) +
                              (rc == CURLE_COULDNT_CONNECT
                                   ? " (is the catalog server running? check destination.catalog)"
                                   : "")),
          sent && !never_left,
          {}};
    }
    GiveBack(c);
    return Exchange{Status::OK(), true, std::move(out)};
  }

  CURL* TakeHandle() {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_.empty()) {
      CURL* c = idle_.back();
      idle_.pop_back();
      return c;
    }
    return curl_easy_init();
  }

  void GiveBack(CURL* c) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (idle_.size() < 16) {
      idle_.push_back(c);
    } else {
      curl_easy_cleanup(c);
    }
  }

  RestCatalogOptions opts_;
  std::string base_;     // "https://host/path", after the server's `uri` override
  std::string display_;  // the configured base, for messages
  std::string prefix_;
  bool advertised_ = false;
  std::set<std::string> endpoints_;
  bool sign_v4_ = false;  // SigV4 with aws_ (signing_region, signing_name)
  S3Credentials aws_;
  std::mutex refresh_mu_;  // one token fetch at a time (RefreshToken)
  std::mutex token_mu_;
  std::string token_;          // GUARDED_BY(token_mu_)
  int64_t refresh_at_ms_ = 0;  // GUARDED_BY(token_mu_)
  std::mutex pool_mu_;
  std::vector<CURL*> idle_;  // GUARDED_BY(pool_mu_)
};

}  // namespace

Result<std::string> RestBaseUrl(const std::string& uri) {
  for (const char* scheme : {"rest+http://", "rest+https://"}) {
    if (uri.rfind(scheme, 0) == 0 && uri.size() > std::string(scheme).size()) {
      return uri.substr(5);
    }
  }
  return Status::InvalidArgument(
      "catalog '" + uri +
      "' is not a REST catalog URL; write rest+https://host[:port][/path] "
      "(or rest+http:// for a server on this machine)");
}

std::string EncodeNamespacePath(const std::string& ns) {
  std::string out;
  for (const auto& l : Levels(ns)) {
    if (!out.empty()) out += "%1F";
    out += PercentEncode(l);
  }
  return out;
}

bool IsRestCatalogUri(const std::string& uri) {
  return uri.rfind("rest+http://", 0) == 0 || uri.rfind("rest+https://", 0) == 0;
}

Result<std::unique_ptr<Catalog>> OpenRestCatalog(const RestCatalogOptions& options) {
  auto c = std::make_unique<RestCatalog>(options);
  FERRY_RETURN_IF_ERROR(c->Open());
  return std::unique_ptr<Catalog>(std::move(c));
}

}  // namespace ferry::lake
