#include "ferry/config/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace ferry::config {
namespace {

Result<PipelineConfig> Parse(const std::string& yaml) {
  return ParsePipeline(yaml, "/p/pipeline.yaml", "/p");
}

TEST(ConfigTest, ParsesTheDocumentedExample) {
  auto cfg = Parse(R"(
name: shop
source:
  type: sqlite
  path: ./shop.db
  mode: full_refresh
  streams:
    - orders
    - name: customers
      chunk_rows: 50000
destination:
  type: iceberg
  warehouse: ./warehouse
  namespace: shop
state: ./state.json
)");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->name, "shop");
  EXPECT_EQ(cfg->source().type, "sqlite");
  EXPECT_FALSE(cfg->source().all_streams);
  ASSERT_EQ(cfg->source().streams.size(), 2u);
  EXPECT_EQ(cfg->source().streams[0].name, "orders");
  EXPECT_EQ(cfg->source().streams[0].chunk_rows, 100000);
  EXPECT_EQ(cfg->source().readers, DefaultReaders());
  EXPECT_GE(cfg->source().readers, 1);
  EXPECT_LE(cfg->source().readers, 4);
  EXPECT_EQ(cfg->source().streams[1].chunk_rows, 50000);
  EXPECT_EQ(cfg->state_path, "/p/state.json");
  auto path = cfg->source().options.TakePath("path");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, "/p/shop.db");
  EXPECT_TRUE(cfg->source().options.CheckAllUsed({"path"}).ok());
}

TEST(ConfigTest, TransformsRoutesAndMetadataColumns) {
  auto cfg = Parse(R"yaml(
name: shop
source:
  type: sqlite
  path: ./shop.db
  table_name: "raw_{table}"
  metadata_columns: [_ferry_synced_at]
  streams:
    - name: orders
      exclude_columns: [card]
      rename_columns: {cust_id: customer_id}
      filter: "status <> 'cancelled' AND amount > 0"
      add_columns:
        cents: "CAST(amount * 100 AS INTEGER)"
        day: {expr: "date(created)", type: date}
      table: orders_clean
      metadata_columns: [_ferry_source_table]
    - customers
route:
  - {match: "cust.*", table: "people_{table}"}
destination: {type: iceberg, warehouse: ./w}
)yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  const SourceConfig& src = cfg->source();
  EXPECT_EQ(src.table_name, "raw_{table}");
  ASSERT_EQ(src.routes.size(), 1u);
  EXPECT_EQ(src.routes[0].table, "people_{table}");
  const StreamConfig& o = src.streams[0];
  EXPECT_EQ(o.exclude_columns, (std::vector<std::string>{"card"}));
  ASSERT_EQ(o.rename_columns.size(), 1u);
  EXPECT_EQ(o.rename_columns[0].second, "customer_id");
  EXPECT_EQ(o.filter, "status <> 'cancelled' AND amount > 0");
  ASSERT_EQ(o.add_columns.size(), 2u);
  EXPECT_EQ(o.add_columns[0].name, "cents");
  EXPECT_EQ(o.add_columns[0].type, "");
  EXPECT_EQ(o.add_columns[1].type, "date");
  EXPECT_EQ(o.table, "orders_clean");
  EXPECT_EQ(o.metadata_columns, (std::vector<std::string>{"_ferry_source_table"}));
  EXPECT_TRUE(o.transforms());
  // A stream without settings of its own takes the source's.
  EXPECT_EQ(src.streams[1].metadata_columns, (std::vector<std::string>{"_ferry_synced_at"}));

  auto err = [](const std::string& yaml) {
    auto c = Parse("name: p\nsource:\n  type: sqlite\n  path: ./a.db\n" + yaml +
                   "destination: {type: iceberg, warehouse: ./w}\n");
    return c.ok() ? std::string("ok") : c.status().message();
  };
  EXPECT_NE(err("  streams: [{name: t, columns: [a], exclude_columns: [b]}]\n")
                .find("sets both columns and exclude_columns"),
            std::string::npos);
  EXPECT_NE(err("  table_name: \"{schema}\"\n").find("has no {table}"), std::string::npos);
  EXPECT_NE(err("  table_name: \"{tabel}\"\n").find("has '{tabel}'"), std::string::npos);
  EXPECT_NE(err("  streams: [{name: t, metadata_columns: [_ferry_ops]}]\n").find("_ferry_op"),
            std::string::npos);
  EXPECT_NE(err("  streams: [{name: t, filter: \" \"}]\n").find("filter is empty"),
            std::string::npos);
  EXPECT_NE(err("route: [{match: \"(\", table: x}]\n").find("not a regular expression"),
            std::string::npos);
  EXPECT_NE(err("route: [{match: a, table: x, source: nope}]\n").find("source 'nope'"),
            std::string::npos);
  EXPECT_NE(err("  streams: [{name: t, add_columns: {x: {expr: a, typ: long}}}]\n")
                .find("did you mean 'type'"),
            std::string::npos);
  // deletes: soft, for change streams only; a source's setting is its streams' default.
  EXPECT_NE(err("  streams: [{name: t, deletes: soft}]\n").find("use mode cdc"), std::string::npos);
  EXPECT_NE(err("  mode: incremental\n  deletes: soft\n").find("sees no deletes"),
            std::string::npos);
  EXPECT_NE(err("  streams: [{name: t, mode: cdc, deletes: gone}]\n").find("use hard"),
            std::string::npos);
  EXPECT_EQ(err("  mode: cdc\n  deletes: soft\n"), "ok");
  auto soft = Parse(R"yaml(
name: p
source:
  type: sqlite
  path: ./a.db
  mode: cdc
  deletes: soft
  streams: [a, {name: b, deletes: hard}, {name: c, mode: full_refresh}]
destination: {type: iceberg, warehouse: ./w}
)yaml");
  ASSERT_TRUE(soft.ok()) << soft.status().ToString();
  EXPECT_TRUE(soft->source().streams[0].soft_deletes);
  EXPECT_TRUE(soft->source().streams[0].transforms());
  EXPECT_FALSE(soft->source().streams[1].soft_deletes);
  EXPECT_FALSE(soft->source().streams[2].soft_deletes);
}

