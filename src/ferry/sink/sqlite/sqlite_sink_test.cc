#include "ferry/sink/sqlite/sqlite_sink.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/clients/sqlite/sqlite.h"
#include "ferry/sink/sink_testing.h"
#include "ferry/types/value_parse.h"

namespace ferry::sink {
namespace {

using ferry::sqlite::Database;

using testing::F;
using testing::Rows;

Schema MakeSchema(std::vector<Field> fields, std::vector<int32_t> keys) {
  Schema s;
  s.fields = std::move(fields);
  s.identifier_field_ids = std::move(keys);
  return s;
}

// (id long key, name string)
Schema KeyedSchema() {
  return MakeSchema({F(1, "id", DataType::Int64(), true), F(2, "name", DataType::String())}, {1});
}

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// An exact, printable form of a value: equal forms mean equal values (NaNs alike, -0.0 apart).
std::string Show(const Column& c, size_t r) {
  if (!c.IsValid(r)) return "NULL";
  char buf[64];
  switch (c.type().kind()) {
    case TypeKind::kBoolean:
      return c.values<uint8_t>()[r] ? "true" : "false";
    case TypeKind::kInt32:
    case TypeKind::kDate:
      return std::to_string(c.values<int32_t>()[r]);
    case TypeKind::kInt64:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return std::to_string(c.values<int64_t>()[r]);
    case TypeKind::kFloat32: {
      float f = c.values<float>()[r];
      if (std::isnan(f)) return "NaN";
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      std::snprintf(buf, sizeof buf, "f%08x", bits);
      return buf;
    }
    case TypeKind::kFloat64: {
      double d = c.values<double>()[r];
      if (std::isnan(d)) return "NaN";
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      std::snprintf(buf, sizeof buf, "d%016llx", static_cast<unsigned long long>(bits));
      return buf;
    }
    case TypeKind::kDecimal: {
      int128_t v;
      std::memcpy(&v, c.fixed_data() + r * 16, 16);
      return FormatDecimal(v, c.type().scale());
    }
    case TypeKind::kString:
    case TypeKind::kBinary:
      return "x" + Hex(c.GetBytes(r));
    case TypeKind::kUuid:
      return "u" +
             Hex(std::string_view(reinterpret_cast<const char*>(c.fixed_data()) + r * 16, 16));
    case TypeKind::kList: {
      auto [first, end] = c.ListRange(r);
      std::string out = "[";
      for (size_t i = first; i < end; ++i) out += (i > first ? "," : "") + Show(c.list_child(), i);
      return out + "]";
    }
  }
  return "?";
}

std::vector<std::string> ShowRows(const Batch& b) {
  std::vector<std::string> out;
  for (size_t r = 0; r < b.num_rows(); ++r) {
    std::string row;
    for (size_t c = 0; c < b.num_columns(); ++c) row += (c ? "|" : "") + Show(b.column(c), r);
    out.push_back(row);
  }
  return out;
}

const MarkerCheck kNeverLanded = [](const Json&) { return false; };

class SqliteSinkTest : public ::testing::Test {
 protected:
  std::unique_ptr<Sink> Open(const std::string& pipeline = "p") {
    config::DestinationConfig cfg;
    cfg.type = "sqlite";
    cfg.options = config::Options("destination", tmp_.path().string());
    cfg.options.Set("path", "out/dest.db", 3);
    auto s = OpenSqliteSink(cfg, pipeline);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  std::unique_ptr<SinkStream> OpenStream(Sink& sink, const std::string& stream,
                                         const Schema& schema, bool replacing = false) {
    auto s = sink.OpenStream(stream, schema, replacing);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // An independent connection, as any SQLite user would open.
  std::unique_ptr<Database> Raw() {
    auto db = Database::Open(path_, Database::Mode::kReadWrite);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return std::move(*db);
  }
  // Every row of `sql`'s result, columns joined by '|' as SQLite's quote() shows them, sorted.
  std::vector<std::string> Query(const std::string& sql) {
    auto db = Raw();
    auto st = db->Prepare(sql);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) return {};
    std::vector<std::string> out;
    for (;;) {
      auto row = st->Step();
      EXPECT_TRUE(row.ok()) << row.status().ToString();
      if (!row.ok() || !*row) break;
      std::string line;
      for (int i = 0; i < st->ColumnCount(); ++i) {
        line += (i ? "|" : "") + (st->IsNull(i) ? std::string("NULL") : std::string(st->Text(i)));
      }
      out.push_back(line);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // The rows OpenReader reads, sorted.
  std::vector<std::string> ReadAll(Sink& sink, const std::string& stream,
                                   std::vector<size_t>* batch_sizes = nullptr) {
    auto reader = sink.OpenReader(stream);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok() || !*reader) return {"(no table)"};
    std::vector<std::string> out;
    Status s = (*reader)->Read([&](const Batch& b) {
      for (auto& r : ShowRows(b)) out.push_back(std::move(r));
      if (batch_sizes) batch_sizes->push_back(b.num_rows());
      return Status::OK();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::sort(out.begin(), out.end());
    return out;
  }

  ferry::testing::TempDir tmp_;
  const std::string path_ = tmp_.File("out/dest.db");
};

std::string Name(const std::string& s) { return "x" + Hex(s); }

TEST_F(SqliteSinkTest, LoadOfTwoChunksIsInvisibleUntilPublishThenReplacesTheRows) {
  auto sink = Open();
  const Schema schema = KeyedSchema();
  auto first = OpenStream(*sink, "orders", schema);
  ASSERT_TRUE(first->WriteUpserts(Rows(first->schema(), {{1, "a"}, {2, "b"}, {3, "c"}})).ok());
  ASSERT_TRUE(first->Commit("", Json{{"n", 1}}, {}, kNeverLanded).ok());
  auto db = Raw();
  ASSERT_TRUE(db->Exec("CREATE INDEX orders_by_name ON orders(name);"
                       "CREATE VIEW named AS SELECT name FROM orders")
                  .ok());

  // An abandoned load of an earlier run: its table goes when a later run is published.
  {
    auto old = OpenStream(*sink, "orders", schema, true);
    ASSERT_TRUE(old->Write(Rows(old->schema(), {{99, "stale"}})).ok());
    ASSERT_TRUE(old->Commit("run-0", Json{{"chunk", 0}}, {}, kNeverLanded).ok());
  }
  auto load = OpenStream(*sink, "orders", schema, true);
  EXPECT_EQ(load->Marker(), (Json{{"chunk", 0}}));
  ASSERT_TRUE(load->Write(Rows(load->schema(), {{10, "x"}, {11, "y"}})).ok());
  EXPECT_EQ(load->pending_rows(), 2u);
  auto r = load->Commit("run-1", Json{{"chunk", 1}}, {}, kNeverLanded);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->already_landed);
  EXPECT_FALSE(load->HasPending());
  EXPECT_EQ(*sink->ReadMarker("orders"), (Json{{"chunk", 1}}));
  EXPECT_EQ(Query("SELECT id, name FROM orders"),
            (std::vector<std::string>{"1|a", "2|b", "3|c"}));  // not published yet
  EXPECT_EQ(Query("SELECT count(*) FROM sqlite_schema WHERE name GLOB 'ferry_load_*'"),
            std::vector<std::string>{"2"});
  ASSERT_TRUE(load->Write(Rows(load->schema(), {{12, "z"}})).ok());
  ASSERT_TRUE(load->Commit("run-1", Json{{"chunk", 2}}, {}, kNeverLanded).ok());
  auto p = load->Publish("run-1", Json{{"done", true}}, kNeverLanded);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->already_landed);
  EXPECT_EQ(load->totals().rows, 3u);

  EXPECT_EQ(Query("SELECT id, name FROM orders"),
            (std::vector<std::string>{"10|x", "11|y", "12|z"}));
  EXPECT_EQ(ReadAll(*sink, "orders"),
            (std::vector<std::string>{"10|" + Name("x"), "11|" + Name("y"), "12|" + Name("z")}));
  EXPECT_EQ(Query("SELECT count(*) FROM sqlite_schema WHERE name GLOB 'ferry_load_*'"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(Query("SELECT count(*) FROM ferry_loads"), std::vector<std::string>{"0"});
  EXPECT_EQ(*sink->ReadMarker("orders"), (Json{{"done", true}}));
  // The user's index is kept, the view sees the new rows.
  EXPECT_EQ(Query("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'orders' "
                  "AND sql IS NOT NULL"),
            std::vector<std::string>{"orders_by_name"});
  EXPECT_EQ(Query("SELECT name FROM named"), (std::vector<std::string>{"x", "y", "z"}));
  // The published table keeps its key: upserts work.
  auto after = OpenStream(*sink, "orders", schema);
  ASSERT_TRUE(after->WriteUpserts(Rows(after->schema(), {{10, "x2"}})).ok());
  ASSERT_TRUE(after->Commit("", Json{{"n", 2}}, {}, kNeverLanded).ok());
  EXPECT_EQ(Query("SELECT id, name FROM orders"),
            (std::vector<std::string>{"10|x2", "11|y", "12|z"}));
}

TEST_F(SqliteSinkTest, StartLoadDropsOlderRunsAndAResumedLoadKeepsItsChunks) {
  auto sink = Open();
  const Schema schema = KeyedSchema();
  {
    auto old = OpenStream(*sink, "t", schema, true);
    ASSERT_TRUE(old->StartLoad("run-0").ok());
    ASSERT_TRUE(old->Write(Rows(old->schema(), {{99, "stale"}})).ok());
    ASSERT_TRUE(old->Commit("run-0", Json(0), {}, kNeverLanded).ok());
  }
  const std::string glob = "SELECT count(*) FROM sqlite_schema WHERE name GLOB 'ferry_load_*'";
  {
    auto load = OpenStream(*sink, "t", schema, true);
    ASSERT_TRUE(load->StartLoad("run-1").ok());
    EXPECT_EQ(Query(glob), std::vector<std::string>{"1"});  // run-0's table is gone
    EXPECT_EQ(Query("SELECT run FROM ferry_loads"), std::vector<std::string>{"run-1"});
    ASSERT_TRUE(load->Write(Rows(load->schema(), {{1, "a"}})).ok());
    ASSERT_TRUE(load->Commit("run-1", Json(1), {}, kNeverLanded).ok());
    // A chunk written but not committed (the process stops here).
    ASSERT_TRUE(load->Write(Rows(load->schema(), {{2, "lost"}})).ok());
  }
  auto resumed = OpenStream(*sink, "t", schema, true);
  EXPECT_EQ(resumed->Marker(), Json(1));
  ASSERT_TRUE(resumed->StartLoad("run-1").ok());
  ASSERT_TRUE(resumed->Write(Rows(resumed->schema(), {{2, "b"}})).ok());
  ASSERT_TRUE(resumed->Commit("run-1", Json(2), {}, kNeverLanded).ok());
  ASSERT_TRUE(resumed->Publish("run-1", Json(3), kNeverLanded).ok());
  EXPECT_EQ(Query("SELECT id, name FROM t"), (std::vector<std::string>{"1|a", "2|b"}));
  EXPECT_EQ(Query(glob), std::vector<std::string>{"0"});

  // A resumed load whose source columns changed is refused: its committed chunks would not fit.
  auto next = OpenStream(*sink, "t", schema, true);
  ASSERT_TRUE(next->StartLoad("run-2").ok());
  const Schema wider =
      MakeSchema({F(1, "id", DataType::Int64(), true), F(2, "name", DataType::String()),
                  F(3, "extra", DataType::Int64())},
                 {1});
  auto changed = OpenStream(*sink, "t", wider, true);
  Status st = changed->StartLoad("run-2");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("full refresh"), std::string::npos) << st.message();
}

TEST_F(SqliteSinkTest, AnEmptyLoadPublishesAnEmptyTableWithTheNewColumns) {
  auto sink = Open();
  auto s = OpenStream(*sink, "t", KeyedSchema());
  ASSERT_TRUE(s->WriteUpserts(Rows(s->schema(), {{1, "a"}})).ok());
  ASSERT_TRUE(s->Commit("", Json(1), {}, kNeverLanded).ok());
  const Schema other = MakeSchema({F(1, "k", DataType::String(), true)}, {1});
  auto load = OpenStream(*sink, "t", other, true);
  ASSERT_TRUE(load->Publish("run", Json(2), kNeverLanded).ok());
  EXPECT_EQ(Query("SELECT count(*) FROM t"), std::vector<std::string>{"0"});
  EXPECT_EQ(Query("SELECT name, type FROM pragma_table_info('t')"),
            std::vector<std::string>{"k|TEXT"});
  auto reader = sink->OpenReader("t");
  ASSERT_TRUE(reader.ok() && *reader);
  EXPECT_TRUE((*reader)->schema()->SameStructure(other));
}

TEST_F(SqliteSinkTest, ACommitThatAlreadyLandedWritesNothing) {
  auto sink = Open();
  auto s = OpenStream(*sink, "t", KeyedSchema());
  ASSERT_TRUE(s->WriteUpserts(Rows(s->schema(), {{1, "a"}})).ok());
  ASSERT_TRUE(s->Commit("", Json{{"pos", 5}}, {}, kNeverLanded).ok());

  Json seen;
  auto landed = [&](const Json& m) {
    seen = m;
    return m.value("pos", 0) >= 5;
  };
  ASSERT_TRUE(s->WriteUpserts(Rows(s->schema(), {{1, "changed"}, {2, "b"}})).ok());
  ASSERT_TRUE(s->WriteDeleteKeys(Rows(s->schema(), {{1, "NULL"}})).ok());
  auto r = s->Commit("", Json{{"pos", 5}}, {}, landed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->already_landed);
  EXPECT_EQ(seen, (Json{{"pos", 5}}));
  EXPECT_FALSE(s->HasPending());
  EXPECT_EQ(s->totals().rows, 1u);
  EXPECT_EQ(Query("SELECT id, name FROM t"), std::vector<std::string>{"1|a"});

  // A load commit and a publish alike.
  auto load = OpenStream(*sink, "t", KeyedSchema(), true);
  ASSERT_TRUE(load->Write(Rows(load->schema(), {{7, "x"}})).ok());
  auto lr = load->Commit("run", Json{{"pos", 5}}, {}, landed);
  ASSERT_TRUE(lr.ok() && lr->already_landed);
  auto pr = load->Publish("run", Json{{"pos", 5}}, landed);
  ASSERT_TRUE(pr.ok() && pr->already_landed);
  EXPECT_EQ(Query("SELECT id, name FROM t"), std::vector<std::string>{"1|a"});
  EXPECT_EQ(Query("SELECT count(*) FROM sqlite_schema WHERE name GLOB 'ferry_load_*'"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(Query("SELECT marker FROM ferry_state"), std::vector<std::string>{"{\"pos\":5}"});
}

TEST_F(SqliteSinkTest, UpsertsAndDeletesByKeyAndAReplayChangesNothing) {
  auto sink = Open();
  // A composite key of a string and an int.
  const Schema schema =
      MakeSchema({F(1, "region", DataType::String(), true), F(2, "id", DataType::Int32(), true),
                  F(3, "qty", DataType::Int64())},
                 {1, 2});
  auto batch = [&](const std::shared_ptr<const Schema>& s,
                   const std::vector<std::tuple<std::string, int32_t, int64_t>>& rows) {
    Batch b(s);
    for (const auto& [region, id, qty] : rows) {
      b.column(0).AppendBytes(region);
      b.column(1).AppendInt32(id);
      b.column(2).AppendInt64(qty);
    }
    return b;
  };
  {
    auto s = OpenStream(*sink, "stock", schema);
    ASSERT_TRUE(
        s->WriteUpserts(batch(s->schema(), {{"eu", 1, 10}, {"eu", 2, 20}, {"us", 1, 30}})).ok());
    ASSERT_TRUE(s->Commit("", Json(1), {}, kNeverLanded).ok());
  }
  for (int replay = 0; replay < 2; ++replay) {
    auto s = OpenStream(*sink, "stock", schema);
    ASSERT_TRUE(s->WriteUpserts(batch(s->schema(), {{"eu", 2, 21}, {"us", 2, 40}})).ok());
    ASSERT_TRUE(s->WriteDeleteKeys(batch(s->schema(), {{"eu", 1, 0}, {"xx", 9, 0}})).ok());
    EXPECT_EQ(s->pending_rows(), 2u);
    auto r = s->Commit("", Json(2), {}, kNeverLanded);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Query("SELECT region, id, qty FROM stock"),
              (std::vector<std::string>{"eu|2|21", "us|1|30", "us|2|40"}))
        << "replay " << replay;
  }
  EXPECT_EQ(*sink->ReadMarker("stock"), Json(2));
  // A marker alone is a cheap commit.
  {
    auto s = OpenStream(*sink, "stock", schema);
    EXPECT_TRUE(s->CheapMarkerCommits());
    ASSERT_FALSE(s->HasPending());
    ASSERT_TRUE(s->Commit("", Json(2.5), {}, kNeverLanded).ok());
    EXPECT_EQ(*sink->ReadMarker("stock"), Json(2.5));
  }

  // DiscardPending drops what was staged.
  auto s = OpenStream(*sink, "stock", schema);
  ASSERT_TRUE(s->WriteUpserts(batch(s->schema(), {{"zz", 1, 1}})).ok());
  ASSERT_TRUE(s->WriteDeleteKeys(batch(s->schema(), {{"us", 1, 0}})).ok());
  s->DiscardPending();
  EXPECT_FALSE(s->HasPending());
  ASSERT_TRUE(s->Commit("", Json(3), {}, kNeverLanded).ok());
  EXPECT_EQ(Query("SELECT region, id, qty FROM stock"),
            (std::vector<std::string>{"eu|2|21", "us|1|30", "us|2|40"}));

  // A table without a key takes appends only.
  const Schema keyless =
      MakeSchema({F(1, "id", DataType::Int64()), F(2, "name", DataType::String())}, {});
  auto log = OpenStream(*sink, "log", keyless);
  Status up = log->WriteUpserts(Rows(log->schema(), {{1, "a"}}));
  EXPECT_EQ(up.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(up.message().find("primary_key"), std::string::npos) << up.message();
  EXPECT_EQ(log->WriteDeleteKeys(Rows(log->schema(), {{1, "a"}})).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(log->Write(Rows(log->schema(), {{1, "a"}, {1, "a"}})).ok());
  ASSERT_TRUE(log->Commit("", Json(1), {}, kNeverLanded).ok());
  EXPECT_EQ(Query("SELECT id, name FROM log"), (std::vector<std::string>{"1|a", "1|a"}));
}

TEST_F(SqliteSinkTest, EveryTypeRoundTripsExactly) {
  auto sink = Open();
  const Schema schema =
      MakeSchema({F(1, "id", DataType::Int64(), true),
                  F(2, "b", DataType::Boolean()),
                  F(3, "i", DataType::Int32()),
                  F(4, "l", DataType::Int64()),
                  F(5, "f", DataType::Float32()),
                  F(6, "d", DataType::Float64()),
                  F(7, "dec38", DataType::Decimal(38, 0)),
                  F(8, "dec", DataType::Decimal(10, 4)),
                  F(9, "day", DataType::Date()),
                  F(10, "t", DataType::Time()),
                  F(11, "ts", DataType::Timestamp()),
                  F(12, "tstz", DataType::TimestampTz()),
                  F(13, "s", DataType::String()),
                  F(14, "bin", DataType::Binary()),
                  F(15, "u", DataType::Uuid()),
                  F(16, "longs", DataType::List(DataType::Int64(), false, 100)),
                  F(17, "doubles", DataType::List(DataType::Float64(), false, 101)),
                  F(18, "strings", DataType::List(DataType::String(), false, 102)),
                  F(19, "decs", DataType::List(DataType::Decimal(5, 2), false, 103)),
                  F(20, "blobs", DataType::List(DataType::Binary(), false, 104)),
                  F(21, "days", DataType::List(DataType::Date(), false, 105))},
                 {1});
  auto stream = OpenStream(*sink, "all types", schema);
  Batch b(stream->schema());
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int128_t max38 = Pow10(38) - 1;
  const double doubles[] = {nan,
                            inf,
                            -inf,
                            -0.0,
                            0.0,
                            1.5,
                            std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::denorm_min(),
                            1e18,
                            -123456789.125};
  const float floats[] = {std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          -0.0f,
                          0.0f,
                          0.1f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          -1.0f,
                          3.25f};
  const int32_t days[] = {*ParseDate("2024-02-29"),
                          *ParseDate("0000-01-01") - 1,
                          *ParseDate("9999-12-31") + 1,
                          std::numeric_limits<int32_t>::min(),
                          std::numeric_limits<int32_t>::max(),
                          0,
                          -1,
                          -719162,
                          2932896,
                          19000};
  const int64_t stamps[] = {std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(),
                            -1,
                            0,
                            253402300800000000,
                            -62167219200000001,
                            1717200000000001,
                            86399999999,
                            -86400000000,
                            42};
  const std::string texts[] = {"",
                               std::string("nul\0inside", 10),
                               "ünïcödé ✓ 日本",
                               "'quoted\"",
                               "NaN",
                               "-0.0",
                               "12.30",
                               "null",
                               "[1,2]",
                               "x"};
  const int n = 10;
  for (int r = 0; r < n; ++r) {
    b.column(0).AppendInt64(r);
    b.column(1).AppendBool(r % 2 == 0);
    b.column(2).AppendInt32(r == 0   ? std::numeric_limits<int32_t>::min()
                            : r == 1 ? std::numeric_limits<int32_t>::max()
                                     : r);
    b.column(3).AppendInt64(r == 0   ? std::numeric_limits<int64_t>::min()
                            : r == 1 ? std::numeric_limits<int64_t>::max()
                                     : -r);
    b.column(4).AppendFloat(floats[r]);
    b.column(5).AppendDouble(doubles[r]);
    b.column(6).AppendDecimal(r == 0 ? max38 : r == 1 ? -max38 : r - 5);
    b.column(7).AppendDecimal(r == 0 ? 123000 : r == 1 ? -1 : int128_t{9999999999} - r);
    b.column(8).AppendInt32(days[r]);
    b.column(9).AppendInt64(r == 0 ? 0 : r == 1 ? 86399999999 : r * 3600000001LL);
    b.column(10).AppendInt64(stamps[r]);
    b.column(11).AppendInt64(stamps[n - 1 - r]);
    b.column(12).AppendBytes(texts[r]);
    b.column(13).AppendBytes(r == 0 ? std::string() : std::string("\0\xff\x01", 3) + texts[r]);
    uint8_t u[16];
    for (int k = 0; k < 16; ++k) u[k] = static_cast<uint8_t>(r * 31 + k * 17);
    b.column(14).AppendUuid(u);
    // Lists: row 0 empty, row 1 NULL, others with elements incl. a NULL element.
    Column* lists[] = {&b.column(15), &b.column(16), &b.column(17),
                       &b.column(18), &b.column(19), &b.column(20)};
    if (r == 1) {
      for (Column* c : lists) c->AppendNull();
    } else {
      if (r != 0) {
        lists[0]->list_child().AppendInt64(std::numeric_limits<int64_t>::min());
        lists[0]->list_child().AppendNull();
        lists[0]->list_child().AppendInt64(std::numeric_limits<int64_t>::max());
        for (double d : doubles) lists[1]->list_child().AppendDouble(d);
        lists[1]->list_child().AppendNull();
        lists[2]->list_child().AppendBytes(texts[r]);
        lists[2]->list_child().AppendNull();
        lists[2]->list_child().AppendBytes(std::string("\0", 1));
        lists[3]->list_child().AppendDecimal(-99999);
        lists[3]->list_child().AppendDecimal(r);
        lists[3]->list_child().AppendNull();
        lists[4]->list_child().AppendBytes(std::string("\xff\x00\x80", 3).substr(0, r % 4));
        lists[4]->list_child().AppendBytes("");
        lists[5]->list_child().AppendInt32(days[r]);
      }
      for (Column* c : lists) c->AppendListEnd();
    }
  }
  // A row of NULLs.
  b.column(0).AppendInt64(100);
  for (size_t c = 1; c < b.num_columns(); ++c) b.column(c).AppendNull();
  ASSERT_TRUE(stream->WriteUpserts(b).ok());
  auto r = stream->Commit("", Json(1), {}, kNeverLanded);
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  std::vector<std::string> expected = ShowRows(b);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ReadAll(*sink, "all types"), expected);
  auto reader = sink->OpenReader("all types");
  ASSERT_TRUE(reader.ok() && *reader);
  ASSERT_EQ((*reader)->schema()->fields.size(), schema.fields.size());
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    EXPECT_EQ((*reader)->schema()->fields[i].type.ToIceberg(), schema.fields[i].type.ToIceberg());
  }
  EXPECT_EQ((*reader)->schema()->identifier_field_ids, std::vector<int32_t>{1});

  // The stored forms, as SQLite users see them.
  EXPECT_EQ(Query("SELECT typeof(dec38), dec38 FROM \"all types\" WHERE id = 0"),
            std::vector<std::string>{"text|99999999999999999999999999999999999999"});
  EXPECT_EQ(Query("SELECT dec38 FROM \"all types\" WHERE id = 1"),
            std::vector<std::string>{"-99999999999999999999999999999999999999"});
  EXPECT_EQ(Query("SELECT dec, day, t FROM \"all types\" WHERE id = 0"),
            std::vector<std::string>{"12.3000|2024-02-29|00:00:00.000000"});
  EXPECT_EQ(Query("SELECT day FROM \"all types\" WHERE id IN (1, 2)"),
            (std::vector<std::string>{"+10000-01-01", "-0001-12-31"}));
  EXPECT_EQ(Query("SELECT typeof(d), d FROM \"all types\" WHERE id = 0"),
            std::vector<std::string>{"text|NaN"});
  EXPECT_EQ(Query("SELECT typeof(d) FROM \"all types\" WHERE id = 1"),
            std::vector<std::string>{"real"});
  // -0.0 keeps its sign as the blob '-0.0': a REAL column would store it as 0.
  EXPECT_EQ(Query("SELECT typeof(d), quote(d), typeof(f) FROM \"all types\" WHERE id = 3"),
            std::vector<std::string>{"blob|X'2D302E30'|blob"});
  EXPECT_EQ(Query("SELECT ts, tstz, date(tstz) FROM \"all types\" WHERE id = 6"),
            std::vector<std::string>{"2024-06-01 00:00:00.000001|1970-01-01 00:00:00.000000+00:00|"
                                     "1970-01-01"});
  EXPECT_EQ(Query("SELECT u FROM \"all types\" WHERE id = 1"),
            std::vector<std::string>{"1f304152-6374-8596-a7b8-c9daebfc0d1e"});
  EXPECT_EQ(Query("SELECT length(CAST(s AS BLOB)) FROM \"all types\" WHERE id = 1"),
            std::vector<std::string>{"10"});
  EXPECT_EQ(Query("SELECT longs, decs FROM \"all types\" WHERE id = 0"),
            std::vector<std::string>{"[]|[]"});
  EXPECT_EQ(Query("SELECT longs, decs, json_array_length(doubles) FROM \"all types\" WHERE id = 2"),
            std::vector<std::string>{
                "[-9223372036854775808,null,9223372036854775807]|[\"-999.99\",\"0.02\",null]|11"});
  EXPECT_EQ(
      Query("SELECT name, type, \"notnull\", pk FROM pragma_table_info('all types') WHERE "
            "name IN ('id', 'b', 'f', 'dec38', 'tstz', 'bin', 'longs')"),
      (std::vector<std::string>{"bin|BLOB|0|0", "b|INTEGER|0|0", "dec38|TEXT|0|0", "f|REAL|0|0",
                                "id|INTEGER|1|1", "longs|TEXT|0|0", "tstz|TEXT|0|0"}));
}

TEST_F(SqliteSinkTest, ReadsInBoundedBatches) {
  auto sink = Open();
  auto s = OpenStream(*sink, "big", KeyedSchema());
  Batch b(s->schema());
  for (int64_t i = 0; i < 20000; ++i) {
    b.column(0).AppendInt64(i);
    b.column(1).AppendBytes("row");
  }
  ASSERT_TRUE(s->Write(b).ok());
  ASSERT_TRUE(s->Commit("", Json(1), {}, kNeverLanded).ok());
  std::vector<size_t> sizes;
  EXPECT_EQ(ReadAll(*sink, "big", &sizes).size(), 20000u);
  ASSERT_GE(sizes.size(), 3u);
  for (size_t n : sizes) EXPECT_LE(n, 8192u);
  EXPECT_EQ(s->totals().rows, 20000u);
  EXPECT_EQ(s->totals().files, 0u);
}

TEST_F(SqliteSinkTest, OddIdentifiersAreQuotedEverywhere) {
  auto sink = Open();
  for (const std::string table :
       {"Odd \"name\" ü", "select", "sales.orders", "ferry_rows", "Mixed Case"}) {
    SCOPED_TRACE(table);
    const Schema schema = MakeSchema(
        {F(1, "order", DataType::Int64(), true), F(2, "Select \"x\" ü", DataType::String()),
         F(3, "group by", DataType::Decimal(5, 1)), F(4, "c0", DataType::Int64())},
        {1});
    auto s = OpenStream(*sink, table, schema);
    ASSERT_TRUE(s);
    auto rows = [&](int64_t k, const char* v) {
      Batch b(s->schema());
      b.column(0).AppendInt64(k);
      b.column(1).AppendBytes(v);
      b.column(2).AppendDecimal(k * 10 + 5);
      b.column(3).AppendInt64(-k);
      return b;
    };
    ASSERT_TRUE(s->WriteUpserts(rows(1, "one")).ok());
    ASSERT_TRUE(s->WriteUpserts(rows(2, "two")).ok());
    ASSERT_TRUE(s->Commit("", Json(1), {}, kNeverLanded).ok());
    ASSERT_TRUE(s->WriteUpserts(rows(2, "TWO")).ok());
    ASSERT_TRUE(s->WriteDeleteKeys(rows(1, "")).ok());
    ASSERT_TRUE(s->Commit("", Json(2), {}, kNeverLanded).ok());
    const std::string q = ferry::sqlite::QuoteIdentifier(table);
    EXPECT_EQ(Query("SELECT \"order\", \"Select \"\"x\"\" ü\", \"group by\", c0 FROM " + q),
              std::vector<std::string>{"2|TWO|2.5|-2"});
    EXPECT_EQ(ReadAll(*sink, table), std::vector<std::string>{"2|" + Name("TWO") + "|2.5|-2"});
    EXPECT_EQ(*sink->ReadMarker(table), Json(2));
    EXPECT_EQ(sink->TableName(table), table);
    // A load and publish under the odd name.
    auto load = OpenStream(*sink, table, schema, true);
    Batch b = rows(7, "seven");
    ASSERT_TRUE(load->Write(b).ok());
    ASSERT_TRUE(load->Commit("r", Json(3), {}, kNeverLanded).ok());
    ASSERT_TRUE(load->Publish("r", Json(4), kNeverLanded).ok());
    EXPECT_EQ(Query("SELECT \"order\" FROM " + q), std::vector<std::string>{"7"});
  }
  const Schema clash =
      MakeSchema({F(1, "Id", DataType::Int64()), F(2, "id", DataType::Int64())}, {});
  auto bad = sink->OpenStream("clash", clash, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("letter case"), std::string::npos);
  EXPECT_FALSE(sink->OpenStream("ferry_state", KeyedSchema(), false).ok());
}

TEST_F(SqliteSinkTest, ColumnTypesEvolveByTheOneRuleOfEveryDestination) {
  auto sink = Open();
  ASSERT_TRUE(sink);
  testing::ExpectColumnTypesEvolveByTheRule(*sink, "rule");
}

TEST_F(SqliteSinkTest, SchemaEvolutionAddsAndWidensAndRefusesTheRest) {
  auto sink = Open();
  const Schema v1 =
      MakeSchema({F(1, "id", DataType::Int64(), true), F(2, "qty", DataType::Int32()),
                  F(3, "price", DataType::Decimal(5, 2)), F(4, "name", DataType::String(), true)},
                 {1});
  {
    auto s = OpenStream(*sink, "items", v1);
    Batch b(s->schema());
    b.column(0).AppendInt64(1);
    b.column(1).AppendInt32(5);
    b.column(2).AppendDecimal(12345);
    b.column(3).AppendBytes("one");
    ASSERT_TRUE(s->WriteUpserts(b).ok());
    ASSERT_TRUE(s->Commit("", Json(1), {}, kNeverLanded).ok());
  }
  ASSERT_TRUE(Raw()->Exec("CREATE INDEX items_qty ON items(qty)").ok());
  // qty widened to long, price to decimal(9,2), a column added, the required "name" dropped.
  const Schema v2 =
      MakeSchema({F(1, "id", DataType::Int64(), true), F(2, "qty", DataType::Int64()),
                  F(3, "price", DataType::Decimal(9, 2)), F(4, "note", DataType::String(), true)},
                 {1});
  {
    auto s = OpenStream(*sink, "items", v2);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->Marker(), Json(1));
    Batch b(s->schema());
    b.column(0).AppendInt64(2);
    b.column(1).AppendInt64(int64_t{1} << 40);
    b.column(2).AppendDecimal(123456789);
    b.column(3).AppendBytes("new");
    ASSERT_TRUE(s->WriteUpserts(b).ok());
    auto r = s->Commit("", Json(2), {}, kNeverLanded);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(
      Query("SELECT id, qty, price, name, note FROM items"),
      (std::vector<std::string>{"1|5|123.45|one|NULL", "2|1099511627776|1234567.89|NULL|new"}));
  EXPECT_EQ(Query("SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"),
            std::vector<std::string>{"items_qty"});
  auto reader = sink->OpenReader("items");
  ASSERT_TRUE(reader.ok() && *reader);
  const Schema& rs = *(*reader)->schema();
  ASSERT_EQ(rs.fields.size(), 5u);
  EXPECT_EQ(rs.fields[1].type.ToIceberg(), "long");
  EXPECT_EQ(rs.fields[2].type.ToIceberg(), "decimal(9,2)");
  EXPECT_EQ(rs.fields[3].name, "name");
  EXPECT_FALSE(rs.fields[3].required);
  EXPECT_EQ(rs.fields[4].name, "note");
  EXPECT_FALSE(rs.fields[4].required);
  EXPECT_EQ(ReadAll(*sink, "items").size(), 2u);

  // Narrowing long back to int is refused, naming the column, both types and the fix.
  auto narrowed = sink->OpenStream("items", v1, false);
  ASSERT_FALSE(narrowed.ok());
  EXPECT_EQ(narrowed.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = narrowed.status().message();
  EXPECT_NE(m.find("\"qty\""), std::string::npos) << m;
  EXPECT_NE(m.find("long"), std::string::npos) << m;
  EXPECT_NE(m.find("int "), std::string::npos) << m;
  EXPECT_NE(m.find("full refresh"), std::string::npos) << m;
  // So is a type change and a key change.
  Schema changed = v2;
  changed.fields[3].type = DataType::Int64();
  changed.fields[3].name = "name";
  EXPECT_FALSE(sink->OpenStream("items", changed, false).ok());
  Schema rekeyed = v2;
  rekeyed.identifier_field_ids = {1, 2};
  auto rk = sink->OpenStream("items", rekeyed, false);
  ASSERT_FALSE(rk.ok());
  EXPECT_NE(rk.status().message().find("primary key"), std::string::npos);
  // A stream that replaces its table may change anything.
  EXPECT_TRUE(sink->OpenStream("items", v1, true).ok());
  EXPECT_EQ(Query("SELECT count(*) FROM items"), std::vector<std::string>{"2"});

  // A table with no rows and no marker is simply made again.
  ASSERT_TRUE(OpenStream(*sink, "fresh", v1));
  auto again = sink->OpenStream("fresh", changed, false);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Query("SELECT type FROM pragma_table_info('fresh') WHERE name = 'name'"),
            std::vector<std::string>{"INTEGER"});
}

TEST_F(SqliteSinkTest, AMarkerThatIsNotJsonIsCorruption) {
  auto sink = Open("nightly");
  ASSERT_TRUE(OpenStream(*sink, "t", KeyedSchema()));
  EXPECT_TRUE(sink->ReadMarker("t")->is_null());
  EXPECT_TRUE(sink->ReadMarker("missing")->is_null());
  ASSERT_TRUE(Raw()->Exec("UPDATE ferry_state SET marker = '{oops'").ok());
  auto m = sink->ReadMarker("t");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kCorruption);
  EXPECT_NE(m.status().message().find("\"t\""), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("nightly"), std::string::npos) << m.status().message();
  EXPECT_EQ(sink->OpenStream("t", KeyedSchema(), false).status().code(), StatusCode::kCorruption);

  // Stored values that do not parse back are corruption too, naming table, column and value.
  ASSERT_TRUE(OpenStream(
      *sink, "dated",
      MakeSchema({F(1, "id", DataType::Int64(), true), F(2, "day", DataType::Date())}, {1})));
  ASSERT_TRUE(Raw()->Exec("INSERT INTO dated (id, day) VALUES (1, '2024-01-01'), (2, 'abc')").ok());
  auto reader = sink->OpenReader("dated");
  ASSERT_TRUE(reader.ok() && *reader);
  Status s = (*reader)->Read([](const Batch&) { return Status::OK(); });
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("\"dated\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"day\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'abc'"), std::string::npos) << s.message();
}

TEST_F(SqliteSinkTest, OptionsAreCheckedAndForeignTablesLeftAlone) {
  config::DestinationConfig cfg;
  cfg.type = "sqlite";
  cfg.options = config::Options("destination", tmp_.path().string());
  cfg.options.Set("path", "x.db", 3);
  cfg.options.Set("pathh", "y.db", 4);
  auto s = OpenSqliteSink(cfg, "p");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("pathh"), std::string::npos) << s.status().message();

  config::DestinationConfig none;
  none.type = "sqlite";
  none.options = config::Options("destination", tmp_.path().string());
  auto missing = OpenSqliteSink(none, "p");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("path"), std::string::npos);

  auto sink = Open();
  EXPECT_EQ(sink->Describe(), "SQLite database " + path_);
  EXPECT_NE(sink->Guarantee().find("exactly-once"), std::string::npos);
  ASSERT_TRUE(Raw()->Exec("CREATE TABLE mine (id INTEGER PRIMARY KEY, name TEXT)").ok());
  for (bool replacing : {false, true}) {
    auto st = sink->OpenStream("mine", KeyedSchema(), replacing);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.status().message().find("did not create"), std::string::npos)
        << st.status().message();
  }
  // Another pipeline's table is not this one's either.
  ASSERT_TRUE(OpenStream(*sink, "shared", KeyedSchema()));
  auto other = Open("other");
  auto st = other->OpenStream("shared", KeyedSchema(), false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("'p'"), std::string::npos) << st.status().message();
  auto reader = other->OpenReader("nope");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(*reader, nullptr);
}

// Streams stage without holding the write lock: interleaved batches of two streams on one thread
// (as a shared change log delivers them) and commits from two threads never wait on each other.
TEST_F(SqliteSinkTest, InterleavedStreamsDoNotBlockEachOther) {
  auto sink = Open();
  auto a = OpenStream(*sink, "a", KeyedSchema());
  auto b = OpenStream(*sink, "b", KeyedSchema());
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(a->WriteUpserts(Rows(a->schema(), {{i, "a"}})).ok());
    ASSERT_TRUE(b->WriteUpserts(Rows(b->schema(), {{i, "b"}})).ok());
    ASSERT_TRUE(a->Commit("", Json(i), {}, kNeverLanded).ok());
    ASSERT_TRUE(b->WriteDeleteKeys(Rows(b->schema(), {{i - 1, "NULL"}})).ok());
    ASSERT_TRUE(b->Commit("", Json(i), {}, kNeverLanded).ok());
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (const char* name : {"c", "d", "e"}) {
    threads.emplace_back([&, name] {
      auto s = sink->OpenStream(name, KeyedSchema(), false);
      if (!s.ok()) {
        ++failures;
        return;
      }
      for (int64_t i = 0; i < 30; ++i) {
        if (!(*s)->WriteUpserts(Rows((*s)->schema(), {{i, name}, {i + 1000, name}})).ok() ||
            !(*s)->Commit("", Json(i), {}, kNeverLanded).ok()) {
          ++failures;
        }
        auto m = sink->ReadMarker(name);
        if (!m.ok() || *m != Json(i)) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(Query("SELECT count(*) FROM a"), std::vector<std::string>{"20"});
  EXPECT_EQ(Query("SELECT count(*) FROM b"), std::vector<std::string>{"1"});
  EXPECT_EQ(Query("SELECT count(*) FROM e"), std::vector<std::string>{"60"});
  EXPECT_EQ(Query("PRAGMA journal_mode"), std::vector<std::string>{"wal"});
}

}  // namespace
}  // namespace ferry::sink
