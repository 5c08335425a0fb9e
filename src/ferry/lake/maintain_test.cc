#include "ferry/lake/maintain.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/base/uuid.h"
#include "ferry/format/parquet/reader.h"

namespace ferry::lake {
namespace {

using Rows = std::map<int64_t, std::string>;  // id -> name: the table's key makes rows unique

class MaintainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = OpenSqlCatalog("sqlite:" + (dir_ / "catalog.db").string(), "test", LocalFileIO());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(*c);
    auto s = std::make_shared<Schema>();
    s->fields = {{1, "id", DataType::Int64(), true, ""},
                 {2, "name", DataType::String(), false, ""},
                 {3, "amount", DataType::Float64(), false, ""}};
    s->identifier_field_ids = {1};
    schema_ = s;
    auto k = std::make_shared<Schema>();
    k->fields = {s->fields[0]};
    k->identifier_field_ids = {1};
    key_schema_ = k;
  }

  std::unique_ptr<Table> Open() {
    auto t = Table::LoadOrCreate(catalog_.get(), LocalFileIO(), ident_,
                                 ToUri((dir_ / "shop" / "orders").string()), *schema_, {});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }

  DataFile WriteParquet(Table& t, std::shared_ptr<const Schema> schema, const Batch& b,
                        const std::string& prefix) {
    DataFile f;
    f.path = t.NewDataFileUri(prefix);
    auto out = t.io().NewFile(f.path);
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

  DataFile DataOf(Table& t, const Rows& rows) {
    Batch b(schema_);
    for (const auto& [id, name] : rows) {
      b.column(0).AppendInt64(id);
      b.column(1).AppendBytes(name);
      if (id % 5 == 0) {
        b.column(2).AppendNull();
      } else {
        b.column(2).AppendDouble(static_cast<double>(id) / 4);
      }
    }
    return WriteParquet(t, schema_, b, "data");
  }

  DataFile DeletesOf(Table& t, const std::set<int64_t>& keys) {
    Batch b(key_schema_);
    for (int64_t k : keys) b.column(0).AppendInt64(k);
    DataFile f = WriteParquet(t, key_schema_, b, "eq-delete");
    f.content = FileContent::kEqualityDeletes;
    f.equality_ids = {1};
    return f;
  }

  // As the sink does it: the rows' keys deleted and the rows added in one snapshot.
  void Upsert(Table& t, const Rows& rows, const std::set<int64_t>& deleted = {}) {
    std::set<int64_t> keys = deleted;
    for (const auto& [id, name] : rows) keys.insert(id);
    AppendRequest req;
    req.schema = schema_.get();
    if (!rows.empty()) req.data_files = {DataOf(t, rows)};
    req.delete_files = {DeletesOf(t, keys)};
    req.set_properties["ferry.marker.p"] = "{\"round\": " + std::to_string(++round_) + "}";
    auto r = t.Append(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (int64_t k : keys) expected_.erase(k);
    for (const auto& [id, name] : rows) expected_[id] = name;
  }

  void Append(Table& t, const Rows& rows, const std::string& branch = "main") {
    AppendRequest req;
    req.branch = branch;
    req.schema = schema_.get();
    req.data_files = {DataOf(t, rows)};
    auto r = t.Append(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (branch == "main") {
      for (const auto& [id, name] : rows) expected_[id] = name;
    }
  }

  // main's rows as a reader sees them, applying the deletes by the spec's rules. Written apart
  // from maintain.cc so that the two cannot share a mistake.
  Rows Scan(Table& t, int* data_files = nullptr, int* delete_files = nullptr) {
    EXPECT_TRUE(t.Refresh().ok());
    const TableMetadata& m = t.metadata();
    auto head = m.BranchHead("main");
    if (!head) return {};
    auto list = ReadManifestList(t.io(), (*m.FindSnapshot(*head))["manifest-list"]);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    std::vector<ManifestEntry> data, dels;
    for (const auto& mf : *list) {
      auto entries = ReadManifest(t.io(), mf);
      EXPECT_TRUE(entries.ok()) << entries.status().ToString();
      for (const auto& e : *entries) {
        if (e.status == EntryStatus::kDeleted) continue;
        (e.file.content == FileContent::kData ? data : dels).push_back(e);
      }
    }
    if (data_files) *data_files = static_cast<int>(data.size());
    if (delete_files) *delete_files = static_cast<int>(dels.size());
    std::map<int64_t, int64_t> deleted_at;  // key -> highest delete sequence number
    for (const auto& d : dels) {
      for (const auto& [id, name] : ReadFile(d.file.path, key_schema_)) {
        (void)name;
        deleted_at[id] = std::max(deleted_at[id], *d.sequence_number);
      }
    }
    Rows rows;
    for (const auto& e : data) {
      for (const auto& [id, name] : ReadFile(e.file.path, schema_)) {
        auto it = deleted_at.find(id);
        if (it != deleted_at.end() && it->second > *e.sequence_number) continue;
        EXPECT_FALSE(rows.count(id)) << "key " << id << " is live twice";
        rows[id] = name;
      }
    }
    return rows;
  }

  std::vector<std::pair<int64_t, std::string>> ReadFile(const std::string& uri,
                                                        std::shared_ptr<const Schema> schema) {
    std::vector<std::pair<int64_t, std::string>> out;
    auto file = LocalFileIO()->OpenFile(uri);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    if (!file.ok()) return out;
    auto r = parquet::Reader::Open(std::move(*file), schema);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    Batch b(schema);
    for (size_t g = 0; g < (*r)->num_row_groups(); ++g) {
      EXPECT_TRUE((*r)->ReadRowGroup(g, &b).ok());
      for (size_t i = 0; i < b.num_rows(); ++i) {
        out.emplace_back(b.column(0).values<int64_t>()[i],
                         b.num_columns() > 1 ? std::string(b.column(1).GetBytes(i)) : "");
      }
    }
    return out;
  }

  size_t FilesIn(const std::string& sub) {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "shop" / "orders" / sub)) {
      n += e.is_regular_file() ? 1 : 0;
    }
    return n;
  }

  // Several rounds of upserts and deletes: many small files and equality deletes.
  void BuildHistory(Table& t) {
    Rows first;
    for (int64_t i = 1; i <= 200; ++i) first[i] = "v0-" + std::to_string(i);
    Append(t, first);
    for (int r = 1; r <= 4; ++r) {
      Rows up;
      for (int64_t i = r; i <= 200; i += 7)
        up[i] = "v" + std::to_string(r) + "-" + std::to_string(i);
      for (int64_t i = 0; i < 20; ++i) up[1000 * r + i] = "new" + std::to_string(r);
      std::set<int64_t> del;
      for (int64_t i = 3 * r; i <= 200; i += 11) {
        if (!up.count(i)) del.insert(i);
      }
      Upsert(t, up, del);
    }
  }

  ferry::testing::TempDir tmp_;
  const std::filesystem::path& dir_ = tmp_.path();
  std::unique_ptr<Catalog> catalog_;
  TableIdent ident_{"shop", "orders"};
  std::shared_ptr<const Schema> schema_;
  std::shared_ptr<const Schema> key_schema_;
  Rows expected_;
  int round_ = 0;
};

TEST_F(MaintainTest, CompactionFoldsDeletesIntoFewerFilesAndKeepsTheRows) {
  auto t = Open();
  BuildHistory(*t);
  int data_before = 0, deletes_before = 0;
  ASSERT_EQ(Scan(*t, &data_before, &deletes_before), expected_);
  EXPECT_EQ(data_before, 5);
  EXPECT_EQ(deletes_before, 4);
  const auto marker = t->metadata().Property("ferry.marker.p");
  const int64_t start_seq = t->metadata().last_sequence_number();

  CompactionOptions o;
  o.target_file_bytes = 1 << 20;
  auto r = CompactTable(*t, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->committed);
  EXPECT_EQ(r->rewritten_data_files, 5);
  EXPECT_EQ(r->written_data_files, 1);
  EXPECT_EQ(r->removed_delete_files, 4);
  EXPECT_EQ(r->data_files_after, 1);
  EXPECT_EQ(r->delete_files_after, 0);
  EXPECT_EQ(r->rows_written, static_cast<int64_t>(expected_.size()));
  EXPECT_EQ(r->rows_read - r->rows_dropped, r->rows_written);
  EXPECT_EQ(r->starting_sequence_number, start_seq);

  int data_after = 0, deletes_after = 0;
  EXPECT_EQ(Scan(*t, &data_after, &deletes_after), expected_);
  EXPECT_EQ(data_after, 1);
  EXPECT_EQ(deletes_after, 0);
  const TableMetadata& m = t->metadata();
  EXPECT_EQ(m.Property("ferry.marker.p"), marker);  // recovery sees the same marker
  EXPECT_EQ(m.last_sequence_number(), start_seq + 1);
  const Json& snap = *m.FindSnapshot(*m.BranchHead("main"));
  EXPECT_EQ(snap["summary"]["operation"], "replace");
  EXPECT_EQ(snap["summary"]["deleted-data-files"], "5");
  EXPECT_EQ(snap["summary"]["added-data-files"], "1");
  EXPECT_EQ(snap["summary"]["removed-delete-files"], "4");
  EXPECT_EQ(snap["summary"]["removed-equality-delete-files"], "4");
  EXPECT_EQ(snap["summary"]["total-data-files"], "1");
  EXPECT_EQ(snap["summary"]["total-delete-files"], "0");
  EXPECT_EQ(snap["summary"]["total-records"], std::to_string(expected_.size()));
  // The new file carries the starting snapshot's data sequence number.
  auto list = ReadManifestList(t->io(), snap["manifest-list"]);
  ASSERT_TRUE(list.ok());
  bool found = false;
  for (const auto& mf : *list) {
    auto entries = ReadManifest(t->io(), mf);
    ASSERT_TRUE(entries.ok());
    for (const auto& e : *entries) {
      if (e.status == EntryStatus::kAdded) {
        found = true;
        EXPECT_EQ(*e.sequence_number, start_seq);
        EXPECT_EQ(*e.file_sequence_number, start_seq + 1);
        EXPECT_EQ(mf.min_sequence_number, start_seq);
      }
    }
  }
  EXPECT_TRUE(found);

  // A later upsert still applies to the compacted rows.
  Upsert(*t, {{2, "after"}}, {4});
  EXPECT_EQ(Scan(*t), expected_);
  // Nothing left to do on a compacted table.
  auto again = CompactTable(*t, o);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->committed);  // the new upsert's delete applies to the compacted file
  EXPECT_EQ(Scan(*t), expected_);
  auto idle = CompactTable(*t, o);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(idle->committed);
  EXPECT_EQ(idle->groups_planned, 0);
}

