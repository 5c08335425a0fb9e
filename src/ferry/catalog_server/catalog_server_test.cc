// The REST catalog server over a SQLite catalog in a temporary folder, driven by real HTTP
// requests (libcurl) as the clients send them.
#include "ferry/catalog_server/rest_server.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/catalog_server/handler_internal.h"
#include "ferry/catalog_server/new_table_internal.h"
#include "ferry/lake/catalog.h"
#include "ferry/lake/file_io.h"
#include "ferry/lake/rest_catalog.h"
#include "ferry/lake/table.h"
#include "ferry/lake/table_commit.h"

namespace ferry::catalog_server {
namespace {

using lake::Json;

struct Reply {
  long status = 0;
  std::string body;
  std::string headers;
  Json json() const { return Json::parse(body, nullptr, false); }
  // The error's type, when the body is an IcebergErrorResponse with all three fields.
  std::string error_type() const {
    Json j = json();
    if (!j.is_object() || !j.contains("error")) return "<no error body>";
    const Json& e = j["error"];
    if (!e.contains("message") || !e["message"].is_string() || !e.contains("code") ||
        e["code"].get<long>() != status || !e.contains("type")) {
      return "<malformed error body " + body + ">";
    }
    return e["type"].get<std::string>();
  }
};

size_t Collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// One request to `url` + `path`.
Reply Call(const std::string& url, const std::string& method, const std::string& path,
           const std::string& body = "", const std::vector<std::string>& headers = {}) {
  Reply r;
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, (url + path).c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, Collect);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r.headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  if (method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (!body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_slist* list = curl_slist_append(nullptr, "Content-Type: application/json");
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  const CURLcode rc = curl_easy_perform(curl);
  EXPECT_EQ(rc, CURLE_OK) << method << " " << path << ": " << curl_easy_strerror(rc);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return r;
}

Json SchemaJson() {
  return Json::parse(R"({
    "type": "struct",
    "fields": [
      {"id": 1, "name": "id", "required": true, "type": "long"},
      {"id": 2, "name": "name", "required": false, "type": "string"},
      {"id": 3, "name": "tags", "required": false,
       "type": {"type": "list", "element-id": 5, "element": "string", "element-required": false}},
      {"id": 4, "name": "address", "required": false,
       "type": {"type": "struct", "fields": [
         {"id": 6, "name": "city", "required": false, "type": "string"}]}}
    ],
    "identifier-field-ids": [1]
  })");
}

Json CreateRequest(const std::string& name) {
  return Json{
      {"name", name},
      {"schema", SchemaJson()},
      {"partition-spec",
       {{"fields",
         Json::array({{{"source-id", 1}, {"transform", "bucket[4]"}, {"name", "id_bucket"}}})}}},
      {"properties", {{"owner", "test"}}}};
}

class CatalogServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() / "wh");
    warehouse_ = lake::ToUri((dir_.path() / "wh").string());
    auto catalog =
        lake::OpenSqlCatalog("sqlite:" + dir_.File("catalog.db"), "ferry", lake::LocalFileIO());
    ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
    catalog_ = std::move(*catalog);
  }

  void Serve(ServeOptions o = {}) {
    o.listen = o.listen == ServeOptions{}.listen ? "127.0.0.1:0" : o.listen;
    o.warehouse = warehouse_;
    auto s = RestCatalogServer::Start(o, catalog_.get());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    url_ = server_->url();
  }

  Reply Get(const std::string& path) { return Call(url_, "GET", path); }
  Reply Post(const std::string& path, const Json& body) {
    return Call(url_, "POST", path, body.dump());
  }

  void CreateNamespace(const Json& levels) {
    Reply r = Post("/v1/ferry/namespaces", Json{{"namespace", levels}});
    ASSERT_EQ(r.status, 200) << r.body;
  }

  Json CreateTable(const std::string& ns, const std::string& name) {
    Reply r = Post("/v1/ferry/namespaces/" + ns + "/tables", CreateRequest(name));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  }

  testing::TempDir dir_;
  std::string warehouse_;
  std::unique_ptr<lake::Catalog> catalog_;
  std::unique_ptr<RestCatalogServer> server_;
  std::string url_;
};

