#include "ferry/lake/table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ferry/base/testing/temp_dir.h"

namespace ferry::lake {
namespace {

class TableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = OpenSqlCatalog("sqlite:" + (dir_ / "catalog.db").string(), "test", LocalFileIO());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::move(*c);
    schema_.fields = {{1, "id", DataType::Int64(), true, ""},
                      {2, "name", DataType::String(), false, ""}};
    schema_.identifier_field_ids = {1};
  }
  std::unique_ptr<Table> Open() {
    auto t = Table::LoadOrCreate(catalog_.get(), LocalFileIO(), ident_,
                                 ToUri((dir_ / "shop" / "orders").string()), schema_, {});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }

  DataFile FakeFile(Table& t, int64_t rows) {
    // The table layer does not read data files; a registered path with counts is enough here.
    DataFile f;
    f.path = t.NewDataFileUri("test");
    f.record_count = rows;
    f.file_size_bytes = rows * 10;
    return f;
  }

  ferry::testing::TempDir tmp_;
  const std::filesystem::path& dir_ = tmp_.path();
  std::unique_ptr<Catalog> catalog_;
  TableIdent ident_{"shop", "orders"};
  Schema schema_;
};

TEST_F(TableTest, AppendsAccumulateTotalsAndKeepEarlierManifests) {
  auto t = Open();
  ASSERT_TRUE(t);
  for (int i = 1; i <= 3; ++i) {
    AppendRequest req;
    req.schema = &schema_;
    req.data_files = {FakeFile(*t, 100 * i)};
    req.set_properties["ferry.marker.p"] = std::to_string(i);
    auto r = t->Append(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->already_landed);
  }
  const TableMetadata& m = t->metadata();
  EXPECT_EQ(m.last_sequence_number(), 3);
  EXPECT_EQ(*m.Property("ferry.marker.p"), "3");
  const Json* head = m.FindSnapshot(*m.BranchHead("main"));
  ASSERT_NE(head, nullptr);
  EXPECT_EQ((*head)["summary"]["total-records"], "600");
  EXPECT_EQ((*head)["summary"]["total-data-files"], "3");
  auto manifests = ReadManifestList(t->io(), (*head)["manifest-list"]);
  ASSERT_TRUE(manifests.ok()) << manifests.status().ToString();
  ASSERT_EQ(manifests->size(), 3u);
  // The newest manifest first, with this commit's sequence number; older ones keep theirs.
  EXPECT_EQ((*manifests)[0].sequence_number, 3);
  EXPECT_EQ((*manifests)[2].sequence_number, 1);
  auto entries = ReadManifest(t->io(), (*manifests)[0]);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].file.record_count, 300);
  EXPECT_EQ((*entries)[0].sequence_number, 3);  // inherited from the list
  EXPECT_EQ(m.doc()["metadata-log"].size(), 3u);
}

TEST_F(TableTest, AMarkerThatShowsTheWorkLandedPreventsASecondWrite) {
  auto t = Open();
  AppendRequest req;
  req.schema = &schema_;
  req.data_files = {FakeFile(*t, 5)};
  req.set_properties["ferry.marker.p"] = "chunk-1";
  req.already_landed = [](const TableMetadata& m) {
    return m.Property("ferry.marker.p") == std::optional<std::string>("chunk-1");
  };
  auto first = t->Append(req);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->already_landed);
  auto second = t->Append(req);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->already_landed);
  EXPECT_EQ(t->metadata().last_sequence_number(), 1);
}

TEST_F(TableTest, ConcurrentWritersBothLandWithoutLosingFiles) {
  auto a = Open();
  auto b = Open();  // both read version 0
  AppendRequest ra;
  ra.schema = &schema_;
  ra.data_files = {FakeFile(*a, 1)};
  AppendRequest rb;
  rb.schema = &schema_;
  rb.data_files = {FakeFile(*b, 2)};
  // Writer a commits between b's refresh and b's compare-and-swap.
  bool raced = false;
  rb.already_landed = [&](const TableMetadata&) {
    if (!raced) {
      raced = true;
      EXPECT_TRUE(a->Append(ra).ok());
    }
    return false;
  };
  auto r = b->Append(rb);  // loses the first swap, refreshes, retries on top of a's commit
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(r->lost_races, 1);
  const Json* head = b->metadata().FindSnapshot(*b->metadata().BranchHead("main"));
  EXPECT_EQ((*head)["summary"]["total-records"], "3");
}