TEST_F(MaintainTest, SmallCleanFilesAreMergedAndASingleOneIsLeftAlone) {
  auto t = Open();
  Append(*t, {{1, "a"}});
  CompactionOptions o;
  o.target_file_bytes = 1 << 20;
  auto r = CompactTable(*t, o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->committed);
  Append(*t, {{2, "b"}});
  Append(*t, {{3, "c"}});
  r = CompactTable(*t, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->committed);
  EXPECT_EQ(r->data_files_before, 3);
  EXPECT_EQ(r->data_files_after, 1);
  int files = 0;
  EXPECT_EQ(Scan(*t, &files), expected_);
  EXPECT_EQ(files, 1);
}

TEST_F(MaintainTest, OutputRollsAtTheTargetSize) {
  auto t = Open();
  std::mt19937 rng(1);
  for (int f = 0; f < 6; ++f) {
    Rows rows;
    for (int64_t i = 0; i < 3000; ++i) {
      std::string v(48, ' ');
      for (auto& ch : v) ch = static_cast<char>('a' + rng() % 26);  // incompressible enough
      rows[f * 10000 + i] = v;
    }
    Append(*t, rows);
  }
  CompactionOptions o;
  o.target_file_bytes = 200 << 10;
  o.parquet.row_group_bytes = 64 << 10;
  auto r = CompactTable(*t, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->committed);
  EXPECT_GT(r->written_data_files, 1);
  EXPECT_EQ(Scan(*t), expected_);
}