TEST_F(CatalogServerTest, ConfigListsEveryEndpointAndThePrefix) {
  Serve();
  Reply r = Get("/v1/config?warehouse=anything");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  EXPECT_EQ(j["overrides"]["prefix"], "ferry");
  EXPECT_TRUE(j["defaults"].is_object());
  EXPECT_EQ(j["endpoints"].size(), RestHandler::Endpoints().size());
  for (const auto& e : RestHandler::Endpoints()) {
    EXPECT_NE(std::find(j["endpoints"].begin(), j["endpoints"].end(), e), j["endpoints"].end())
        << e;
  }
  EXPECT_NE(r.headers.find("application/json"), std::string::npos);
  // Every listed endpoint names a route of the spec's form.
  for (const auto& e : j["endpoints"]) {
    EXPECT_NE(e.get<std::string>().find(" /v1/{prefix}/"), std::string::npos) << e;
  }
}

TEST_F(CatalogServerTest, NamespacesCreateListLoadUpdateDrop) {
  Serve();
  CreateNamespace(Json::array({"sales"}));
  Reply created = Post("/v1/ferry/namespaces",
                       Json{{"namespace", {"sales", "eu"}}, {"properties", {{"owner", "ann"}}}});
  ASSERT_EQ(created.status, 200) << created.body;
  EXPECT_EQ(created.json()["namespace"], Json({"sales", "eu"}));
  EXPECT_EQ(created.json()["properties"]["owner"], "ann");

  Reply again = Post("/v1/ferry/namespaces", Json{{"namespace", {"sales"}}});
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(again.error_type(), "AlreadyExistsException");

  EXPECT_EQ(Get("/v1/ferry/namespaces").json()["namespaces"], Json::array({{"sales"}}));
  EXPECT_EQ(Get("/v1/ferry/namespaces?parent=sales").json()["namespaces"],
            Json::array({{"sales", "eu"}}));
  Reply missing_parent = Get("/v1/ferry/namespaces?parent=nope");
  EXPECT_EQ(missing_parent.status, 404);
  EXPECT_EQ(missing_parent.error_type(), "NoSuchNamespaceException");

  Reply loaded = Get("/v1/ferry/namespaces/sales%1Feu");
  ASSERT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_EQ(loaded.json()["namespace"], Json({"sales", "eu"}));
  EXPECT_EQ(loaded.json()["properties"], Json({{"owner", "ann"}}));
  EXPECT_EQ(Call(url_, "HEAD", "/v1/ferry/namespaces/sales%1Feu").status, 204);
  EXPECT_EQ(Call(url_, "HEAD", "/v1/ferry/namespaces/nope").status, 404);

  Reply updated = Post("/v1/ferry/namespaces/sales%1Feu/properties",
                       Json{{"updates", {{"team", "ops"}}}, {"removals", {"owner", "absent"}}});
  ASSERT_EQ(updated.status, 200) << updated.body;
  EXPECT_EQ(updated.json()["updated"], Json({"team"}));
  EXPECT_EQ(updated.json()["removed"], Json({"owner"}));
  EXPECT_EQ(updated.json()["missing"], Json({"absent"}));
  EXPECT_EQ(Get("/v1/ferry/namespaces/sales%1Feu").json()["properties"], Json({{"team", "ops"}}));
  Reply both = Post("/v1/ferry/namespaces/sales/properties",
                    Json{{"updates", {{"k", "v"}}}, {"removals", {"k"}}});
  EXPECT_EQ(both.status, 422);
  EXPECT_EQ(both.error_type(), "UnprocessableEntityException");

  EXPECT_EQ(Call(url_, "DELETE", "/v1/ferry/namespaces/sales%1Feu").status, 204);
  Reply gone = Call(url_, "DELETE", "/v1/ferry/namespaces/sales%1Feu");
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(gone.error_type(), "NoSuchNamespaceException");
  Reply load_gone = Get("/v1/ferry/namespaces/sales%1Feu");
  EXPECT_EQ(load_gone.status, 404);
  EXPECT_EQ(load_gone.error_type(), "NoSuchNamespaceException");

  // A level with a '.' cannot be stored apart from two levels.
  Reply dotted = Post("/v1/ferry/namespaces", Json{{"namespace", {"a.b"}}});
  EXPECT_EQ(dotted.status, 400);
  EXPECT_EQ(dotted.error_type(), "BadRequestException");
}

