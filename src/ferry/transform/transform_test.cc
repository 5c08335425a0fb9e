#include "ferry/transform/transform.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <set>
#include <string>
#include <vector>

#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::transform {
namespace {

// orders(id long key, status string, amount decimal(10,2), created date, at timestamp, note
// string).
source::StreamInfo Orders() {
  source::StreamInfo t;
  t.ns = "main";
  t.name = "orders";
  auto col = [&](std::string name, DataType type, int pk = 0) {
    source::ColumnInfo c;
    c.name = std::move(name);
    c.type = type;
    c.nullable = pk == 0;
    c.pk_position = pk;
    t.columns.push_back(c);
  };
  col("id", DataType::Int64(), 1);
  col("status", DataType::String());
  col("amount", DataType::Decimal(10, 2));
  col("created", DataType::Date());
  col("at", DataType::Timestamp());
  col("note", DataType::String());
  t.primary_key = {"id"};
  t.cursor_candidates = {"id", "created", "at"};
  return t;
}

struct Row {
  int64_t id;
  const char* status;  // nullptr: NULL
  const char* amount;
  const char* created;
  const char* at;
  const char* note;
};

const std::vector<Row> kRows = {
    {1, "paid", "12.50", "2024-01-01", "2024-01-01 00:00:00", "a"},
    {2, "cancelled", "99.99", "2023-12-31", "2023-12-31 23:59:59.5", "b"},
    {3, "paid", "0.00", "2024-02-29", "2024-02-29 12:00:00", nullptr},
    {4, nullptr, "5.00", "2024-03-01", "2024-03-01 00:00:00.000001", "d"},
    {5, "paid", nullptr, nullptr, nullptr, "e"},
    {6, "Paid", "-3.25", "1969-07-20", "1969-07-20 20:17:40", "f'g"},
    {7, "refunded", "1000000.01", "2024-01-01", "2024-01-01 00:00:01", ""},
};

// The rows in a batch on `schema` (the table's columns, or the chosen ones by name).
Batch Fill(const std::shared_ptr<const Schema>& schema) {
  Batch b(schema);
  for (const auto& r : kRows) {
    for (size_t c = 0; c < schema->fields.size(); ++c) {
      const std::string& name = schema->fields[c].name;
      Column& col = b.column(c);
      const char* v = name == "status"    ? r.status
                      : name == "amount"  ? r.amount
                      : name == "created" ? r.created
                      : name == "at"      ? r.at
                      : name == "note"    ? r.note
                                          : nullptr;
      if (name == "id") {
        col.AppendInt64(r.id);
      } else if (v == nullptr) {
        col.AppendNull();
      } else if (col.type().kind() == TypeKind::kString) {
        col.AppendBytes(v);
      } else {
        EXPECT_TRUE(AppendTextValue(v, &col).ok()) << name << " " << v;
      }
    }
  }
  return b;
}

config::StreamConfig Settings() {
  config::StreamConfig sc;
  sc.name = "orders";
  return sc;
}

std::vector<int64_t> Ids(const Batch& b) {
  std::vector<int64_t> out;
  for (size_t r = 0; r < b.num_rows(); ++r) out.push_back(b.column(0).ValueAt<int64_t>(r));
  return out;
}

// The ids SQLite itself keeps for `filter` over the same rows in a table of its own (values as
// a SQLite database holds them: numbers as numbers, dates and timestamps as text).
std::vector<int64_t> SqliteIds(const std::string& filter) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  sqlite3_exec(db,
               "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, amount NUMERIC, "
               "created TEXT, \"at\" TEXT, note TEXT)",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* ins = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", -1, &ins, nullptr);
  for (const auto& r : kRows) {
    sqlite3_bind_int64(ins, 1, r.id);
    const char* vals[] = {r.status, r.amount, r.created, r.at, r.note};
    for (int i = 0; i < 5; ++i) {
      if (vals[i] == nullptr) {
        sqlite3_bind_null(ins, i + 2);
      } else {
        sqlite3_bind_text(ins, i + 2, vals[i], -1, SQLITE_TRANSIENT);
      }
    }
    sqlite3_step(ins);
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  sqlite3_stmt* q = nullptr;
  EXPECT_EQ(
      sqlite3_prepare_v2(db, ("SELECT id FROM orders WHERE " + filter + " ORDER BY id").c_str(), -1,
                         &q, nullptr),
      SQLITE_OK)
      << sqlite3_errmsg(db);
  std::vector<int64_t> out;
  while (sqlite3_step(q) == SQLITE_ROW) out.push_back(sqlite3_column_int64(q, 0));
  sqlite3_finalize(q);
  sqlite3_close(db);
  return out;
}

std::vector<int64_t> Kept(const std::string& filter) {
  auto sc = Settings();
  sc.filter = filter;
  auto t = Transform::Make(sc, Orders(), "orders");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return {};
  Batch in = Fill((*t)->read_schema());
  auto out_schema = std::make_shared<const Schema>((*t)->output_schema());
  Batch out(out_schema), removed(out_schema);
  Status s = (*t)->Apply(in, /*keyed=*/false, /*deletes=*/false, out_schema, &out, &removed);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(removed.num_rows(), 0u);
  return Ids(out);
}

TEST(Filter, KeepsWhatSqliteKeepsOverTheSameValues) {
  // NULL logic, text and number comparisons, dates and timestamps, functions.
  const std::vector<std::string> filters = {
      "status <> 'cancelled' AND amount > 0",
      "status IS NOT 'cancelled'",
      "amount >= 5",
      "amount = 12.5",
      "amount BETWEEN -5 AND 100",
      "NOT (amount > 0)",
      "amount > 0 OR status = 'paid'",
      "status = 'paid'",
      "lower(status) = 'paid'",
      "status IN ('paid', 'refunded')",
      "status LIKE 'p%'",
      "note IS NULL",
      "coalesce(note, '') = ''",
      "created >= '2024-01-01'",
      "created < '2024-01-01'",
      "created = '2024-01-01'",
      "strftime('%Y', created) = '2024'",
      "date(at) = '2024-01-01'",
      "at >= '2024-01-01 00:00:00'",
      "at = '2024-01-01 00:00:00'",
      "at > '2024-03-01'",
      "length(note) > 0 AND id % 2 = 1",
      "CASE WHEN status = 'paid' THEN amount > 1 ELSE 0 END",
  };
  for (const auto& f : filters) {
    EXPECT_EQ(Kept(f), SqliteIds(f)) << f;
  }
  // And what a user expects of them (the three-valued logic drops NULLs).
  EXPECT_EQ(Kept("status <> 'cancelled' AND amount > 0"), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(Kept("at = '2024-01-01 00:00:00'"), (std::vector<int64_t>{1}));
  EXPECT_EQ(Kept("created = '2024-01-01'"), (std::vector<int64_t>{1, 7}));
}

TEST(Filter, KeyedRowsThatStopMatchingAreDeletedByKey) {
  auto sc = Settings();
  sc.filter = "status = 'paid'";
  auto t = Transform::Make(sc, Orders(), "orders");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Batch in = Fill((*t)->read_schema());
  auto out_schema = std::make_shared<const Schema>((*t)->output_schema());
  Batch out(out_schema), removed(out_schema);
  ASSERT_TRUE((*t)->Apply(in, /*keyed=*/true, false, out_schema, &out, &removed).ok());
  EXPECT_EQ(Ids(out), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(Ids(removed), (std::vector<int64_t>{2, 4, 6, 7}));
  // Deletes pass whatever the filter says: their other columns are not known.
  Batch del = Fill((*t)->read_schema());
  Batch out2(out_schema), removed2(out_schema);
  ASSERT_TRUE((*t)->Apply(del, true, /*deletes=*/true, out_schema, &out2, &removed2).ok());
  EXPECT_EQ(out2.num_rows(), kRows.size());
  EXPECT_EQ(removed2.num_rows(), 0u);
}

TEST(Columns, LeftOutColumnsAreNotReadAndChangesDropThem) {
  auto sc = Settings();
  sc.exclude_columns = {"note", "at"};
  sc.rename_columns = {{"status", "state"}};
  sc.add_columns = {{"amount_cents", "CAST(round(amount * 100) AS INTEGER)", "", 0},
                    {"day", "created", "", 0},
                    {"label", "status || '/' || id", "string", 0}};
  auto t = Transform::Make(sc, Orders(), "orders");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const auto& read = (*t)->read_info();
  ASSERT_EQ(read.columns.size(), 4u);
  EXPECT_EQ(read.columns[3].name, "created");
  EXPECT_EQ(source::TableOrdinal(read, 3), 3u);
  EXPECT_EQ(read.cursor_candidates, (std::vector<std::string>{"id", "created"}));
  const Schema& o = (*t)->output_schema();
  std::vector<std::string> names;
  for (const auto& f : o.fields) names.push_back(f.name + ":" + f.type.ToIceberg());
  EXPECT_EQ(names, (std::vector<std::string>{"id:long", "state:string", "amount:decimal(10,2)",
                                             "created:date", "amount_cents:long", "day:date",
                                             "label:string"}));
  EXPECT_EQ(o.identifier_field_ids, (std::vector<int32_t>{1}));
  // A change batch carries every column of the table.
  Batch in = Fill((*t)->table_schema());
  auto out_schema = std::make_shared<const Schema>(o);
  Batch out(out_schema), removed(out_schema);
  ASSERT_TRUE((*t)->Apply(in, true, false, out_schema, &out, &removed).ok());
  ASSERT_EQ(out.num_rows(), kRows.size());
  EXPECT_EQ(out.column(4).ValueAt<int64_t>(0), 1250);
  EXPECT_EQ(out.column(4).ValueAt<int64_t>(5), -325);
  EXPECT_EQ(out.column(4).ValueAt<int64_t>(6), 100000001);
  EXPECT_FALSE(out.column(4).IsValid(4));  // NULL amount
  EXPECT_EQ(FormatDateIso(out.column(5).ValueAt<int32_t>(5)), "1969-07-20");
  EXPECT_EQ(out.column(6).GetBytes(0), "paid/1");
  EXPECT_FALSE(out.column(6).IsValid(3));  // NULL || ... is NULL
  EXPECT_EQ(out.column(1).GetBytes(1), "cancelled");
}

TEST(Columns, MistakesAreNamedWithTheirFix) {
  auto err = [](config::StreamConfig sc) {
    auto t = Transform::Make(sc, Orders(), "orders");
    return t.ok() ? std::string("ok") : t.status().message();
  };
  auto sc = Settings();
  sc.exclude_columns = {"id"};
  EXPECT_NE(err(sc).find("leaves out key column id"), std::string::npos) << err(sc);
  sc = Settings();
  sc.columns = std::vector<std::string>{"status"};
  EXPECT_NE(err(sc).find("list it in columns"), std::string::npos) << err(sc);
  sc = Settings();
  sc.exclude_columns = {"Note"};
  EXPECT_NE(err(sc).find("does not have"), std::string::npos);
  EXPECT_NE(err(sc).find("its columns: id, status, amount, created, at, note"), std::string::npos);
  sc = Settings();
  sc.mode = config::SyncMode::kIncremental;
  sc.cursor = "at";
  sc.exclude_columns = {"at"};
  EXPECT_NE(err(sc).find("leaves out cursor column at"), std::string::npos) << err(sc);
  sc = Settings();
  sc.filter = "statuss = 'paid'";
  EXPECT_NE(err(sc).find("no such column: statuss"), std::string::npos) << err(sc);
  EXPECT_NE(err(sc).find("source's columns: id, status"), std::string::npos) << err(sc);
  sc = Settings();
  sc.filter = "status = 'paid' AND";
  EXPECT_NE(err(sc).find("filter 'status = 'paid' AND'"), std::string::npos) << err(sc);
  sc = Settings();
  sc.exclude_columns = {"note"};
  sc.filter = "note <> ''";
  EXPECT_NE(err(sc).find("column note is left out by exclude_columns"), std::string::npos)
      << err(sc);
  sc = Settings();
  sc.filter = "1); DROP TABLE x; SELECT (1";
  EXPECT_NE(err(sc), "ok");
  // Expressions read the row and call functions; nothing else is allowed.
  for (const char* f :
       {"(SELECT count(*) FROM sqlite_schema) > 0",
        "(SELECT count(*) FROM temp.sqlite_temp_master) > 0", "load_extension('x') IS NULL"}) {
    sc = Settings();
    sc.filter = f;
    EXPECT_NE(err(sc), "ok") << f;
  }
  sc = Settings();
  sc.filter = "(SELECT count(*) FROM temp.\"row\") >= 0 AND abs(-1) = 1";
  EXPECT_EQ(err(sc), "ok");
  sc = Settings();
  sc.rename_columns = {{"status", "note"}};
  EXPECT_NE(err(sc).find("two columns the name note"), std::string::npos) << err(sc);
  sc = Settings();
  sc.add_columns = {{"big", "amount > 10", "", 0}};
  EXPECT_NE(err(sc).find("type cannot be told"), std::string::npos) << err(sc);
  sc = Settings();
  sc.add_columns = {{"big", "amount > 10", "boolean", 0}, {"status", "1", "long", 0}};
  EXPECT_NE(err(sc).find("add_columns.status has the name of a column"), std::string::npos)
      << err(sc);
  sc = Settings();
  sc.add_columns = {{"n", "'x' || id", "long", 0}};
  auto t = Transform::Make(sc, Orders(), "orders");
  ASSERT_TRUE(t.ok());
  Batch in = Fill((*t)->read_schema());
  auto out_schema = std::make_shared<const Schema>((*t)->output_schema());
  Batch out(out_schema), removed(out_schema);
  Status s = (*t)->Apply(in, false, false, out_schema, &out, &removed);
  EXPECT_NE(s.message().find("computed column n (long) got 'x1': not a number"), std::string::npos)
      << s.ToString();
}

TEST(Columns, ComputedValuesOfEveryKind) {
  auto sc = Settings();
  sc.filter = "id <= 2";
  sc.add_columns = {{"b", "amount > 50", "boolean", 0},
                    {"d", "amount * 2", "decimal(12,2)", 0},
                    {"x", "amount / 3", "double", 0},
                    {"t", "datetime(at, '+1 day')", "timestamp", 0},
                    {"u", "'6ba7b810-9dad-11d1-80b4-00c04fd430c8'", "uuid", 0}};
  auto t = Transform::Make(sc, Orders(), "orders");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Batch in = Fill((*t)->read_schema());
  auto out_schema = std::make_shared<const Schema>((*t)->output_schema());
  Batch out(out_schema), removed(out_schema);
  Status s = (*t)->Apply(in, false, false, out_schema, &out, &removed);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out.num_rows(), 2u);
  EXPECT_EQ(*FormatTextValue(out.column(7), 0), "25.00");
  EXPECT_EQ(*FormatTextValue(out.column(7), 1), "199.98");
  EXPECT_EQ(out.column(6).ValueAt<uint8_t>(0), 0);
  EXPECT_EQ(out.column(6).ValueAt<uint8_t>(1), 1);
  EXPECT_DOUBLE_EQ(out.column(8).ValueAt<double>(1), 99.99 / 3);
  EXPECT_EQ(*FormatTextValue(out.column(9), 0), "2024-01-02 00:00:00.000000");
  EXPECT_EQ(*FormatTextValue(out.column(10), 1), "6ba7b810-9dad-11d1-80b4-00c04fd430c8");
}

TEST(Metadata, SourceTableJoinsTheKeyAndIsSetOnDeletesToo) {
  auto sc = Settings();
  sc.metadata_columns = {"_ferry_source_table", "_ferry_synced_at"};
  sc.filter = "status = 'paid'";
  auto t = Transform::Make(sc, Orders(), "east:orders");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Schema& o = (*t)->output_schema();
  ASSERT_EQ(o.fields.size(), 8u);
  EXPECT_EQ(o.fields[6].name, "_ferry_source_table");
  EXPECT_TRUE(o.fields[6].required);
  EXPECT_EQ(o.fields[7].type.ToIceberg(), "timestamptz");
  EXPECT_EQ(o.identifier_field_ids, (std::vector<int32_t>{o.fields[6].id, 1}));
  EXPECT_TRUE((*t)->keys_by_source_table());
  auto out_schema = std::make_shared<const Schema>(o);
  for (bool deletes : {false, true}) {
    Batch in = Fill((*t)->read_schema());
    Batch out(out_schema), removed(out_schema);
    ASSERT_TRUE((*t)->Apply(in, /*keyed=*/true, deletes, out_schema, &out, &removed).ok());
    for (const Batch* b : {&out, &removed}) {
      for (size_t r = 0; r < b->num_rows(); ++r) {
        EXPECT_EQ(b->column(6).GetBytes(r), "east:orders");
        EXPECT_GT(b->column(7).ValueAt<int64_t>(r), int64_t{1700000000} * 1000000);
      }
    }
    EXPECT_EQ(out.num_rows() + removed.num_rows(), kRows.size());
  }
  // A table with a column of that name must rename it first.
  source::StreamInfo odd = Orders();
  odd.columns[5].name = "_ferry_synced_at";
  auto clash = Transform::Make(sc, odd, "orders");
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("rename the column"), std::string::npos);
}

TEST(SoftDeletes, DeletesBecomeMarkedRowsThroughTheFilterAndComputedColumns) {
  auto sc = Settings();
  sc.soft_deletes = true;
  sc.filter = "status = 'paid'";
  sc.add_columns = {{"cents", "CAST(amount * 100 AS INTEGER)", "", 0}};
  auto t = Transform::Make(sc, Orders(), "orders");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE((*t)->soft_deletes());
  const Schema& o = (*t)->output_schema();
  ASSERT_EQ(o.fields.size(), 8u);
  EXPECT_EQ(o.fields[7].name, "_ferry_deleted");
  EXPECT_EQ(o.fields[7].type.ToIceberg(), "boolean");
  EXPECT_EQ(o.identifier_field_ids, (std::vector<int32_t>{1}));
  EXPECT_NE((*t)->Describe().find("deletes: soft"), std::string::npos);
  auto out_schema = std::make_shared<const Schema>(o);
  for (bool deletes : {false, true}) {
    Batch in = Fill((*t)->read_schema());
    Batch out(out_schema), removed(out_schema);
    ASSERT_TRUE((*t)->Apply(in, /*keyed=*/true, deletes, out_schema, &out, &removed).ok());
    // A deleted row is judged by its last values: kept (marked) where the filter holds, deleted
    // by key where it does not (the destination never had it).
    EXPECT_EQ(Ids(out), (std::vector<int64_t>{1, 3, 5})) << deletes;
    EXPECT_EQ(Ids(removed), (std::vector<int64_t>{2, 4, 6, 7})) << deletes;
    for (size_t r = 0; r < out.num_rows(); ++r) {
      ASSERT_TRUE(out.column(7).IsValid(r));
      EXPECT_EQ(out.column(7).ValueAt<uint8_t>(r) != 0, deletes) << r;
      // Its computed column from its last values, its other columns as they were.
      EXPECT_EQ(out.column(1).GetBytes(r), "paid");
    }
    EXPECT_EQ(out.column(6).ValueAt<int64_t>(0), 1250);
    EXPECT_EQ(removed.column(7).size(), removed.num_rows());
  }
  // A table with a column of that name must rename it first.
  source::StreamInfo odd = Orders();
  odd.columns[5].name = "_ferry_deleted";
  auto clash = Transform::Make(sc, odd, "orders");
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("deletes: hard"), std::string::npos);
}

TEST(Metadata, EachRowSaysItsChangeWhenAndWhere) {
  auto sc = Settings();
  sc.metadata_columns = {"_ferry_op", "_ferry_source_ts", "_ferry_position"};
  sc.filter = "status = 'paid'";
  auto t = Transform::Make(sc, Orders(), "orders");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Schema& o = (*t)->output_schema();
  ASSERT_EQ(o.fields.size(), 9u);
  EXPECT_EQ(o.fields[6].type.ToIceberg(), "string");
  EXPECT_EQ(o.fields[7].type.ToIceberg(), "timestamptz");
  EXPECT_EQ(o.fields[8].type.ToIceberg(), "string");
  auto out_schema = std::make_shared<const Schema>(o);
  // A change batch: each row's origin; rows the filter drops take theirs along.
  Batch in = Fill((*t)->read_schema());
  for (size_t r = 0; r < in.num_rows(); ++r) {
    RowOrigin origin;
    origin.op = r % 2 == 0 ? RowOrigin::Op::kInsert : RowOrigin::Op::kUpdate;
    origin.commit_us = r == 2 ? RowOrigin::kNoTime : int64_t{1700000000000000} + r;
    source::Position::Lsn(0x1000 + r).StampOn(&origin);
    in.origins().push_back(origin);
  }
  Batch out(out_schema), removed(out_schema);
  ASSERT_TRUE((*t)->Apply(in, /*keyed=*/true, false, out_schema, &out, &removed).ok());
  ASSERT_EQ(Ids(out), (std::vector<int64_t>{1, 3, 5}));  // rows 0, 2, 4
  EXPECT_EQ(out.column(6).GetBytes(0), "insert");
  EXPECT_EQ(out.column(7).ValueAt<int64_t>(0), int64_t{1700000000000000});
  EXPECT_FALSE(out.column(7).IsValid(1));  // row 2: no commit time known
  EXPECT_EQ(out.column(8).GetBytes(1), "0/1002");
  EXPECT_EQ(out.column(8).GetBytes(2), "0/1004");
  EXPECT_EQ(removed.num_rows(), 4u);
  EXPECT_EQ(removed.column(6).GetBytes(0), "update");
  // The rows keep their origins, for destinations that write events (Kafka).
  ASSERT_EQ(out.origins().size(), 3u);
  EXPECT_EQ(out.origins()[1].position_major, 0x1002u);
  ASSERT_EQ(removed.origins().size(), 4u);
  EXPECT_EQ(removed.origins()[0].op, RowOrigin::Op::kUpdate);
  // A load's rows are reads, with no commit time or position.
  Batch load = Fill((*t)->read_schema());
  Batch out2(out_schema), removed2(out_schema);
  ASSERT_TRUE((*t)->Apply(load, false, false, out_schema, &out2, &removed2).ok());
  ASSERT_EQ(out2.num_rows(), 3u);
  for (size_t r = 0; r < out2.num_rows(); ++r) {
    EXPECT_EQ(out2.column(6).GetBytes(r), "read");
    EXPECT_FALSE(out2.column(7).IsValid(r));
    EXPECT_FALSE(out2.column(8).IsValid(r));
  }
}

}  // namespace
}  // namespace ferry::transform
