#include "ferry/catalog_server/handler_internal.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "ferry/base/log.h"
#include "ferry/base/uuid.h"
#include "ferry/catalog_server/new_table_internal.h"
#include "ferry/lake/table_commit.h"
#include "ferry/sink/iceberg/warehouse.h"

namespace ferry::catalog_server {

using lake::TableIdent;
using Query = std::map<std::string, std::string>;

namespace {

constexpr const char* kNoSuchNamespace = "NoSuchNamespaceException";
constexpr const char* kNoSuchTable = "NoSuchTableException";
constexpr const char* kBadRequest = "BadRequestException";
constexpr char kUnitSeparator = '\x1f';

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded; '+' is a space in a query (form encoding), itself in a path.
std::string PercentDecode(const std::string& s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// "/v1/ferry/namespaces/a%1Fb" -> {"v1", "ferry", "namespaces", "a\x1f" "b"}: split first, then
// decoded, so that an encoded '/' stays inside its segment. One trailing '/' is ignored.
std::vector<std::string> PathSegments(const std::string& path) {
  std::string p = path;
  if (!p.empty() && p.front() == '/') p.erase(0, 1);
  if (!p.empty() && p.back() == '/') p.pop_back();
  std::vector<std::string> segs = Split(p, '/');
  for (auto& s : segs) s = PercentDecode(s, false);
  return segs;
}

Query ParseQuery(const std::string& query) {
  Query out;
  if (query.empty()) return out;
  for (const auto& part : Split(query, '&')) {
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string key = PercentDecode(part.substr(0, eq), true);
    out[key] = eq == std::string::npos ? "" : PercentDecode(part.substr(eq + 1), true);
  }
  return out;
}

HttpResponse JsonResponse(int status, const lake::Json& body) {
  HttpResponse r;
  r.status = status;
  // Invalid UTF-8 (a name from a path) is replaced rather than thrown on.
  r.body = body.dump(-1, ' ', false, lake::Json::error_handler_t::replace);
  return r;
}

HttpResponse NoContent() {
  HttpResponse r;
  r.status = 204;
  return r;
}

HttpResponse BadRequest(const std::string& message) {
  return ErrorResponse(400, kBadRequest, message);
}

// The namespace of `levels` as the catalog stores it ("a.b"); kInvalidArgument for no level, an
// empty one or one holding '.' or 0x1F.
Result<std::string> NamespaceOf(const std::vector<std::string>& levels) {
  if (levels.empty()) return Status::InvalidArgument("the namespace has no level");
  std::string ns;
  for (const auto& level : levels) {
    if (level.empty()) return Status::InvalidArgument("a namespace level is empty");
    if (level.find('.') != std::string::npos || level.find(kUnitSeparator) != std::string::npos) {
      return Status::InvalidArgument(
          "the namespace level '" + level +
          "' holds a '.', which this catalog (an Iceberg SQL catalog) uses to join the levels of "
          "a namespace; rename it, or make it levels of their own");
    }
    if (!ns.empty()) ns += '.';
    ns += level;
  }
  return ns;
}

// A namespace from a path segment or the `parent` query ("a\x1f" "b").
Result<std::string> NamespaceOfPath(const std::string& decoded) {
  return NamespaceOf(Split(decoded, kUnitSeparator));
}

// A namespace from JSON: an array of strings.
Result<std::string> NamespaceOfJson(const lake::Json& j) {
  if (!j.is_array()) return Status::InvalidArgument("a namespace is not a list of strings");
  std::vector<std::string> levels;
  for (const auto& l : j) {
    if (!l.is_string()) return Status::InvalidArgument("a namespace level is not a string");
    levels.push_back(l.get<std::string>());
  }
  return NamespaceOf(levels);
}

lake::Json LevelsOf(const std::string& ns) {
  lake::Json out = lake::Json::array();
  for (const auto& level : Split(ns, '.')) out.push_back(level);
  return out;
}

lake::Json IdentJson(const TableIdent& t) {
  return lake::Json{{"namespace", LevelsOf(t.ns)}, {"name", t.name}};
}

Result<TableIdent> IdentOfJson(const lake::Json& j, const char* what) {
  if (!j.is_object() || !j.contains("namespace") || !j.contains("name") || !j["name"].is_string() ||
      j["name"].get<std::string>().empty()) {
    return Status::InvalidArgument(std::string(what) +
                                   " is not a table identifier {\"namespace\": [...], \"name\"}");
  }
  FERRY_ASSIGN_OR_RETURN(std::string ns, NamespaceOfJson(j["namespace"]));
  return TableIdent{ns, j["name"].get<std::string>()};
}

Result<lake::Json> ParseBody(const std::string& body) {
  lake::Json j = lake::Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("the request body is not a JSON object");
  }
  return j;
}

// One page of `items` (sorted by key). Without `pageToken` every item, and no next-page-token
// (as the spec asks of a request that does not page); with it, the items after the token (the
// last key of the page before), at most `pageSize` of them, and the next page's token (the last
// key of this one) or null after the last page.
Result<lake::Json> Page(std::vector<std::pair<std::string, lake::Json>> items, const Query& query,
                        const char* list_key) {
  lake::Json out = lake::Json::object();
  out[list_key] = lake::Json::array();
  auto token = query.find("pageToken");
  if (token == query.end()) {
    for (auto& [key, item] : items) out[list_key].push_back(std::move(item));
    return out;
  }
  size_t size = items.size();
  if (auto ps = query.find("pageSize"); ps != query.end() && !ps->second.empty()) {
    char* end = nullptr;
    const long long v = std::strtoll(ps->second.c_str(), &end, 10);
    if (end == nullptr || *end != '\0' || v < 1) {
      return Status::InvalidArgument("pageSize is '" + ps->second + "'; it is a whole number >= 1");
    }
    size = static_cast<size_t>(std::min<long long>(v, 1 << 30));
  }
  out["next-page-token"] = nullptr;
  size_t taken = 0;
  std::string last;
  for (auto& [key, item] : items) {
    if (!token->second.empty() && key <= token->second) continue;
    if (taken == size) {
      out["next-page-token"] = last;
      break;
    }
    out[list_key].push_back(std::move(item));
    last = key;
    ++taken;
  }
  return out;
}

bool HasAssertCreate(const lake::Json& requirements) {
  if (!requirements.is_array()) return false;
  return std::any_of(requirements.begin(), requirements.end(), [](const lake::Json& r) {
    return r.is_object() && r.value("type", lake::Json()) == "assert-create";
  });
}

// The snapshots the refs point at, and nothing else (snapshots=refs).
lake::Json OnlyReferencedSnapshots(lake::Json doc) {
  std::set<int64_t> referenced;
  if (doc.contains("refs") && doc["refs"].is_object()) {
    for (const auto& ref : doc["refs"]) {
      if (ref.contains("snapshot-id") && ref["snapshot-id"].is_number_integer()) {
        referenced.insert(ref["snapshot-id"].get<int64_t>());
      }
    }
  }
  if (doc.contains("snapshots") && doc["snapshots"].is_array()) {
    lake::Json kept = lake::Json::array();
    for (auto& s : doc["snapshots"]) {
      if (s.contains("snapshot-id") && s["snapshot-id"].is_number_integer() &&
          referenced.count(s["snapshot-id"].get<int64_t>())) {
        kept.push_back(std::move(s));
      }
    }
    doc["snapshots"] = std::move(kept);
  }
  return doc;
}

// A strong ETag for a version of a table's metadata as loaded with `mode`.
std::string ETagOf(const std::string& metadata_location, const std::string& mode) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64
  for (unsigned char c : metadata_location + "|" + mode) h = (h ^ c) * 1099511628211ull;
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

HttpResponse TableResult(const lake::LoadedTable& t, bool with_config) {
  lake::Json body{{"metadata-location", t.metadata_location}, {"metadata", t.metadata.doc()}};
  if (with_config) body["config"] = lake::Json::object();
  HttpResponse r = JsonResponse(200, body);
  r.headers.emplace_back("ETag", ETagOf(t.metadata_location, "all"));
  return r;
}

}  // namespace

HttpResponse ErrorResponse(int code, const std::string& type, const std::string& message) {
  return JsonResponse(
      code, lake::Json{{"error", {{"message", message}, {"type", type}, {"code", code}}}});
}

HttpResponse StatusResponse(const Status& s, const char* not_found_type) {
  switch (s.code()) {
    case StatusCode::kNotFound:
      return ErrorResponse(404, not_found_type, s.message());
    case StatusCode::kAlreadyExists:
      return ErrorResponse(409, "AlreadyExistsException", s.message());
    case StatusCode::kCommitFailed:
      return ErrorResponse(409, "CommitFailedException", s.message());
    case StatusCode::kInvalidArgument:
      return ErrorResponse(400, kBadRequest, s.message());
    case StatusCode::kNotSupported:
      return ErrorResponse(406, "UnsupportedOperationException", s.message());
    case StatusCode::kPermissionDenied:
      return ErrorResponse(403, "ForbiddenException", s.message());
    case StatusCode::kUnavailable:
      return ErrorResponse(503, "ServiceUnavailableException", s.message());
    case StatusCode::kCommitStateUnknown:
      return ErrorResponse(500, "CommitStateUnknownException", s.message());
    default:
      return ErrorResponse(500, "InternalServerError", s.message());
  }
}

RestHandler::RestHandler(HandlerOptions options, lake::Catalog* catalog)
    : opts_(std::move(options)), catalog_(catalog) {}

std::vector<std::string> RestHandler::Endpoints() {
  return {
      "GET /v1/{prefix}/namespaces",
      "POST /v1/{prefix}/namespaces",
      "GET /v1/{prefix}/namespaces/{namespace}",
      "HEAD /v1/{prefix}/namespaces/{namespace}",
      "DELETE /v1/{prefix}/namespaces/{namespace}",
      "POST /v1/{prefix}/namespaces/{namespace}/properties",
      "GET /v1/{prefix}/namespaces/{namespace}/tables",
      "POST /v1/{prefix}/namespaces/{namespace}/tables",
      "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
      "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
      "POST /v1/{prefix}/tables/rename",
      "POST /v1/{prefix}/transactions/commit",
  };
}

HttpResponse RestHandler::Handle(const HttpRequest& req) const {
  std::vector<std::string> segs = PathSegments(req.path);
  const Query query = ParseQuery(req.query);
  auto not_found = [&] {
    return ErrorResponse(404, "NotFoundException",
                         "no route " + req.method + " " + req.path +
                             " in this Iceberg REST catalog; its routes are /v1/config and "
                             "/v1/" +
                             opts_.prefix + "/namespaces/...");
  };
  if (segs.empty() || segs[0] != "v1" || segs.size() < 2) return not_found();
  if (segs.size() == 2 && segs[1] == "config") {
    if (req.method != "GET") {
      HttpResponse r = ErrorResponse(405, "MethodNotAllowedException",
                                     req.method + " is not served on /v1/config; use GET");
      r.headers.emplace_back("Allow", "GET");
      return r;
    }
    return GetConfig();
  }
  // /v1/{prefix}/<collection>/... or, leniently, /v1/<collection>/...
  static const std::set<std::string> kCollections = {"namespaces", "tables", "transactions"};
  size_t first = 1;
  if (segs.size() >= 3 && segs[1] == opts_.prefix && kCollections.count(segs[2])) first = 2;
  if (!kCollections.count(segs[first])) return not_found();
  return Dispatch(req, std::vector<std::string>(segs.begin() + first, segs.end()), query);
}

HttpResponse RestHandler::Dispatch(const HttpRequest& req, const std::vector<std::string>& s,
                                   const Query& query) const {
  const std::string& m = req.method;
  auto not_allowed = [&](const std::string& allow) {
    HttpResponse r = ErrorResponse(405, "MethodNotAllowedException",
                                   m + " is not served on " + req.path + "; it takes " + allow);
    r.headers.emplace_back("Allow", allow);
    return r;
  };
  const size_t n = s.size();
  if (s[0] == "tables") {
    if (n == 2 && s[1] == "rename")
      return m == "POST" ? RenameTable(req.body) : not_allowed("POST");
  } else if (s[0] == "transactions") {
    if (n == 2 && s[1] == "commit") {
      return m == "POST" ? CommitTransaction(req.body) : not_allowed("POST");
    }
  } else if (n == 1) {  // namespaces
    if (m == "GET") return ListNamespaces(query);
    if (m == "POST") return CreateNamespace(req.body);
    return not_allowed("GET, POST");
  } else if (n <= 5) {
    auto ns = NamespaceOfPath(s[1]);
    if (!ns.ok()) return BadRequest(ns.status().message());
    if (n == 2) {
      if (m == "GET" || m == "HEAD") return LoadNamespace(*ns, m == "HEAD");
      if (m == "DELETE") return DropNamespace(*ns);
      return not_allowed("GET, HEAD, DELETE");
    }
    if (n == 3 && s[2] == "properties") {
      return m == "POST" ? UpdateProperties(*ns, req.body) : not_allowed("POST");
    }
    if (s[2] == "tables" && n == 3) {
      if (m == "GET") return ListTables(*ns, query);
      if (m == "POST") return CreateTable(*ns, req.body, Vends(req));
      return not_allowed("GET, POST");
    }
    if (s[2] == "tables" && n >= 4 && !s[3].empty()) {
      const TableIdent t{*ns, s[3]};
      if (n == 4) {
        if (m == "GET" || m == "HEAD") {
          return LoadTable(t, query, req.if_none_match, m == "HEAD", Vends(req));
        }
        if (m == "POST") return CommitTable(t, req.body);
        if (m == "DELETE") return DropTable(t, query);
        return not_allowed("GET, HEAD, POST, DELETE");
      }
      if (s[4] == "credentials" && n == 5 && !opts_.vended.empty()) {
        if (m != "GET") return not_allowed("GET");
        return LoadCredentials(t);
      }
      if (s[4] == "metrics") {
        if (m != "POST") return not_allowed("POST");
        // Accepted and dropped: the catalog keeps no scan or commit reports.
        if (!ParseBody(req.body).ok()) return BadRequest("the metrics report is not a JSON object");
        return NoContent();
      }
    }
  }
  return ErrorResponse(404, "NotFoundException",
                       "no route " + m + " " + req.path + " in this Iceberg REST catalog");
}

// ---- configuration ----

HttpResponse RestHandler::GetConfig() const {
  lake::Json defaults = lake::Json::object();
  for (const auto& [k, v] : opts_.defaults) defaults[k] = v;
  std::vector<std::string> endpoints = Endpoints();
  if (!opts_.vended.empty()) {
    endpoints.push_back("GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials");
  }
  lake::Json body{{"defaults", std::move(defaults)},
                  {"overrides", {{"prefix", opts_.prefix}}},
                  {"endpoints", endpoints}};
  return JsonResponse(200, body);
}

bool RestHandler::Vends(const HttpRequest& req) const {
  return !opts_.vended.empty() &&
         req.access_delegation.find("vended-credentials") != std::string::npos;
}

void RestHandler::AddConfig(lake::Json& body, const std::string& location, bool vend) const {
  lake::Json config = lake::Json::object();
  if (vend) {
    for (const auto& [k, v] : opts_.vended) config[k] = v;
    body["storage-credentials"] =
        lake::Json::array({lake::Json{{"prefix", location}, {"config", config}}});
  }
  body["config"] = std::move(config);
}

HttpResponse RestHandler::LoadCredentials(const TableIdent& t) const {
  auto loaded = catalog_->LoadTable(t);
  if (!loaded.ok()) return StatusResponse(loaded.status(), kNoSuchTable);
  if (!*loaded) {
    return ErrorResponse(404, kNoSuchTable,
                         "table " + t.ToString() + " does not exist in " + catalog_->Describe());
  }
  lake::Json body = lake::Json::object();
  AddConfig(body, (*loaded)->metadata.location(), true);
  body.erase("config");
  return JsonResponse(200, body);
}

// ---- namespaces ----

std::optional<HttpResponse> RestHandler::RequireNamespace(const std::string& ns) const {
  auto loaded = catalog_->LoadNamespace(ns);
  if (!loaded.ok()) return StatusResponse(loaded.status(), kNoSuchNamespace);
  if (!*loaded) {
    return ErrorResponse(404, kNoSuchNamespace,
                         "namespace '" + ns + "' does not exist in " + catalog_->Describe());
  }
  return std::nullopt;
}

HttpResponse RestHandler::ListNamespaces(const Query& query) const {
  std::string parent;
  if (auto p = query.find("parent"); p != query.end() && !p->second.empty()) {
    auto ns = NamespaceOfPath(p->second);
    if (!ns.ok()) return BadRequest("parent: " + ns.status().message());
    if (auto missing = RequireNamespace(*ns)) return *missing;
    parent = *ns;
  }
  auto listed = catalog_->ListNamespaces(parent);
  if (!listed.ok()) return StatusResponse(listed.status(), kNoSuchNamespace);
  std::vector<std::pair<std::string, lake::Json>> items;
  for (const auto& ns : *listed) items.emplace_back(ns, LevelsOf(ns));
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto page = Page(std::move(items), query, "namespaces");
  if (!page.ok()) return BadRequest(page.status().message());
  return JsonResponse(200, *page);
}

HttpResponse RestHandler::CreateNamespace(const std::string& body) const {
  auto req = ParseBody(body);
  if (!req.ok()) return BadRequest(req.status().message());
  if (!req->contains("namespace")) return BadRequest("the request has no namespace");
  auto ns = NamespaceOfJson((*req)["namespace"]);
  if (!ns.ok()) return BadRequest(ns.status().message());
  std::map<std::string, std::string> props;
  if (req->contains("properties") && !(*req)["properties"].is_null()) {
    const lake::Json& p = (*req)["properties"];
    if (!p.is_object()) return BadRequest("the namespace's properties are not an object");
    for (auto it = p.begin(); it != p.end(); ++it) {
      if (!it.value().is_string()) {
        return BadRequest("the namespace property '" + it.key() + "' is not a string");
      }
      props[it.key()] = it.value().get<std::string>();
    }
  }
  // The catalog's create is a no-op for a namespace that exists; the protocol says 409.
  auto existing = catalog_->LoadNamespace(*ns);
  if (!existing.ok()) return StatusResponse(existing.status(), kNoSuchNamespace);
  if (*existing) {
    return ErrorResponse(409, "AlreadyExistsException",
                         "namespace '" + *ns + "' already exists in " + catalog_->Describe());
  }
  Status s = catalog_->CreateNamespace(*ns, props);
  if (!s.ok()) return StatusResponse(s, kNoSuchNamespace);
  lake::Json out{{"namespace", LevelsOf(*ns)}, {"properties", lake::Json::object()}};
  for (const auto& [k, v] : props) out["properties"][k] = v;
  return JsonResponse(200, out);
}

HttpResponse RestHandler::LoadNamespace(const std::string& ns, bool head) const {
  auto loaded = catalog_->LoadNamespace(ns);
  if (!loaded.ok()) return StatusResponse(loaded.status(), kNoSuchNamespace);
  if (!*loaded) {
    return ErrorResponse(404, kNoSuchNamespace,
                         "namespace '" + ns + "' does not exist in " + catalog_->Describe());
  }
  if (head) return NoContent();
  lake::Json out{{"namespace", LevelsOf(ns)}, {"properties", lake::Json::object()}};
  for (const auto& [k, v] : **loaded) out["properties"][k] = v;
  return JsonResponse(200, out);
}

HttpResponse RestHandler::DropNamespace(const std::string& ns) const {
  Status s = catalog_->DropNamespace(ns);
  if (s.code() == StatusCode::kAlreadyExists) {
    return ErrorResponse(409, "NamespaceNotEmptyException", s.message());
  }
  if (!s.ok()) return StatusResponse(s, kNoSuchNamespace);
  return NoContent();
}

HttpResponse RestHandler::UpdateProperties(const std::string& ns, const std::string& body) const {
  auto req = ParseBody(body);
  if (!req.ok()) return BadRequest(req.status().message());
  std::vector<std::string> removals;
  std::map<std::string, std::string> updates;
  if (req->contains("removals") && !(*req)["removals"].is_null()) {
    const lake::Json& r = (*req)["removals"];
    if (!r.is_array()) return BadRequest("removals is not a list of strings");
    for (const auto& k : r) {
      if (!k.is_string()) return BadRequest("removals is not a list of strings");
      removals.push_back(k.get<std::string>());
    }
  }
  if (req->contains("updates") && !(*req)["updates"].is_null()) {
    const lake::Json& u = (*req)["updates"];
    if (!u.is_object()) return BadRequest("updates is not an object of strings");
    for (auto it = u.begin(); it != u.end(); ++it) {
      if (!it.value().is_string())
        return BadRequest("the property '" + it.key() + "' is not a string");
      updates[it.key()] = it.value().get<std::string>();
    }
  }
  for (const auto& k : removals) {
    if (updates.count(k)) {
      return ErrorResponse(422, "UnprocessableEntityException",
                           "the property '" + k + "' is both in removals and in updates");
    }
  }
  auto current = catalog_->LoadNamespace(ns);
  if (!current.ok()) return StatusResponse(current.status(), kNoSuchNamespace);
  if (!*current) {
    return ErrorResponse(404, kNoSuchNamespace,
                         "namespace '" + ns + "' does not exist in " + catalog_->Describe());
  }
  Status s = catalog_->UpdateNamespace(ns, updates, removals);
  if (!s.ok()) return StatusResponse(s, kNoSuchNamespace);
  lake::Json out{{"updated", lake::Json::array()},
                 {"removed", lake::Json::array()},
                 {"missing", lake::Json::array()}};
  for (const auto& [k, v] : updates) out["updated"].push_back(k);
  for (const auto& k : removals) out[(*current)->count(k) ? "removed" : "missing"].push_back(k);
  return JsonResponse(200, out);
}

// ---- tables ----

HttpResponse RestHandler::ListTables(const std::string& ns, const Query& query) const {
  if (auto missing = RequireNamespace(ns)) return *missing;
  auto listed = catalog_->ListTables(ns);
  if (!listed.ok()) return StatusResponse(listed.status(), kNoSuchNamespace);
  std::vector<std::pair<std::string, lake::Json>> items;
  for (const auto& t : *listed) items.emplace_back(t.name, IdentJson(t));
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto page = Page(std::move(items), query, "identifiers");
  if (!page.ok()) return BadRequest(page.status().message());
  return JsonResponse(200, *page);
}

HttpResponse RestHandler::CreateTable(const std::string& ns, const std::string& body,
                                      bool vend) const {
  auto req = ParseBody(body);
  if (!req.ok()) return BadRequest(req.status().message());
  if (!req->contains("name") || !(*req)["name"].is_string() ||
      (*req)["name"].get<std::string>().empty()) {
    return BadRequest("the request has no table name");
  }
  const TableIdent t{ns, (*req)["name"].get<std::string>()};
  if (auto missing = RequireNamespace(ns)) return *missing;
  std::string location = sink::DefaultTableLocation(opts_.warehouse, ns, t.name);
  if (req->contains("location") && (*req)["location"].is_string() &&
      !(*req)["location"].get<std::string>().empty()) {
    location = (*req)["location"].get<std::string>();
    while (location.size() > 1 && location.back() == '/') location.pop_back();
  }
  if (!LocationUnder(location, opts_.warehouse)) {
    return BadRequest("the table location " + location + " is outside the served warehouse " +
                      opts_.warehouse + "; leave location out (the table goes to " +
                      sink::DefaultTableLocation(opts_.warehouse, ns, t.name) +
                      ") or pick a folder below the warehouse");
  }
  auto metadata = MetadataFromCreateRequest(*req, location, NewUuid());
  if (!metadata.ok()) return StatusResponse(metadata.status(), kNoSuchTable);
  if (req->value("stage-create", false)) {
    // A create transaction begins: nothing is written until its commit (assert-create).
    auto existing = catalog_->LoadTable(t);
    if (!existing.ok()) return StatusResponse(existing.status(), kNoSuchTable);
    if (*existing) {
      return ErrorResponse(409, "AlreadyExistsException",
                           "table " + t.ToString() + " already exists in " + catalog_->Describe());
    }
    return JsonResponse(
        200, lake::Json{{"metadata", metadata->doc()}, {"config", lake::Json::object()}});
  }
  auto created = catalog_->CreateTable(t, *metadata);
  if (!created.ok()) return StatusResponse(created.status(), kNoSuchNamespace);
  HttpResponse r = TableResult(*created, true);
  if (vend) {
    lake::Json j = lake::Json::parse(r.body);
    AddConfig(j, created->metadata.location(), true);
    r.body = j.dump();
  }
  return r;
}

HttpResponse RestHandler::LoadTable(const TableIdent& t, const Query& query,
                                    const std::string& if_none_match, bool head, bool vend) const {
  std::string mode = "all";
  if (auto s = query.find("snapshots"); s != query.end() && !s->second.empty()) mode = s->second;
  if (mode != "all" && mode != "refs") {
    return BadRequest("snapshots is '" + mode + "'; it is all or refs");
  }
  auto loaded = catalog_->LoadTable(t);
  if (!loaded.ok()) return StatusResponse(loaded.status(), kNoSuchTable);
  if (!*loaded) {
    return ErrorResponse(404, kNoSuchTable,
                         "table " + t.ToString() + " does not exist in " + catalog_->Describe());
  }
  if (head) return NoContent();
  const std::string etag = ETagOf((*loaded)->metadata_location, mode);
  if (!if_none_match.empty() && if_none_match == etag) {
    HttpResponse r;
    r.status = 304;
    r.headers.emplace_back("ETag", etag);
    return r;
  }
  lake::Json metadata = (*loaded)->metadata.doc();
  if (mode == "refs") metadata = OnlyReferencedSnapshots(std::move(metadata));
  lake::Json body{{"metadata-location", (*loaded)->metadata_location},
                  {"metadata", std::move(metadata)}};
  AddConfig(body, (*loaded)->metadata.location(), vend);
  HttpResponse r = JsonResponse(200, body);
  r.headers.emplace_back("ETag", etag);
  return r;
}

std::optional<HttpResponse> RestHandler::CheckLocations(const lake::Json& updates) const {
  if (!updates.is_array()) return BadRequest("the commit's updates are not a list");
  for (const auto& u : updates) {
    if (!u.is_object() || u.value("action", lake::Json()) != "set-location") continue;
    const std::string loc = u.value("location", lake::Json()).is_string()
                                ? u["location"].get<std::string>()
                                : std::string();
    if (!LocationUnder(loc, opts_.warehouse)) {
      return BadRequest("set-location moves the table to " + loc +
                        ", outside the served warehouse " + opts_.warehouse);
    }
  }
  return std::nullopt;
}

HttpResponse RestHandler::CommitTable(const TableIdent& t, const std::string& body) const {
  auto req = ParseBody(body);
  if (!req.ok()) return BadRequest(req.status().message());
  const lake::Json requirements = req->value("requirements", lake::Json());
  const lake::Json updates = req->value("updates", lake::Json());
  if (!requirements.is_array() || !updates.is_array()) {
    return BadRequest("a CommitTableRequest has the lists requirements and updates");
  }
  if (req->contains("identifier") && !(*req)["identifier"].is_null()) {
    auto named = IdentOfJson((*req)["identifier"], "identifier");
    if (!named.ok()) return BadRequest(named.status().message());
    if (named->ns != t.ns || named->name != t.name) {
      return BadRequest("the body's identifier " + named->ToString() + " is not the table " +
                        t.ToString() + " of the path");
    }
  }
  if (auto bad = CheckLocations(updates)) return *bad;
  auto loaded = catalog_->LoadTable(t);
  if (!loaded.ok()) return StatusResponse(loaded.status(), kNoSuchTable);
  if (!*loaded) {
    if (HasAssertCreate(requirements)) return CreateByTransaction(t, requirements, updates);
    return ErrorResponse(404, kNoSuchTable,
                         "table " + t.ToString() + " does not exist in " + catalog_->Describe());
  }
  auto committed = catalog_->CommitTable(lake::TableCommit{t, requirements, updates});
  if (!committed.ok()) return StatusResponse(committed.status(), kNoSuchTable);
  return TableResult(*committed, false);
}

// The commit of a create transaction (stage-create, then a commit with assert-create): the
// table is made from the updates.
HttpResponse RestHandler::CreateByTransaction(const TableIdent& t, const lake::Json& requirements,
                                              const lake::Json& updates) const {
  if (auto missing = RequireNamespace(t.ns)) return *missing;
  Status s = lake::CheckRequirements(requirements, nullptr);
  if (!s.ok()) return StatusResponse(s, kNoSuchTable);
  auto metadata = MetadataFromCreateUpdates(
      updates, sink::DefaultTableLocation(opts_.warehouse, t.ns, t.name), NewUuid());
  if (!metadata.ok()) return StatusResponse(metadata.status(), kNoSuchTable);
  auto created = catalog_->CreateTable(t, *metadata);
  if (created.status().code() == StatusCode::kAlreadyExists) {
    return ErrorResponse(409, "CommitFailedException",
                         "requirement assert-create failed: table " + t.ToString() +
                             " was created by another writer");
  }
  if (!created.ok()) return StatusResponse(created.status(), kNoSuchNamespace);
  return TableResult(*created, false);
}

HttpResponse RestHandler::DropTable(const TableIdent& t, const Query& query) const {
  bool purge = false;
  if (auto p = query.find("purgeRequested"); p != query.end() && !p->second.empty()) {
    if (p->second != "true" && p->second != "false") {
      return BadRequest("purgeRequested is '" + p->second + "'; it is true or false");
    }
    purge = p->second == "true";
  }
  Status s = catalog_->DropTable(t);
  if (!s.ok()) return StatusResponse(s, kNoSuchTable);
  if (purge) {
    FERRY_LOG(kInfo) << "table " << t.ToString()
                     << " dropped; its files stay (this server does not purge: delete the "
                        "table's folder to free them)";
  }
  return NoContent();
}

HttpResponse RestHandler::RenameTable(const std::string& body) const {
  auto req = ParseBody(body);
  if (!req.ok()) return BadRequest(req.status().message());
  auto from = IdentOfJson(req->value("source", lake::Json()), "source");
  if (!from.ok()) return BadRequest(from.status().message());
  auto to = IdentOfJson(req->value("destination", lake::Json()), "destination");
  if (!to.ok()) return BadRequest(to.status().message());
  if (auto missing = RequireNamespace(to->ns)) return *missing;
  Status s = catalog_->RenameTable(*from, *to);
  if (!s.ok()) return StatusResponse(s, kNoSuchTable);
  return NoContent();
}

HttpResponse RestHandler::CommitTransaction(const std::string& body) const {
  auto req = ParseBody(body);
  if (!req.ok()) return BadRequest(req.status().message());
  const lake::Json changes = req->value("table-changes", lake::Json());
  if (!changes.is_array()) return BadRequest("the request has no list table-changes");
  std::vector<lake::TableCommit> commits;
  std::set<std::string> seen;
  for (const auto& c : changes) {
    if (!c.is_object()) return BadRequest("a table change is not an object");
    auto t = IdentOfJson(c.value("identifier", lake::Json()), "a table change's identifier");
    if (!t.ok()) return BadRequest(t.status().message());
    if (!seen.insert(t->ToString()).second) {
      return BadRequest("table " + t->ToString() +
                        " has two changes in the transaction; send them as one");
    }
    lake::TableCommit commit{*t, c.value("requirements", lake::Json()),
                             c.value("updates", lake::Json())};
    if (!commit.requirements.is_array() || !commit.updates.is_array()) {
      return BadRequest("the change of table " + t->ToString() +
                        " lacks the lists requirements and updates");
    }
    if (auto bad = CheckLocations(commit.updates)) return *bad;
    auto loaded = catalog_->LoadTable(*t);
    if (!loaded.ok()) return StatusResponse(loaded.status(), kNoSuchTable);
    if (!*loaded) {
      if (HasAssertCreate(commit.requirements)) {
        return ErrorResponse(406, "UnsupportedOperationException",
                             "creating table " + t->ToString() +
                                 " inside a multi-table transaction is not supported: create it "
                                 "first, or commit its create transaction alone");
      }
      return ErrorResponse(404, kNoSuchTable,
                           "table " + t->ToString() + " does not exist in " + catalog_->Describe());
    }
    commits.push_back(std::move(commit));
  }
  Status s = catalog_->CommitTables(commits);
  if (!s.ok()) return StatusResponse(s, kNoSuchTable);
  return NoContent();
}

}  // namespace ferry::catalog_server