TEST_F(CatalogServerTest, NamespaceWithTablesIsNotDropped) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  CreateTable("db", "t");
  Reply r = Call(url_, "DELETE", "/v1/ferry/namespaces/db");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.error_type(), "NamespaceNotEmptyException");
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/t").status, 200);
}

TEST_F(CatalogServerTest, ListsPageByToken) {
  Serve();
  for (const char* ns : {"a", "b", "c", "d", "e"}) CreateNamespace(Json::array({ns}));
  // Without pageToken: everything, no next-page-token.
  Json all = Get("/v1/ferry/namespaces?pageSize=2").json();
  EXPECT_EQ(all["namespaces"].size(), 5u);
  EXPECT_FALSE(all.contains("next-page-token"));
  std::vector<std::string> seen;
  std::string token;
  for (int page = 0; page < 10; ++page) {
    Json j = Get("/v1/ferry/namespaces?pageSize=2&pageToken=" + token).json();
    for (const auto& ns : j["namespaces"]) seen.push_back(ns[0].get<std::string>());
    if (j["next-page-token"].is_null()) break;
    token = j["next-page-token"].get<std::string>();
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(Get("/v1/ferry/namespaces?pageSize=0&pageToken=").status, 400);
}

TEST_F(CatalogServerTest, CreateLoadAndListTables) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  Json created = CreateTable("db", "orders");
  const std::string location = created["metadata-location"].get<std::string>();
  const Json& m = created["metadata"];
  EXPECT_EQ(m["format-version"], 2);
  EXPECT_EQ(m["location"], warehouse_ + "/db/orders");
  EXPECT_EQ(location.rfind(warehouse_ + "/db/orders/metadata/", 0), 0u) << location;
  EXPECT_TRUE(lake::LocalFileIO()->Exists(location));
  // The client's field ids, nested ones included, and its spec.
  EXPECT_EQ(m["schemas"][0]["fields"], SchemaJson()["fields"]);
  EXPECT_EQ(m["schemas"][0]["identifier-field-ids"], Json({1}));
  EXPECT_EQ(m["last-column-id"], 6);
  EXPECT_EQ(m["partition-specs"][0]["fields"][0]["transform"], "bucket[4]");
  EXPECT_EQ(m["partition-specs"][0]["fields"][0]["field-id"], 1000);
  EXPECT_EQ(m["last-partition-id"], 1000);
  EXPECT_EQ(m["properties"]["owner"], "test");
  EXPECT_TRUE(created["config"].is_object());

  Reply loaded = Get("/v1/ferry/namespaces/db/tables/orders");
  ASSERT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_EQ(loaded.json()["metadata-location"], location);
  // The metadata as stored in the file it names.
  auto stored = lake::LocalFileIO()->Read(location);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(loaded.json()["metadata"], Json::parse(*stored));
  EXPECT_EQ(Call(url_, "HEAD", "/v1/ferry/namespaces/db/tables/orders").status, 204);
  Reply absent = Call(url_, "HEAD", "/v1/ferry/namespaces/db/tables/nope");
  EXPECT_EQ(absent.status, 404);
  EXPECT_TRUE(absent.body.empty());

  Json listed = Get("/v1/ferry/namespaces/db/tables").json();
  EXPECT_EQ(listed["identifiers"], Json::array({{{"namespace", {"db"}}, {"name", "orders"}}}));

  Reply twice = Post("/v1/ferry/namespaces/db/tables", CreateRequest("orders"));
  EXPECT_EQ(twice.status, 409);
  EXPECT_EQ(twice.error_type(), "AlreadyExistsException");
  Reply no_ns = Post("/v1/ferry/namespaces/nope/tables", CreateRequest("t"));
  EXPECT_EQ(no_ns.status, 404);
  EXPECT_EQ(no_ns.error_type(), "NoSuchNamespaceException");
  Reply no_table = Get("/v1/ferry/namespaces/db/tables/nope");
  EXPECT_EQ(no_table.status, 404);
  EXPECT_EQ(no_table.error_type(), "NoSuchTableException");
}