TEST_F(MaintainTest, ADeleteCommittedWhileCompactingStaysApplied) {
  auto t = Open();
  BuildHistory(*t);
  auto other = Open();  // a sync committing while the compaction runs
  ASSERT_TRUE(expected_.count(101));
  CompactionOptions o;
  o.target_file_bytes = 1 << 20;
  o.before_commit = [&] {
    AppendRequest req;
    req.schema = schema_.get();
    req.delete_files = {DeletesOf(*other, {101, 1001})};
    ASSERT_TRUE(other->Append(req).ok());
    expected_.erase(101);
    expected_.erase(1001);
  };
  auto r = CompactTable(*t, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->committed);
  int deletes = 0;
  const Rows rows = Scan(*t, nullptr, &deletes);
  EXPECT_FALSE(rows.count(101));
  EXPECT_FALSE(rows.count(1001));
  EXPECT_EQ(rows, expected_);
  EXPECT_EQ(deletes, 1);  // the concurrent delete still applies to the rewritten rows: kept
  EXPECT_EQ(r->delete_files_after, 1);
}

TEST_F(MaintainTest, AGroupWhoseFilesWereRewrittenConcurrentlyIsGivenUp) {
  auto t = Open();
  BuildHistory(*t);
  auto other = Open();
  CompactionOptions o;
  o.target_file_bytes = 1 << 20;
  size_t data_files_at_commit = 0;
  o.before_commit = [&] {
    CompactionOptions o2 = o;
    o2.before_commit = nullptr;
    auto r2 = CompactTable(*other, o2);  // rewrites the same files first
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    ASSERT_TRUE(r2->committed);
    data_files_at_commit = FilesIn("data");
  };
  auto r = CompactTable(*t, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->committed);
  EXPECT_EQ(r->groups_given_up, r->groups_planned);
  // Its own new files are gone again; the table holds the other compaction's result.
  EXPECT_EQ(FilesIn("data"), data_files_at_commit - 1);
  EXPECT_EQ(Scan(*t), expected_);
}