TEST_F(TableTest, PublishingABranchReplacesMainInOneStep) {
  auto t = Open();
  AppendRequest old;
  old.schema = &schema_;
  old.data_files = {FakeFile(*t, 1000)};
  ASSERT_TRUE(t->Append(old).ok());
  for (int i = 0; i < 2; ++i) {
    AppendRequest req;
    req.schema = &schema_;
    req.branch = "load";
    req.data_files = {FakeFile(*t, 7)};
    ASSERT_TRUE(t->Append(req).ok());
    // main is untouched while the branch loads
    const Json* main = t->metadata().FindSnapshot(*t->metadata().BranchHead("main"));
    EXPECT_EQ((*main)["summary"]["total-records"], "1000");
  }
  PublishRequest pub;
  pub.schema = &schema_;
  pub.branch = "load";
  ASSERT_TRUE(t->Publish(pub).ok());
  const TableMetadata& m = t->metadata();
  const Json* main = m.FindSnapshot(*m.BranchHead("main"));
  EXPECT_EQ((*main)["summary"]["total-records"], "14");
  EXPECT_EQ(m.Branches(), std::vector<std::string>{"main"});
}

TEST_F(TableTest, PublishingAnEmptyLoadEmptiesMain) {
  auto t = Open();
  AppendRequest old;
  old.schema = &schema_;
  old.data_files = {FakeFile(*t, 10)};
  ASSERT_TRUE(t->Append(old).ok());
  PublishRequest pub;
  pub.schema = &schema_;
  pub.branch = "load";
  ASSERT_TRUE(t->Publish(pub).ok());
  const Json* main = t->metadata().FindSnapshot(*t->metadata().BranchHead("main"));
  EXPECT_EQ((*main)["summary"]["total-records"], "0");
  EXPECT_EQ((*main)["summary"]["operation"], "delete");
  auto manifests = ReadManifestList(t->io(), (*main)["manifest-list"]);
  ASSERT_TRUE(manifests.ok());
  EXPECT_TRUE(manifests->empty());
}

TEST_F(TableTest, FieldIdsAreKeptForUnchangedColumnsAndNewForOthers) {
  auto t = Open();
  Schema source;
  source.fields = {{0, "name", DataType::String(), false, ""},
                   {0, "id", DataType::Int64(), true, ""},
                   {0, "added", DataType::Float64(), false, ""}};
  source.identifier_field_ids = {};
  Schema with_key = source;
  with_key.fields[1].id = 99;
  with_key.identifier_field_ids = {99};
  Schema s = *t->AssignFieldIds(with_key, /*replacing=*/true);
  EXPECT_EQ(s.fields[0].id, 2);
  EXPECT_EQ(s.fields[1].id, 1);
  EXPECT_EQ(s.fields[2].id, 3);
  EXPECT_EQ(s.identifier_field_ids, std::vector<int32_t>{1});
}