TEST_F(CatalogServerTest, CreateRefusesBadSchemasAndForeignLocations) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  Json dup = CreateRequest("t");
  dup["schema"]["fields"][1]["id"] = 1;
  Reply r = Post("/v1/ferry/namespaces/db/tables", dup);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.error_type(), "BadRequestException");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("field 'name'"), std::string::npos)
      << r.body;

  Json outside = CreateRequest("t");
  outside["location"] = lake::ToUri(dir_.File("elsewhere"));
  r = Post("/v1/ferry/namespaces/db/tables", outside);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("outside the served warehouse"),
            std::string::npos);
  Json escape = CreateRequest("t");
  escape["location"] = warehouse_ + "/../x";
  EXPECT_EQ(Post("/v1/ferry/namespaces/db/tables", escape).status, 400);

  Json inside = CreateRequest("t");
  inside["location"] = warehouse_ + "/custom/t/";
  r = Post("/v1/ferry/namespaces/db/tables", inside);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["metadata"]["location"], warehouse_ + "/custom/t");

  Json v3 = CreateRequest("t3");
  v3["properties"]["format-version"] = "3";
  r = Post("/v1/ferry/namespaces/db/tables", v3);
  EXPECT_EQ(r.status, 406);
  EXPECT_EQ(r.error_type(), "UnsupportedOperationException");
}

TEST_F(CatalogServerTest, CommitAppliesUpdatesAndRefusesStaleRequirements) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  Json created = CreateTable("db", "t");
  const std::string uuid = created["metadata"]["table-uuid"];
  const std::string path = "/v1/ferry/namespaces/db/tables/t";
  Json snapshot{{"snapshot-id", 42},
                {"timestamp-ms", 1700000000000},
                {"manifest-list", warehouse_ + "/db/t/metadata/snap-42.avro"},
                {"summary", {{"operation", "append"}}},
                {"schema-id", 0}};
  Json commit{
      {"identifier", {{"namespace", {"db"}}, {"name", "t"}}},
      {"requirements",
       Json::array(
           {{{"type", "assert-table-uuid"}, {"uuid", uuid}},
            {{"type", "assert-ref-snapshot-id"}, {"ref", "main"}, {"snapshot-id", nullptr}}})},
      {"updates", Json::array({{{"action", "add-snapshot"}, {"snapshot", snapshot}},
                               {{"action", "set-snapshot-ref"},
                                {"ref-name", "main"},
                                {"type", "branch"},
                                {"snapshot-id", 42}},
                               {{"action", "set-properties"}, {"updates", {{"k", "v"}}}}})}};
  Reply r = Post(path, commit);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string after = r.json()["metadata-location"];
  EXPECT_NE(after, created["metadata-location"].get<std::string>());
  EXPECT_EQ(r.json()["metadata"]["current-snapshot-id"], 42);
  EXPECT_EQ(r.json()["metadata"]["properties"]["k"], "v");
  EXPECT_EQ(Get(path).json()["metadata-location"], after);

  // The same commit again: main is no longer empty, so its requirement fails; nothing changes.
  Reply stale = Post(path, commit);
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.error_type(), "CommitFailedException");
  EXPECT_EQ(Get(path).json()["metadata-location"], after);

  Json unknown{{"requirements", Json::array({{{"type", "assert-something-new"}}})},
               {"updates", Json::array()}};
  r = Post(path, unknown);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.error_type(), "BadRequestException");
  Json bad_update{{"requirements", Json::array()},
                  {"updates", Json::array({{{"action", "no-such-action"}}})}};
  EXPECT_EQ(Post(path, bad_update).status, 400);
  Json moved{
      {"requirements", Json::array()},
      {"updates",
       Json::array({{{"action", "set-location"}, {"location", lake::ToUri(dir_.File("x"))}}})}};
  EXPECT_EQ(Post(path, moved).status, 400);

  Reply missing = Post("/v1/ferry/namespaces/db/tables/nope",
                       Json{{"requirements", Json::array()}, {"updates", Json::array()}});
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.error_type(), "NoSuchTableException");
}