TEST_F(MaintainTest, ExpiryRemovesOldSnapshotsAndOnlyTheirFiles) {
  auto t = Open();
  BuildHistory(*t);
  CompactionOptions o;
  o.target_file_bytes = 1 << 20;
  ASSERT_TRUE(CompactTable(*t, o).ok());
  const size_t data_files_on_disk = FilesIn("data");
  ASSERT_EQ(data_files_on_disk, 1u + 5 + 4);  // compacted + rewritten + delete files

  // The defaults (5 days) keep everything this young.
  auto none = ExpireSnapshots(*t, {});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->committed);
  EXPECT_EQ(t->metadata().doc()["snapshots"].size(), 6u);

  ExpireOptions e;
  e.max_snapshot_age_ms = 0;
  e.min_snapshots_to_keep = 1;
  e.now_ms = NowMs() + 1000;
  auto r = ExpireSnapshots(*t, e);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->committed);
  EXPECT_EQ(r->snapshots_before, 6);
  EXPECT_EQ(r->snapshots_expired, 5);
  EXPECT_EQ(r->data_files_deleted, 5);
  EXPECT_EQ(r->delete_files_deleted, 4);
  EXPECT_EQ(r->manifest_lists_deleted, 5);
  EXPECT_EQ(r->files_not_deleted, 0);
  const TableMetadata& m = t->metadata();
  ASSERT_EQ(m.doc()["snapshots"].size(), 1u);
  EXPECT_EQ(m.doc()["snapshots"][0]["snapshot-id"].get<int64_t>(), *m.BranchHead("main"));
  ASSERT_EQ(m.doc()["snapshot-log"].size(), 1u);
  EXPECT_EQ(FilesIn("data"), 1u);
  EXPECT_EQ(Scan(*t), expected_);  // every file the remaining snapshot needs is there
  EXPECT_TRUE(m.Property("ferry.marker.p").has_value());
  // Nothing left to expire.
  auto again = ExpireSnapshots(*t, e);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->committed);
}