TEST(ConfigTest, UnknownTopLevelKeyIsNamedWithLineAndSuggestion) {
  auto cfg = Parse("name: a\nsoruce:\n  type: sqlite\n");
  ASSERT_FALSE(cfg.ok());
  const std::string& m = cfg.status().message();
  EXPECT_NE(m.find("unknown key 'soruce'"), std::string::npos) << m;
  EXPECT_NE(m.find("pipeline.yaml:2"), std::string::npos) << m;
  EXPECT_NE(m.find("did you mean 'source'"), std::string::npos) << m;
}

TEST(ConfigTest, UnknownStreamKeyIsAnError) {
  auto cfg = Parse(R"(
name: a
source:
  type: sqlite
  streams:
    - name: t
      chunk_row: 5
destination: {type: iceberg}
)");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("did you mean 'chunk_rows'"), std::string::npos)
      << cfg.status().message();
}

TEST(ConfigTest, TypeSpecificKeysNobodyTookAreReported) {
  auto cfg =
      Parse("name: a\nsource: {type: sqlite, path: x.db, pth: y}\ndestination: {type: iceberg}\n");
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(cfg->source().options.TakePath("path").ok());
  Status s = cfg->source().options.CheckAllUsed({"path"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown key 'pth'"), std::string::npos) << s.message();
}

// A misspelled key inside a section gets what a misspelled top-level key gets: the file and line,
// a "did you mean" among every key the section takes (the shared ones too), the known keys.
TEST(ConfigTest, AMisspelledSharedKeyInASectionIsNamedWithTheFileAndTheFix) {
  auto cfg = Parse(
      "name: a\nsource:\n  type: sqlite\n  path: x.db\n  chunk_row: 5\n"
      "destination: {type: iceberg}\n");
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(cfg->source().options.TakePath("path").ok());
  Status s = cfg->source().options.CheckAllUsed({"path"});
  ASSERT_FALSE(s.ok());
  const std::string& m = s.message();
  EXPECT_EQ(m.rfind("/p/pipeline.yaml:5: unknown key 'chunk_row' in source; did you mean "
                    "'chunk_rows'?",
                    0),
            0u)
      << m;
  for (const char* k : {"path", "type", "mode", "chunk_rows", "readers", "streams"}) {
    EXPECT_NE(m.find(k), std::string::npos) << k << ": " << m;
  }
  // `name` belongs to sources of `sources:` only.
  EXPECT_EQ(m.find(" name,"), std::string::npos) << m;
  EXPECT_EQ(m.find(", name"), std::string::npos) << m;
}

TEST(ConfigTest, BadValuesAreExplained) {
  EXPECT_NE(Parse("name: 'a b'\nsource: {type: sqlite}\ndestination: {type: iceberg}\n")
                .status()
                .message()
                .find("pipeline name 'a b'"),
            std::string::npos);
  EXPECT_NE(Parse("name: a\nsource: {type: sqlite, mode: fast}\ndestination: {type: iceberg}\n")
                .status()
                .message()
                .find("unknown mode 'fast'"),
            std::string::npos);
  EXPECT_NE(Parse("name: a\nsource: {type: sqlite, chunk_rows: -3}\ndestination: {type: iceberg}\n")
                .status()
                .message()
                .find("positive whole number"),
            std::string::npos);
  EXPECT_NE(Parse("name: a\nsource: {type: sqlite, readers: 0}\ndestination: {type: iceberg}\n")
                .status()
                .message()
                .find("source.readers must be a positive whole number"),
            std::string::npos);
  EXPECT_NE(Parse("name: a\nsource: {type: sqlite, readers: 65}\ndestination: {type: iceberg}\n")
                .status()
                .message()
                .find("source.readers is at most 64"),
            std::string::npos);
  EXPECT_NE(Parse("name: a\nsource: {type: sqlite}\n").status().message().find("destination"),
            std::string::npos);
  EXPECT_NE(Parse("name: [a\n").status().message().find("not valid YAML"), std::string::npos);
}

TEST(ConfigTest, EnvironmentVariablesExpandAndMissingOnesAreNamed) {
  ::setenv("FERRY_TEST_PW", "s3cret", 1);
  ::unsetenv("FERRY_TEST_MISSING");
  EXPECT_EQ(*ExpandEnvironment("password=${FERRY_TEST_PW} x"), "password=s3cret x");
  EXPECT_EQ(*ExpandEnvironment("${FERRY_TEST_MISSING:-d}"), "d");
  EXPECT_EQ(*ExpandEnvironment("cost $$5"), "cost $5");
  auto bad = ExpandEnvironment("${FERRY_TEST_MISSING}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("FERRY_TEST_MISSING is not set"), std::string::npos);
}

TEST(ConfigTest, RedactHidesPasswords) {
  EXPECT_EQ(Redact("host=h password=s3cret dbname=d"), "host=h password=*** dbname=d");
  EXPECT_EQ(Redact("postgresql://u:s3cret@h:5432/db"), "postgresql://u:***@h:5432/db");
  EXPECT_EQ(Redact("redis://:pw@127.0.0.1:6379"), "redis://:***@127.0.0.1:6379");
}

TEST(ConfigTest, SizesAcceptUnits) {
  Options o("destination", "/");
  o.Set("a", "128MB", 1);
  o.Set("b", "64 KiB", 2);
  o.Set("c", "lots", 3);
  EXPECT_EQ(*o.TakeBytes("a", 0), 128ll << 20);
  EXPECT_EQ(*o.TakeBytes("b", 0), 64ll << 10);
  EXPECT_FALSE(o.TakeBytes("c", 0).ok());
  EXPECT_EQ(*o.TakeBytes("d", 7), 7);
}

TEST(ConfigTest, NestedMappingsAreTakenWhole) {
  const std::string text = R"(
name: p
source: {type: sqlite, path: ./a.db}
destination:
  type: kafka
  brokers: "b:9092"
  properties:
    sasl.mechanism: PLAIN
    linger.ms: 5
  propertiez: 1
)";
  auto cfg = ParsePipeline(text, "/p/pipeline.yaml", "/p");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  Options& o = cfg->destination.options;
  auto props = o.TakeMap("properties");
  EXPECT_EQ(props,
            (std::map<std::string, std::string>{{"sasl.mechanism", "PLAIN"}, {"linger.ms", "5"}}));
  EXPECT_TRUE(o.TakeMap("none").empty());
  (void)o.TakeString("brokers");
  Status unused = o.CheckAllUsed({"brokers", "properties"});
  ASSERT_FALSE(unused.ok());
  EXPECT_NE(unused.message().find("propertiez"), std::string::npos) << unused.message();
}

TEST(ConfigTest, CheckpointSettingsHaveDefaultsAndAreChecked) {
  const std::string base = R"(
name: p
source: {type: sqlite, path: ./a.db}
destination: {type: iceberg, warehouse: ./w}
)";
  auto cfg = Parse(base);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->checkpoint.interval_ms, 30000);
  EXPECT_EQ(cfg->checkpoint.max_changes, 200000);
  EXPECT_EQ(cfg->checkpoint.tolerable_failures, 10);
  EXPECT_EQ(cfg->checkpoint.timeout_ms, 600000);
  cfg = Parse(base +
              "checkpoint: {interval: 1500ms, max_changes: 10, max_bytes: 1MiB, "
              "tolerable_failures: 0, timeout: 2s, min_pause: 250ms}\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->checkpoint.interval_ms, 1500);
  EXPECT_EQ(cfg->checkpoint.max_changes, 10);
  EXPECT_EQ(cfg->checkpoint.max_bytes, 1 << 20);
  EXPECT_EQ(cfg->checkpoint.tolerable_failures, 0);
  EXPECT_EQ(cfg->checkpoint.timeout_ms, 2000);
  EXPECT_EQ(cfg->checkpoint.min_pause_ms, 250);
  EXPECT_NE(Parse(base + "checkpoint: {min_pause: soon}\n").status().message().find("min_pause"),
            std::string::npos);
  cfg = Parse(base + "checkpoint: {timeout: 0}\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->checkpoint.timeout_ms, 0);
  cfg = Parse(base + "checkpoint: {timeout: 0s, min_pause: 0}\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->checkpoint.timeout_ms, 0);
  EXPECT_EQ(cfg->checkpoint.min_pause_ms, 0);
  EXPECT_NE(Parse(base + "checkpoint: {interval: 0}\n").status().message().find("at least 100ms"),
            std::string::npos);
  EXPECT_NE(
      Parse(base + "checkpoint: {timeout: 5ms}\n").status().message().find("(0 for no limit)"),
      std::string::npos);
  auto bad = Parse(base + "checkpoint: {interval: soon}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("500ms, 30s or 5m"), std::string::npos);
  bad = Parse(base + "checkpoint: {intervall: 5s}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("interval"), std::string::npos);
  EXPECT_EQ(ParseDurationMs("5d"), int64_t{5} * 24 * 3600 * 1000);
  EXPECT_EQ(ParseDurationMs("12"), std::nullopt);
}

TEST(ConfigTest, SeveralNamedSourcesAndTheirAlignmentSettings) {
  auto cfg = Parse(R"(
name: merged
sources:
  - name: east
    type: sqlite
    path: ./east.db
    streams: [orders]
  - name: west
    type: postgres
    dsn: host=h
    mode: cdc
destination: {type: iceberg, warehouse: ./w}
checkpoint: {mode: at_least_once, alignment_timeout: 30s, max_concurrent: 2}
)");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_EQ(cfg->sources.size(), 2u);
  EXPECT_TRUE(cfg->merged());
  EXPECT_EQ(cfg->sources[0].name, "east");
  EXPECT_EQ(cfg->sources[1].name, "west");
  EXPECT_EQ(cfg->sources[1].mode, SyncMode::kCdc);
  EXPECT_EQ(cfg->sources[1].pipeline, "merged_west");
  EXPECT_TRUE(cfg->sources[1].all_streams);
  auto path = cfg->sources[0].options.TakePath("path");
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, "/p/east.db");
  EXPECT_FALSE(cfg->checkpoint.exactly_once);
  EXPECT_EQ(cfg->checkpoint.alignment_timeout_ms, 30000);
  EXPECT_EQ(cfg->checkpoint.max_concurrent, 2);

  auto defaults = Parse("name: a\nsource: {type: sqlite, path: x}\ndestination: {type: iceberg}\n");
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->merged());
  EXPECT_TRUE(defaults->checkpoint.exactly_once);
  EXPECT_EQ(defaults->checkpoint.alignment_timeout_ms, 0);
  EXPECT_EQ(defaults->checkpoint.max_concurrent, 1);
}

TEST(ConfigTest, BadSourceListsAreExplained) {
  auto message = [](const std::string& yaml) {
    auto cfg = Parse("name: a\n" + yaml);
    EXPECT_FALSE(cfg.ok()) << yaml;
    return cfg.ok() ? std::string() : cfg.status().message();
  };
  EXPECT_NE(message("source: {type: sqlite}\nsources: [{name: b, type: sqlite}]\n")
                .find("both 'source:' and 'sources:'"),
            std::string::npos);
  EXPECT_NE(message("sources: [{type: sqlite}]\n").find("missing key 'name'"), std::string::npos);
  EXPECT_NE(
      message("sources: [{name: a, type: sqlite}, {name: a, type: sqlite}]\n").find("listed twice"),
      std::string::npos);
  EXPECT_NE(message("sources: [{name: 'a b', type: sqlite}]\n").find("source name 'a b'"),
            std::string::npos);
  EXPECT_NE(message("sources: []\n").find("list of sources"), std::string::npos);
  EXPECT_NE(message("source: {name: x, type: sqlite}\n").find("with one source, remove it"),
            std::string::npos);
  EXPECT_NE(message("sources: [{name: a, type: sqlite, readers: 0}]\n").find("sources.a.readers"),
            std::string::npos);
  EXPECT_NE(
      message("source: {type: sqlite}\ndestination: {type: iceberg}\ncheckpoint: {mode: twice}\n")
          .find("exactly_once or"),
      std::string::npos);
  EXPECT_NE(
      message(
          "source: {type: sqlite}\ndestination: {type: iceberg}\ncheckpoint: {max_concurrent: 0}\n")
          .find("max_concurrent"),
      std::string::npos);
}

TEST(ConfigTest, AMappingInsideASectionBecomesDottedKeys) {
  auto cfg = ParsePipeline(
      "name: p\nsource: {type: sqlite, path: x.db}\ndestination:\n  type: iceberg\n"
      "  warehouse: s3://lake/wh\n  s3:\n    endpoint: http://127.0.0.1:9000\n"
      "    path_styel: true\n",
      "p.yaml", "/d");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  Options& o = cfg->destination.options;
  EXPECT_EQ(*o.TakeOptionalString("s3.endpoint"), "http://127.0.0.1:9000");
  EXPECT_NE(o.Where("s3.endpoint").find("destination.s3.endpoint (line 7)"), std::string::npos);
  (void)o.TakeLocation("warehouse");
  // A typo inside the mapping is an unknown key, with the suggestion.
  Status s = o.CheckAllUsed({"warehouse", "s3.endpoint", "s3.path_style"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("s3.path_styel"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("s3.path_style"), std::string::npos) << s.message();
  // Two levels down is not a value.
  auto deep = ParsePipeline(
      "name: p\nsource: {type: sqlite, path: x.db}\ndestination:\n  type: iceberg\n"
      "  s3: {endpoint: {url: x}}\n",
      "p.yaml", "/d");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("destination.s3.endpoint must be a single value"),
            std::string::npos)
      << deep.status().message();
}

TEST(ConfigTest, LocationsAreUrisAndPathsBecomeFileUris) {
  Options o("destination", "/p");
  o.Set("rel", "./warehouse/", 1);
  o.Set("abs", "/data/./wh", 2);
  o.Set("file", "file:///data/wh", 3);
  o.Set("java_file", "file:/data/wh", 4);
  o.Set("s3", "s3://lake/warehouse", 5);
  o.Set("host", "file://server/wh", 6);
  o.Set("empty", "", 7);
  EXPECT_EQ(*o.TakeLocation("rel"), "file:///p/warehouse/");
  EXPECT_EQ(*o.TakeLocation("abs"), "file:///data/wh");
  EXPECT_EQ(*o.TakeLocation("file"), "file:///data/wh");
  EXPECT_EQ(*o.TakeLocation("java_file"), "file:///data/wh");
  // Another scheme is kept as written: the storage layer says whether it can write there.
  EXPECT_EQ(*o.TakeLocation("s3"), "s3://lake/warehouse");
  auto host = o.TakeLocation("host");
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(host.status().message().find("destination.host (line 6)"), std::string::npos)
      << host.status().message();
  EXPECT_FALSE(o.TakeLocation("empty").ok());
}

}  // namespace
}  // namespace ferry::config