TEST_F(CatalogServerTest, LoadHonoursSnapshotsAndETag) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  Json created = CreateTable("db", "t");
  const std::string path = "/v1/ferry/namespaces/db/tables/t";
  auto add = [&](int64_t id, const char* ref) {
    Json c{{"requirements", Json::array()},
           {"updates", Json::array({{{"action", "add-snapshot"},
                                     {"snapshot",
                                      {{"snapshot-id", id},
                                       {"timestamp-ms", 1700000000000 + id},
                                       {"manifest-list", warehouse_ + "/db/t/m.avro"},
                                       {"summary", {{"operation", "append"}}}}}},
                                    {{"action", "set-snapshot-ref"},
                                     {"ref-name", ref},
                                     {"type", "branch"},
                                     {"snapshot-id", id}}})}};
    ASSERT_EQ(Post(path, c).status, 200);
  };
  add(1, "main");
  add(2, "main");
  EXPECT_EQ(Get(path).json()["metadata"]["snapshots"].size(), 2u);
  Json refs = Get(path + "?snapshots=refs").json();
  ASSERT_EQ(refs["metadata"]["snapshots"].size(), 1u);
  EXPECT_EQ(refs["metadata"]["snapshots"][0]["snapshot-id"], 2);
  EXPECT_EQ(Get(path + "?snapshots=some").status, 400);

  Reply first = Get(path);
  const size_t at = first.headers.find("ETag: ");
  ASSERT_NE(at, std::string::npos) << first.headers;
  const std::string etag = first.headers.substr(at + 6, first.headers.find('\r', at) - at - 6);
  EXPECT_EQ(Call(url_, "GET", path, "", {"If-None-Match: " + etag}).status, 304);
  add(3, "main");
  EXPECT_EQ(Call(url_, "GET", path, "", {"If-None-Match: " + etag}).status, 200);
}

TEST_F(CatalogServerTest, StageCreateThenCreateTransaction) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  Json staged_req = CreateRequest("ctas");
  staged_req["stage-create"] = true;
  Reply staged = Post("/v1/ferry/namespaces/db/tables", staged_req);
  ASSERT_EQ(staged.status, 200) << staged.body;
  EXPECT_FALSE(staged.json().contains("metadata-location"));
  EXPECT_EQ(Call(url_, "HEAD", "/v1/ferry/namespaces/db/tables/ctas").status, 404);

  const Json m = staged.json()["metadata"];
  const std::string uuid = m["table-uuid"];
  Json commit{
      {"requirements", Json::array({{{"type", "assert-create"}}})},
      {"updates",
       Json::array({{{"action", "assign-uuid"}, {"uuid", uuid}},
                    {{"action", "upgrade-format-version"}, {"format-version", 2}},
                    {{"action", "add-schema"}, {"schema", m["schemas"][0]}, {"last-column-id", 6}},
                    {{"action", "set-current-schema"}, {"schema-id", -1}},
                    {{"action", "add-spec"}, {"spec", m["partition-specs"][0]}},
                    {{"action", "set-default-spec"}, {"spec-id", -1}},
                    {{"action", "add-sort-order"}, {"sort-order", m["sort-orders"][0]}},
                    {{"action", "set-default-sort-order"}, {"sort-order-id", -1}},
                    {{"action", "set-location"}, {"location", m["location"]}},
                    {{"action", "set-properties"}, {"updates", {{"created-by", "ctas"}}}}})}};
  Reply r = Post("/v1/ferry/namespaces/db/tables/ctas", commit);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.json()["metadata-location"].is_string());
  Json loaded = Get("/v1/ferry/namespaces/db/tables/ctas").json();
  EXPECT_EQ(loaded["metadata"]["table-uuid"], uuid);
  EXPECT_EQ(loaded["metadata"]["schemas"][0]["fields"], SchemaJson()["fields"]);
  EXPECT_EQ(loaded["metadata"]["partition-specs"][0]["fields"][0]["field-id"], 1000);
  EXPECT_EQ(loaded["metadata"]["properties"]["created-by"], "ctas");

  // A second create of the same name: assert-create fails.
  Reply again = Post("/v1/ferry/namespaces/db/tables/ctas", commit);
  EXPECT_EQ(again.status, 409);
  EXPECT_EQ(again.error_type(), "CommitFailedException");
  // Staging a name that is taken is refused at once.
  EXPECT_EQ(Post("/v1/ferry/namespaces/db/tables", staged_req).status, 409);
}

