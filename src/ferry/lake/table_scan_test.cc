#include "ferry/lake/table_scan.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/format/parquet/writer.h"
#include "ferry/lake/table.h"

namespace ferry::lake {
namespace {

using Rows = std::multimap<int64_t, std::string>;

class TableScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = OpenSqlCatalog("sqlite:" + (dir_ / "catalog.db").string(), "test", LocalFileIO());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(*c);
    auto s = std::make_shared<Schema>();
    s->fields = {{1, "id", DataType::Int64(), true, ""},
                 {2, "name", DataType::String(), false, ""}};
    s->identifier_field_ids = {1};
    schema_ = s;
    auto k = std::make_shared<Schema>();
    k->fields = {s->fields[0]};
    key_schema_ = k;
    auto p = std::make_shared<Schema>();
    p->fields = {{2147483546, "file_path", DataType::String(), true, ""},
                 {2147483545, "pos", DataType::Int64(), true, ""}};
    pos_schema_ = p;
    auto t = Table::LoadOrCreate(catalog_.get(), LocalFileIO(), TableIdent{"ns", "t"},
                                 ToUri((dir_ / "ns" / "t").string()), *schema_, {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    table_ = std::move(*t);
  }

  DataFile Write(std::shared_ptr<const Schema> schema, const Batch& b, const std::string& prefix) {
    DataFile f;
    f.path = table_->NewDataFileUri(prefix);
    auto out = table_->io().NewFile(f.path);
    EXPECT_TRUE(out.ok());
    auto w = parquet::Writer::Open(std::move(*out), schema);
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE((*w)->Write(b).ok());
    auto m = (*w)->Close();
    EXPECT_TRUE(m.ok());
    f.record_count = static_cast<int64_t>(m->record_count);
    f.file_size_bytes = static_cast<int64_t>(m->file_size_bytes);
    return f;
  }

  DataFile Data(const std::vector<std::pair<int64_t, std::string>>& rows) {
    Batch b(schema_);
    for (const auto& [id, name] : rows) {
      b.column(0).AppendInt64(id);
      b.column(1).AppendBytes(name);
    }
    return Write(schema_, b, "data");
  }

  DataFile EqualityDeletes(const std::set<int64_t>& keys) {
    Batch b(key_schema_);
    for (int64_t k : keys) b.column(0).AppendInt64(k);
    DataFile f = Write(key_schema_, b, "eq");
    f.content = FileContent::kEqualityDeletes;
    f.equality_ids = {1};
    return f;
  }

  DataFile PositionDeletes(const std::vector<std::pair<std::string, int64_t>>& positions) {
    Batch b(pos_schema_);
    for (const auto& [path, pos] : positions) {
      b.column(0).AppendBytes(path);
      b.column(1).AppendInt64(pos);
    }
    DataFile f = Write(pos_schema_, b, "pos");
    f.content = FileContent::kPositionDeletes;
    return f;
  }

  int64_t Commit(std::vector<DataFile> data, std::vector<DataFile> deletes) {
    AppendRequest req;
    req.schema = schema_.get();
    req.data_files = std::move(data);
    req.delete_files = std::move(deletes);
    auto r = table_->Append(req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && r->snapshot_id ? *r->snapshot_id : -1;
  }

  Rows ScanRows(std::optional<int64_t> snapshot = std::nullopt) {
    EXPECT_TRUE(table_->Refresh().ok());
    auto scan = TableScan::Open(table_->io(), table_->metadata(), snapshot);
    EXPECT_TRUE(scan.ok()) << scan.status().ToString();
    Rows rows;
    if (!scan.ok()) return rows;
    Status s = (*scan)->Read([&](const Batch& b) {
      for (size_t r = 0; r < b.num_rows(); ++r) {
        rows.emplace(b.column(0).values<int64_t>()[r], std::string(b.column(1).GetBytes(r)));
      }
      return Status::OK();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return rows;
  }

  ferry::testing::TempDir tmp_;
  const std::filesystem::path& dir_ = tmp_.path();
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<Table> table_;
  std::shared_ptr<const Schema> schema_, key_schema_, pos_schema_;
};

TEST_F(TableScanTest, AnEmptyTableScansAsNoRows) { EXPECT_TRUE(ScanRows().empty()); }

TEST_F(TableScanTest, AppliesEqualityAndPositionDeletesBySequenceNumber) {
  // seq 1: ids 1..6.
  DataFile a = Data({{1, "a1"}, {2, "a2"}, {3, "a3"}, {4, "a4"}, {5, "a5"}, {6, "a6"}});
  const int64_t first = Commit({a}, {});
  // seq 2: an upsert of 3 and 4 and a delete of 5: the equality delete removes the older rows
  // only, not the new versions committed with it.
  DataFile b = Data({{3, "b3"}, {4, "b4"}});
  Commit({b}, {EqualityDeletes({3, 4, 5})});
  // seq 3: new file c; position deletes of a's row 0 (id 1), b's row 1 (id 4) and c's row 0 —
  // a position delete applies to data files of its own sequence number too.
  DataFile c = Data({{7, "c7"}, {8, "c8"}});
  Commit({c}, {PositionDeletes({{a.path, 0}, {b.path, 1}, {c.path, 0}})});
  const Rows want = {{2, "a2"}, {3, "b3"}, {6, "a6"}, {8, "c8"}};
  EXPECT_EQ(ScanRows(), want);
  // An older snapshot reads as it was.
  const Rows then = {{1, "a1"}, {2, "a2"}, {3, "a3"}, {4, "a4"}, {5, "a5"}, {6, "a6"}};
  EXPECT_EQ(ScanRows(first), then);
}

TEST_F(TableScanTest, PartitionedEqualityDeletesApplyInTheirPartitionGlobalOnesEverywhere) {
  // Spec 1: identity(name). Another engine (Flink) writes equality deletes per partition.
  PartitionSpec spec;
  spec.fields = {{2, 1000, "name", Transform{TransformKind::kIdentity, 0}}};
  auto added = table_->CommitUpdate(
      [&](TableMetadata& next, int) {
        next.SetDefaultSpec(next.AddSpec(spec));
        return Status::OK();
      },
      nullptr);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  auto in = [](DataFile f, const std::string& name) {
    f.spec_id = 1;
    PartitionValue v;
    v.null = false;
    v.bytes = name;
    f.partition = {v};
    return f;
  };
  // Key 1 lives in partitions x and y (two rows of one key: a keyless view of history).
  Commit({in(Data({{1, "x"}, {2, "x"}}), "x"), in(Data({{1, "y"}, {3, "y"}}), "y")}, {});
  // A delete of key 1 scoped to partition x leaves y's row; a global delete of 3 reaches y.
  Commit({}, {in(EqualityDeletes({1}), "x"), EqualityDeletes({3})});
  const Rows want = {{1, "y"}, {2, "x"}};
  EXPECT_EQ(ScanRows(), want);
}

TEST_F(TableScanTest, ReadsTheSameRowsEveryTime) {
  DataFile a = Data({{1, "x"}, {1, "x"}, {2, "y"}});  // a keyless view: duplicates stay
  Commit({a}, {});
  ASSERT_TRUE(table_->Refresh().ok());
  auto scan = TableScan::Open(table_->io(), table_->metadata());
  ASSERT_TRUE(scan.ok());
  for (int pass = 0; pass < 2; ++pass) {
    size_t n = 0;
    ASSERT_TRUE((*scan)
                    ->Read([&](const Batch& b) {
                      n += b.num_rows();
                      return Status::OK();
                    })
                    .ok());
    EXPECT_EQ(n, 3u);
  }
  // An error from the callback stops the read and comes back as it is.
  Status s = (*scan)->Read([](const Batch&) { return Status::Cancelled("stop"); });
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace ferry::lake