TEST_F(MaintainTest, OrphanRemovalDeletesOnlyOldUnreferencedFiles) {
  auto t = Open();
  BuildHistory(*t);
  Append(*t, {{5000, "on a branch"}}, "ferry-p-run");      // a load branch's files are referenced
  const std::string stray = t->NewDataFileUri("crashed");  // a dead writer's data file
  ASSERT_TRUE(t->io().WriteNew(stray, "not parquet").ok());
  const std::string tmp = (dir_ / "shop" / "orders" / "metadata" / "x.json.tmp-1-0").string();
  ASSERT_TRUE(t->io().WriteNew(ToUri(tmp), "{").ok());  // a dead writer's temporary file
  const size_t data_before = FilesIn("data");

  // Young files are kept whatever they are: a running writer's may not be committed yet.
  auto young = RemoveOrphanFiles(*t, {});
  ASSERT_TRUE(young.ok()) << young.status().ToString();
  EXPECT_EQ(young->orphans_deleted, 0);
  EXPECT_EQ(young->orphans_too_young, 2);
  EXPECT_EQ(FilesIn("data"), data_before);

  OrphanOptions o;
  o.older_than_ms = 0;
  o.now_ms = NowMs() + 1000;
  o.dry_run = true;
  auto dry = RemoveOrphanFiles(*t, o);
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(dry->orphans_deleted, 2);
  EXPECT_TRUE(t->io().Exists(stray));

  o.dry_run = false;
  auto r = RemoveOrphanFiles(*t, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->orphans_deleted, 2);
  EXPECT_EQ(r->files_not_deleted, 0);
  EXPECT_FALSE(t->io().Exists(stray));
  EXPECT_FALSE(t->io().Exists(ToUri(tmp)));
  EXPECT_EQ(FilesIn("data"), data_before - 1);
  EXPECT_EQ(Scan(*t), expected_);  // every referenced file is still there
  auto again = RemoveOrphanFiles(*t, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->orphans_deleted, 0);
}

TEST_F(MaintainTest, ExpiryKeepsTheNewestSnapshotsAndEveryBranchHead) {
  auto t = Open();
  for (int i = 0; i < 5; ++i) Append(*t, {{i, "x"}});
  Append(*t, {{99, "on a branch"}}, "ferry-p-run1");
  ExpireOptions e;
  e.max_snapshot_age_ms = 0;
  e.min_snapshots_to_keep = 3;
  e.now_ms = NowMs() + 1000;
  auto r = ExpireSnapshots(*t, e);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->snapshots_expired, 2);
  EXPECT_EQ(r->data_files_deleted, 0);  // their files are still live in main
  const TableMetadata& m = t->metadata();
  EXPECT_EQ(m.doc()["snapshots"].size(), 4u);  // 3 of main + the branch head
  EXPECT_TRUE(m.BranchHead("ferry-p-run1").has_value());
  EXPECT_NE(m.FindSnapshot(*m.BranchHead("ferry-p-run1")), nullptr);
  EXPECT_EQ(Scan(*t), expected_);

  // A table property sets the default.
  ASSERT_TRUE(t->CommitUpdate(
                   [](TableMetadata& next, int) {
                     next.SetProperty("history.expire.min-snapshots-to-keep", "nope");
                     return Status::OK();
                   },
                   nullptr)
                  .ok());
  ExpireOptions bad;
  auto refused = ExpireSnapshots(*t, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("history.expire.min-snapshots-to-keep"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace ferry::lake