TEST_F(CatalogServerTest, RenameAndDrop) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  CreateNamespace(Json::array({"other"}));
  CreateTable("db", "a");
  CreateTable("db", "b");
  auto rename = [&](const std::string& from, const std::string& to_ns, const std::string& to) {
    return Post("/v1/ferry/tables/rename",
                Json{{"source", {{"namespace", {"db"}}, {"name", from}}},
                     {"destination", {{"namespace", {to_ns}}, {"name", to}}}});
  };
  Reply r = rename("a", "other", "a2");
  EXPECT_EQ(r.status, 204) << r.body;
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/a").status, 404);
  EXPECT_EQ(Get("/v1/ferry/namespaces/other/tables/a2").status, 200);
  r = rename("b", "other", "a2");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.error_type(), "AlreadyExistsException");
  r = rename("nope", "other", "x");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error_type(), "NoSuchTableException");
  r = rename("b", "nowhere", "x");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error_type(), "NoSuchNamespaceException");

  Json loaded = Get("/v1/ferry/namespaces/db/tables/b").json();
  const std::string file = loaded["metadata-location"];
  EXPECT_EQ(Call(url_, "DELETE", "/v1/ferry/namespaces/db/tables/b?purgeRequested=true").status,
            204);
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/b").status, 404);
  EXPECT_TRUE(lake::LocalFileIO()->Exists(file));  // dropped from the catalog, files kept
  r = Call(url_, "DELETE", "/v1/ferry/namespaces/db/tables/b");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error_type(), "NoSuchTableException");
}

TEST_F(CatalogServerTest, TransactionsCommitAllOrNone) {
  Serve();
  CreateNamespace(Json::array({"db"}));
  Json a = CreateTable("db", "a");
  Json b = CreateTable("db", "b");
  auto change = [](const std::string& name, const std::string& uuid, const std::string& value) {
    return Json{
        {"identifier", {{"namespace", {"db"}}, {"name", name}}},
        {"requirements", Json::array({{{"type", "assert-table-uuid"}, {"uuid", uuid}}})},
        {"updates", Json::array({{{"action", "set-properties"}, {"updates", {{"v", value}}}}})}};
  };
  const std::string ua = a["metadata"]["table-uuid"], ub = b["metadata"]["table-uuid"];
  Reply r = Post("/v1/ferry/transactions/commit",
                 Json{{"table-changes", {change("a", ua, "1"), change("b", ub, "1")}}});
  ASSERT_EQ(r.status, 204) << r.body;
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/a").json()["metadata"]["properties"]["v"], "1");
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/b").json()["metadata"]["properties"]["v"], "1");

  // b's requirement fails: a is not changed either.
  r = Post("/v1/ferry/transactions/commit",
           Json{{"table-changes", {change("a", ua, "2"), change("b", "not-its-uuid", "2")}}});
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.error_type(), "CommitFailedException");
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/a").json()["metadata"]["properties"]["v"], "1");
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/b").json()["metadata"]["properties"]["v"], "1");

  r = Post("/v1/ferry/transactions/commit",
           Json{{"table-changes", {change("a", ua, "3"), change("nope", ub, "3")}}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error_type(), "NoSuchTableException");
  EXPECT_EQ(Get("/v1/ferry/namespaces/db/tables/a").json()["metadata"]["properties"]["v"], "1");
  r = Post("/v1/ferry/transactions/commit",
           Json{{"table-changes", {change("a", ua, "3"), change("a", ua, "4")}}});
  EXPECT_EQ(r.status, 400);
}

TEST_F(CatalogServerTest, TokenIsRequiredWhenSet) {
  ServeOptions o;
  o.token = "s3cret-token";
  Serve(o);
  Reply none = Get("/v1/config");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.error_type(), "NotAuthorizedException");
  EXPECT_EQ(none.body.find("s3cret"), std::string::npos);
  Reply wrong = Call(url_, "GET", "/v1/config", "", {"Authorization: Bearer s3cret-tokeN"});
  EXPECT_EQ(wrong.status, 401);
  Reply longer = Call(url_, "GET", "/v1/config", "", {"Authorization: Bearer s3cret-token2"});
  EXPECT_EQ(longer.status, 401);
  Reply right = Call(url_, "GET", "/v1/config", "", {"Authorization: Bearer s3cret-token"});
  EXPECT_EQ(right.status, 200);
  Reply ns = Call(url_, "POST", "/v1/ferry/namespaces", R"({"namespace": ["x"]})",
                  {"Authorization: bearer s3cret-token"});
  EXPECT_EQ(ns.status, 200) << ns.body;
  EXPECT_EQ(Call(url_, "POST", "/v1/ferry/namespaces", R"({"namespace": ["y"]})").status, 401);
}

