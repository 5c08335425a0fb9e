#include "ferry/source/sqlite/sqlite_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/clients/sqlite/sqlite.h"

namespace ferry::source {
namespace {

class SqliteSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (dir_ / "src.db").string();
    auto db = ferry::sqlite::Database::Open(path_, ferry::sqlite::Database::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
  }
  std::unique_ptr<Source> Open() {
    config::SourceConfig cfg;
    cfg.type = "sqlite";
    cfg.options = config::Options("source", dir_.string());
    cfg.options.Set("path", "src.db", 1);
    auto s = OpenSource(cfg);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  ferry::testing::TempDir tmp_;
  const std::filesystem::path& dir_ = tmp_.path();
  std::string path_;
  std::unique_ptr<ferry::sqlite::Database> db_;
};

TEST_F(SqliteSourceTest, DiscoversTablesColumnsKeysAndOddNames) {
  ASSERT_TRUE(db_->Exec(R"(
    CREATE TABLE "Order Items" ("id" INTEGER PRIMARY KEY, "Qty ""x""" INT NOT NULL, "名前" TEXT);
    CREATE TABLE kv (k TEXT, v BLOB, PRIMARY KEY (k)) WITHOUT ROWID;
    CREATE VIEW v1 AS SELECT 1;
    CREATE INDEX i1 ON kv(v);
  )")
                  .ok());
  auto src = Open();
  auto streams = src->Discover();
  ASSERT_TRUE(streams.ok()) << streams.status().ToString();
  ASSERT_EQ(streams->size(), 2u);  // views and sqlite_ internals are not streams
  const StreamInfo& items = (*streams)[0];
  EXPECT_EQ(items.name, "Order Items");
  ASSERT_EQ(items.columns.size(), 3u);
  EXPECT_EQ(items.columns[1].name, "Qty \"x\"");
  EXPECT_FALSE(items.columns[1].nullable);
  EXPECT_EQ(items.columns[2].name, "名前");
  EXPECT_EQ(items.primary_key, std::vector<std::string>{"id"});
  Schema s = items.ToSchema();
  EXPECT_TRUE(s.fields[0].required);  // INTEGER PRIMARY KEY is the rowid
  EXPECT_EQ(s.identifier_field_ids, std::vector<int32_t>{1});
  const StreamInfo& kv = (*streams)[1];
  EXPECT_EQ(kv.chunking, "ranges of primary key (\"k\")");
  // WITHOUT ROWID enforces NOT NULL on its key, so the key becomes the identifier field.
  EXPECT_EQ(kv.ToSchema().identifier_field_ids, std::vector<int32_t>{1});
}

TEST_F(SqliteSourceTest, ChunksCoverEveryRowExactlyOnce) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)").ok());
  ASSERT_TRUE(
      db_->Exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1050)"
                " INSERT INTO t SELECT i * 3, 'v' || i FROM n")
          .ok());
  auto src = Open();
  auto streams = src->Discover();
  ASSERT_TRUE(streams.ok());
  ASSERT_TRUE(src->BeginSnapshot().ok());
  auto plan = src->PlanChunks((*streams)[0], 500);
  ASSERT_TRUE(plan.ok());
  std::vector<Chunk> chunks_v;
  for (int64_t i = 0; i < plan->count; ++i) chunks_v.push_back(plan->At(i));
  auto* chunks = &chunks_v;
  EXPECT_GE(chunks->size(), 6u);
  EXPECT_FALSE(chunks->front().lo.has_value());
  EXPECT_FALSE(chunks->back().hi.has_value());
  std::set<int64_t> seen;
  size_t batches = 0;
  for (const auto& c : *chunks) {
    auto schema = std::make_shared<const Schema>((*streams)[0].ToSchema());
    Status s = src->ReadChunk((*streams)[0], c, schema, 100, [&](Batch& b) {
      ++batches;
      EXPECT_LE(b.num_rows(), 100u);
      for (size_t i = 0; i < b.num_rows(); ++i) {
        EXPECT_TRUE(seen.insert(b.column(0).values<int64_t>()[i]).second);
      }
      return true;
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  ASSERT_TRUE(src->EndSnapshot().ok());
  EXPECT_EQ(seen.size(), 1050u);
  EXPECT_GT(batches, chunks->size());
  // Same contents, same plan: chunk ids are deterministic.
  auto again = src->PlanChunks((*streams)[0], 500);
  ASSERT_EQ(again->count, plan->count);
  for (int64_t i = 0; i < plan->count; ++i) {
    EXPECT_EQ(again->At(i).Id("t"), plan->At(i).Id("t"));
  }
}

// Keys as users have them: snowflake-like random 63-bit ids, dense ids with far outliers at both
// ends of int64, a table after deleting 99% of its rows. The plan holds about chunk_rows rows a
// chunk (at most twice the chunks the rows need) and reads every row exactly once.
TEST_F(SqliteSourceTest, SparseAndSkewedKeysChunkByRows) {
  ASSERT_TRUE(db_->Exec(R"(
    CREATE TABLE snow (id INTEGER PRIMARY KEY, v TEXT);
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
      INSERT OR IGNORE INTO snow SELECT random(), 's' FROM n;
    CREATE TABLE outliers (id INTEGER PRIMARY KEY, v TEXT);
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
      INSERT INTO outliers SELECT i, 'o' FROM n;
    INSERT INTO outliers VALUES (-9223372036854775808, 'min'), (-1, 'minus one'),
      (4611686018427387904, 'two to the 62'), (9223372036854775807, 'max');
    CREATE TABLE deleted (id INTEGER PRIMARY KEY, v TEXT);
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
      INSERT INTO deleted SELECT i, 'd' FROM n;
    DELETE FROM deleted WHERE id % 100 != 0;
  )")
                  .ok());
  auto src = Open();
  auto streams = src->Discover();
  ASSERT_TRUE(streams.ok());
  ASSERT_TRUE(src->BeginSnapshot().ok());
  constexpr int64_t kChunkRows = 1000;
  for (const StreamInfo& info : *streams) {
    SCOPED_TRACE(info.name);
    auto plan = src->PlanChunks(info, kChunkRows);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    auto schema = std::make_shared<const Schema>(info.ToSchema());
    std::set<int64_t> seen;
    size_t largest = 0;
    for (int64_t i = 0; i < plan->count; ++i) {
      size_t rows = 0;
      ASSERT_TRUE(src->ReadChunk(info, plan->At(i), schema, 512,
                                 [&](Batch& b) {
                                   rows += b.num_rows();
                                   for (size_t r = 0; r < b.num_rows(); ++r) {
                                     EXPECT_TRUE(
                                         seen.insert(b.column(0).ValueAt<int64_t>(r)).second);
                                   }
                                   return true;
                                 })
                      .ok());
      largest = std::max(largest, rows);
    }
    const auto total = static_cast<int64_t>(seen.size());
    EXPECT_EQ(plan->rows, total);
    EXPECT_LE(plan->count, 2 * (total / kChunkRows + 1)) << "rows " << total;
    EXPECT_GE(plan->count, total / kChunkRows);
    EXPECT_LE(largest, static_cast<size_t>(2 * kChunkRows));
  }
  ASSERT_TRUE(src->EndSnapshot().ok());
}

// A WITHOUT ROWID table keyed by text, real and blob columns (few distinct leading values, as a
// tenant column has them) loads in ranges of its key: about chunk_rows rows a chunk, every row
// once, the same plan from the same rows.
TEST_F(SqliteSourceTest, WithoutRowidKeysOfOtherTypesChunkByRowValues) {
  ASSERT_TRUE(db_->Exec(R"(
    CREATE TABLE wr (t TEXT, r REAL, bl BLOB, v INTEGER NOT NULL, PRIMARY KEY (t, r, bl))
      WITHOUT ROWID;
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
      INSERT INTO wr SELECT CASE WHEN i < 2500 THEN 'ü' ELSE 'O''Brien ' || (i % 3) END,
                            (i % 50) * 0.1, CAST(printf('%05d', i) AS BLOB), i FROM n;
    CREATE TABLE small (k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO small VALUES ('a', 1), ('b', 2);
  )")
                  .ok());
  auto src = Open();
  auto streams = src->Discover();
  ASSERT_TRUE(streams.ok()) << streams.status().ToString();
  ASSERT_TRUE(src->BeginSnapshot().ok());
  constexpr int64_t kChunkRows = 200;
  for (const StreamInfo& info : *streams) {
    SCOPED_TRACE(info.name);
    auto plan = src->PlanChunks(info, kChunkRows);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->key, info.name == "wr" ? R"(["t","r","bl"])" : R"(["k"])");
    auto schema = std::make_shared<const Schema>(info.ToSchema());
    std::set<int64_t> seen;
    size_t largest = 0;
    for (int64_t i = 0; i < plan->count; ++i) {
      size_t rows = 0;
      Status s = src->ReadChunk(info, plan->At(i), schema, 64, [&](Batch& b) {
        rows += b.num_rows();
        const size_t v = info.columns.size() - 1;
        for (size_t r = 0; r < b.num_rows(); ++r) {
          EXPECT_TRUE(seen.insert(b.column(v).ValueAt<int64_t>(r)).second);
        }
        return true;
      });
      ASSERT_TRUE(s.ok()) << s.ToString();
      largest = std::max(largest, rows);
    }
    const auto total = static_cast<int64_t>(seen.size());
    EXPECT_EQ(total, info.name == "wr" ? 3000 : 2);
    EXPECT_EQ(plan->rows, total);
    EXPECT_LE(plan->count, 2 * (total / kChunkRows + 1));
    EXPECT_GE(plan->count, total / kChunkRows);
    EXPECT_LE(largest, static_cast<size_t>(kChunkRows));
    auto again = src->PlanChunks(info, kChunkRows);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->key_bounds, plan->key_bounds);
  }
  // A damaged boundary is refused, not read as another range.
  Chunk bad;
  bad.key = R"(["t","r","bl"])";
  bad.lo_key = nlohmann::json{"tü", "x0.5", "b00"};
  auto schema = std::make_shared<const Schema>((*streams)[1].ToSchema());
  ASSERT_EQ((*streams)[1].name, "wr");
  Status s = src->ReadChunk((*streams)[1], bad, schema, 64, [](Batch&) { return true; });
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  ASSERT_TRUE(src->EndSnapshot().ok());
}

TEST_F(SqliteSourceTest, ABadValueNamesTableColumnRowAndFix) {
  ASSERT_TRUE(db_->Exec("CREATE TABLE t (a INTEGER, d DATETIME); INSERT INTO t VALUES (1, "
                        "'2024-01-01 00:00:00'), (2, 1700000000)")
                  .ok());
  auto src = Open();
  auto streams = src->Discover();
  Status s = src->ReadChunk((*streams)[0], Chunk{},
                            std::make_shared<const Schema>((*streams)[0].ToSchema()), 100,
                            [](Batch&) { return true; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("table t, column d, rowid 2"), std::string::npos) << s.message();
}

TEST_F(SqliteSourceTest, MissingOrInvalidDatabaseFileIsExplained) {
  config::SourceConfig cfg;
  cfg.type = "sqlite";
  cfg.options = config::Options("source", dir_.string());
  cfg.options.Set("path", "nope.db", 1);
  auto s = OpenSource(cfg);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("check source.path"), std::string::npos);

  std::filesystem::path junk = dir_ / "junk.db";
  FILE* f = std::fopen(junk.c_str(), "w");
  std::fputs("this is not a database, just some text that is long enough to have a header......",
             f);
  std::fclose(f);
  cfg.options = config::Options("source", dir_.string());
  cfg.options.Set("path", "junk.db", 1);
  auto j = OpenSource(cfg);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("not a database"), std::string::npos) << j.status().message();
}

}  // namespace
}  // namespace ferry::source