TEST_F(TableTest, UpdatesEvolveTheSchemaOnlyTheWaysIcebergAllows) {
  auto t = Open();
  AppendRequest first;
  first.schema = &schema_;
  first.data_files = {FakeFile(*t, 3)};
  ASSERT_TRUE(t->Append(first).ok());

  // A new column is added as optional with a new id; the key keeps its id.
  Schema wider;
  wider.fields = {{0, "id", DataType::Int64(), true, ""},
                  {0, "name", DataType::String(), false, ""},
                  {0, "added", DataType::Int32(), true, ""}};
  wider.fields[0].id = 1;
  wider.identifier_field_ids = {1};
  auto evolved = t->AssignFieldIds(wider, /*replacing=*/false);
  ASSERT_TRUE(evolved.ok()) << evolved.status().ToString();
  EXPECT_EQ(evolved->fields[2].id, 3);
  EXPECT_FALSE(evolved->fields[2].required);
  AppendRequest second;
  second.schema = &*evolved;
  second.data_files = {FakeFile(*t, 1)};
  ASSERT_TRUE(t->Append(second).ok());
  auto current = t->metadata().CurrentSchema();
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->fields.size(), 3u);  // the table's schema now has the column

  // int -> long keeps the id (a widening); long -> string is refused, naming both types.
  Schema widened = *evolved;
  widened.fields[2].type = DataType::Int64();
  auto w = t->AssignFieldIds(widened, false);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->fields[2].id, 3);
  Schema changed = *evolved;
  changed.fields[1].type = DataType::Int64();
  auto c = t->AssignFieldIds(changed, false);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("is string in the table and long in the source"),
            std::string::npos)
      << c.status().message();
  // A full refresh replaces every row: the changed column simply gets a new id.
  auto r = t->AssignFieldIds(changed, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fields[1].id, 4);

  // A column the source dropped is refused for updates.
  Schema narrower;
  narrower.fields = {{0, "id", DataType::Int64(), true, ""}};
  auto d = t->AssignFieldIds(narrower, false);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(
      d.status().message().find("column name of table shop.orders is no longer in the source"),
      std::string::npos)
      << d.status().message();
}

TEST_F(TableTest, ListsTakeTwoIdsKeepThemAndWidenTheirElements) {
  auto t = Open();
  AppendRequest first;
  first.schema = &schema_;
  first.data_files = {FakeFile(*t, 3)};
  ASSERT_TRUE(t->Append(first).ok());

  // A new list column takes a new id and a new element id above last-column-id.
  Schema with_list = schema_;
  with_list.fields.push_back({9, "tags", DataType::List(DataType::Int32(), false, 10), false, ""});
  auto evolved = t->AssignFieldIds(with_list, false);
  ASSERT_TRUE(evolved.ok()) << evolved.status().ToString();
  ASSERT_TRUE(evolved->fields[2].type.is_list());
  EXPECT_EQ(evolved->fields[2].id, 3);
  EXPECT_EQ(evolved->fields[2].type.list().id, 4);
  AppendRequest second;
  second.schema = &*evolved;
  second.data_files = {FakeFile(*t, 1)};
  ASSERT_TRUE(t->Append(second).ok());
  EXPECT_EQ(t->metadata().last_column_id(), 4);
  auto current = t->metadata().CurrentSchema();
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  ASSERT_EQ(current->fields.size(), 3u);
  EXPECT_TRUE(current->fields[2].type == evolved->fields[2].type);  // read back from the JSON
  const Json& jf = t->metadata().doc()["schemas"].back()["fields"][2]["type"];
  EXPECT_EQ(jf, Json::parse(R"({"type":"list","element-id":4,"element":"int",)"
                            R"("element-required":false})"));

  // The source's placeholder ids do not matter: the list keeps 3 and 4, its element widens.
  Schema wider = with_list;
  wider.fields[2].type = DataType::List(DataType::Int64(), false, 77);
  auto w = t->AssignFieldIds(wider, false);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->fields[2].id, 3);
  EXPECT_EQ(w->fields[2].type.list().id, 4);
  EXPECT_EQ(w->fields[2].type.list().type.ToIceberg(), "long");
  // A list that became a string (or a narrowed element) is refused for updates.
  Schema flat = with_list;
  flat.fields[2].type = DataType::String();
  auto f = t->AssignFieldIds(flat, false);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("is list<int> in the table and string in the source"),
            std::string::npos)
      << f.status().message();
  // A full refresh gives the changed column new ids.
  auto r = t->AssignFieldIds(flat, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fields[2].id, 5);
}

TEST_F(TableTest, MissingTableIsNotFound) {
  auto t = Table::Load(catalog_.get(), LocalFileIO(), TableIdent{"shop", "nope"});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ferry::lake