TEST_F(CatalogServerTest, RefusesOtherInterfacesWithoutAToken) {
  ServeOptions o;
  o.listen = "0.0.0.0:0";
  o.warehouse = warehouse_;
  auto s = RestCatalogServer::Start(o, catalog_.get());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("FERRY_CATALOG_TOKEN"), std::string::npos);
  o.listen = ":0";
  EXPECT_FALSE(RestCatalogServer::Start(o, catalog_.get()).ok());
  o.token = "t";
  o.listen = "0.0.0.0:0";
  auto with_token = RestCatalogServer::Start(o, catalog_.get());
  EXPECT_TRUE(with_token.ok()) << with_token.status().ToString();
  o.token = "";
  o.listen = "localhost:0";
  auto local = RestCatalogServer::Start(o, catalog_.get());
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ((*local)->host(), "127.0.0.1");
  EXPECT_GT((*local)->port(), 0);
  o.listen = "example.com:0";
  EXPECT_FALSE(RestCatalogServer::Start(o, catalog_.get()).ok());
}

TEST_F(CatalogServerTest, AddressInUseIsNamed) {
  Serve();
  ServeOptions o;
  o.listen = "127.0.0.1:" + std::to_string(server_->port());
  o.warehouse = warehouse_;
  auto s = RestCatalogServer::Start(o, catalog_.get());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(o.listen), std::string::npos) << s.status().message();
}

TEST_F(CatalogServerTest, ErrorsCarryTheErrorModel) {
  ServeOptions o;
  o.body_bytes_max = 1024;
  Serve(o);
  Reply r = Get("/v2/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error_type(), "NotFoundException");
  r = Get("/v1/ferry/views");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.error_type(), "NotFoundException");
  r = Get("/v1/other-prefix/namespaces");
  EXPECT_EQ(r.status, 404);
  r = Call(url_, "PUT", "/v1/ferry/namespaces", "{}");
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.headers.find("Allow: GET, POST"), std::string::npos);
  EXPECT_EQ(r.error_type(), "MethodNotAllowedException");
  r = Call(url_, "POST", "/v1/ferry/namespaces", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.error_type(), "BadRequestException");
  r = Call(url_, "POST", "/v1/ferry/namespaces", std::string(4096, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.error_type(), "BadRequestException");
  // Metrics reports are accepted and dropped.
  EXPECT_EQ(
      Post("/v1/ferry/namespaces/db/tables/t/metrics", Json{{"report-type", "scan-report"}}).status,
      204);
}

TEST_F(CatalogServerTest, RoutesWithoutThePrefixToo) {
  Serve();
  Reply r = Post("/v1/namespaces", Json{{"namespace", {"plain"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Get("/v1/namespaces").json()["namespaces"], Json::array({{"plain"}}));
  EXPECT_EQ(Get("/v1/ferry/namespaces/plain").status, 200);
}

TEST_F(CatalogServerTest, NamesWithEncodedCharacters) {
  Serve();
  CreateNamespace(Json::array({"a b"}));
  Reply r = Post("/v1/ferry/namespaces/a%20b/tables", CreateRequest("x/y"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Get("/v1/ferry/namespaces/a%20b/tables/x%2Fy").status, 200);
  Json listed = Get("/v1/ferry/namespaces/a%20b/tables").json();
  EXPECT_EQ(listed["identifiers"][0]["name"], "x/y");
  // The table's folder is made safe; it stays below the warehouse.
  const std::string loc = r.json()["metadata"]["location"];
  EXPECT_TRUE(LocationUnder(loc, warehouse_)) << loc;
}

// ferry's own REST client (the Iceberg destination's, with a rest+http:// catalog) writes
// through the server: creates, appends of two writers, a multi-table commit.
TEST_F(CatalogServerTest, FerrysRestClientWritesThroughTheServer) {
  ServeOptions o;
  o.token = "tok";
  Serve(o);
  lake::RestCatalogOptions ro;
  ro.uri = "rest+" + url_;
  ro.token = "tok";
  auto rest = lake::OpenRestCatalog(ro);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  Schema schema;
  schema.fields = {{1, "id", DataType::Int64(), true, ""},
                   {2, "name", DataType::String(), false, ""}};
  schema.identifier_field_ids = {1};
  const lake::TableIdent ident{"shop", "orders"};
  auto open = [&]() {
    auto t = lake::Table::LoadOrCreate(rest->get(), lake::LocalFileIO(), ident,
                                       warehouse_ + "/shop/orders", schema, {});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  };
  auto a = open();
  auto b = open();  // a second writer of the same table
  ASSERT_TRUE(a && b);
  auto append = [&](lake::Table& t, int64_t rows) {
    lake::DataFile f;
    f.path = t.NewDataFileUri("test");
    f.record_count = rows;
    f.file_size_bytes = rows * 10;
    lake::AppendRequest req;
    req.schema = &schema;
    req.data_files = {f};
    auto r = t.Append(req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : lake::CommitOutcome{};
  };
  append(*a, 100);
  lake::CommitOutcome second = append(*b, 200);

  // The SQL catalog behind the server has both snapshots, in the metadata file the client saw.
  auto direct = catalog_->LoadTable(ident);
  ASSERT_TRUE(direct.ok() && *direct);
  EXPECT_EQ((*direct)->metadata_location, second.metadata_location);
  EXPECT_EQ((*direct)->metadata.doc()["snapshots"].size(), 2u);
  EXPECT_EQ((*direct)->metadata.last_sequence_number(), 2);

  // A multi-table commit through the client: all or none.
  auto c = lake::Table::LoadOrCreate(rest->get(), lake::LocalFileIO(), {"shop", "items"},
                                     warehouse_ + "/shop/items", schema, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto props = [](const lake::TableIdent& t, const std::string& uuid, const std::string& v) {
    lake::TableCommit commit;
    commit.ident = t;
    commit.requirements = Json::array({{{"type", "assert-table-uuid"}, {"uuid", uuid}}});
    commit.updates = Json::array({{{"action", "set-properties"}, {"updates", {{"v", v}}}}});
    return commit;
  };
  const std::string uo = (*direct)->metadata.uuid(), ui = (*c)->metadata().uuid();
  ASSERT_TRUE(
      (*rest)->CommitTables({props(ident, uo, "1"), props({"shop", "items"}, ui, "1")}).ok());
  Status failed = (*rest)->CommitTables({props(ident, uo, "2"), props({"shop", "items"}, uo, "2")});
  EXPECT_EQ(failed.code(), StatusCode::kCommitFailed) << failed.ToString();
  auto after = catalog_->LoadTable(ident);
  ASSERT_TRUE(after.ok() && *after);
  EXPECT_EQ(*(*after)->metadata.Property("v"), "1");
}

TEST(LocationUnderTest, SpellingsOfOnePlace) {
  EXPECT_TRUE(LocationUnder("file:///w/db/t", "/w"));
  EXPECT_TRUE(LocationUnder("file:/w/db/t", "file:///w/"));
  EXPECT_TRUE(LocationUnder("/w/db/t", "file:///w"));
  EXPECT_FALSE(LocationUnder("file:///w", "file:///w"));
  EXPECT_FALSE(LocationUnder("file:///wx/t", "file:///w"));
  EXPECT_FALSE(LocationUnder("file:///w/../etc", "file:///w"));
  EXPECT_FALSE(LocationUnder("file:///w/a//b", "file:///w"));
  EXPECT_TRUE(LocationUnder("s3a://bucket/lake/t", "s3://bucket/lake"));
  EXPECT_FALSE(LocationUnder("s3://other/lake/t", "s3://bucket/lake"));
  EXPECT_FALSE(LocationUnder("relative/t", "file:///w"));
}

}  // namespace
}  // namespace ferry::catalog_server
