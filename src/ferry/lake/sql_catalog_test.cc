// The SQL catalog's shared logic (compare-and-swap, reconnects, unknown outcomes) over a
// connection that fails on purpose, the table's resolution of unknown outcomes, and the pruning
// of old metadata files.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/lake/sql_connection.h"
#include "ferry/lake/table.h"
#include "ferry/lake/table_commit.h"

namespace ferry::lake {
namespace {

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// What the next statements of a kind should suffer.
struct Faults {
  int update_lost_before_send = 0;          // kUnavailable, nothing applied
  int update_lost_unapplied = 0;            // kCommitStateUnknown, nothing applied
  int update_lost_applied = 0;              // applied, then kCommitStateUnknown
  int insert_lost_applied = 0;              // the table row inserted, then kCommitStateUnknown
  int reads_lost = 0;                       // SELECTs: kCommitStateUnknown
  std::function<void()> after_lost_update;  // runs when an applied update's outcome is lost
  int reconnects = 0;
  int updates_sent = 0;
};

class FaultyConnection final : public SqlConnection {
 public:
  FaultyConnection(std::unique_ptr<SqlConnection> inner, Faults* f)
      : inner_(std::move(inner)), f_(f) {}
  Result<SqlRows> Execute(const std::string& sql, const SqlParams& params) override {
    if (StartsWith(sql, "UPDATE")) {
      if (f_->update_lost_before_send > 0) {
        --f_->update_lost_before_send;
        return Status::Unavailable("connection lost before sending");
      }
      ++f_->updates_sent;
      if (f_->update_lost_unapplied > 0) {
        --f_->update_lost_unapplied;
        return Status::CommitStateUnknown("connection lost while the update ran");
      }
      auto r = inner_->Execute(sql, params);
      if (f_->update_lost_applied > 0) {
        --f_->update_lost_applied;
        if (f_->after_lost_update) f_->after_lost_update();
        return Status::CommitStateUnknown("connection lost after the update ran");
      }
      return r;
    }
    if (StartsWith(sql, "INSERT INTO iceberg_tables") && f_->insert_lost_applied > 0) {
      --f_->insert_lost_applied;
      auto r = inner_->Execute(sql, params);
      EXPECT_TRUE(r.ok());
      return Status::CommitStateUnknown("connection lost after the insert ran");
    }
    if (StartsWith(sql, "SELECT") && f_->reads_lost > 0) {
      --f_->reads_lost;
      return Status::CommitStateUnknown("connection lost during a read");
    }
    return inner_->Execute(sql, params);
  }
  Status Reconnect() override {
    ++f_->reconnects;
    return Status::OK();
  }
  std::string Describe() const override { return "faulty " + inner_->Describe(); }

 private:
  std::unique_ptr<SqlConnection> inner_;
  Faults* f_;
};

class SqlCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    catalog_ = OpenFaulty(&faults_);
    schema_.fields = {{1, "id", DataType::Int64(), true, ""}};
  }
  std::string CatalogPath() const { return (dir_ / "catalog.db").string(); }
  std::unique_ptr<Catalog> OpenFaulty(Faults* f) {
    auto conn = OpenSqliteCatalogConnection(CatalogPath());
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    auto c = NewSqlCatalog(std::make_unique<FaultyConnection>(std::move(*conn), f), "test",
                           LocalFileIO());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }
  std::unique_ptr<Table> OpenTable(Catalog* c,
                                   const std::map<std::string, std::string>& props = {}) {
    auto t =
        Table::LoadOrCreate(c, LocalFileIO(), ident_, ToUri((dir_ / "t").string()), schema_, props);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }
  AppendRequest OneFile(Table& t, const std::string& marker,
                        const std::string& key = "ferry.marker.p") {
    AppendRequest req;
    req.schema = &schema_;
    DataFile f;
    f.path = t.NewDataFileUri("test");
    f.record_count = 1;
    f.file_size_bytes = 10;
    req.data_files = {f};
    req.set_properties[key] = marker;
    return req;
  }
  std::vector<std::string> MetadataFiles() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / "t" / "metadata")) {
      std::string name = e.path().filename().string();
      if (name.size() > 14 && name.substr(name.size() - 14) == ".metadata.json") {
        out.push_back(ToUri(e.path().string()));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  // Every data file path of main's snapshot chain, as listed by the manifests.
  std::vector<std::string> FilesInTable(Table& t) {
    std::vector<std::string> out;
    const Json* head = t.metadata().FindSnapshot(*t.metadata().BranchHead("main"));
    auto lists = ReadManifestList(t.io(), (*head)["manifest-list"]);
    EXPECT_TRUE(lists.ok());
    for (const auto& mf : *lists) {
      auto entries = ReadManifest(t.io(), mf);
      EXPECT_TRUE(entries.ok());
      for (const auto& e : *entries) out.push_back(e.file.path);
    }
    return out;
  }

  ferry::testing::TempDir tmp_;
  const std::filesystem::path& dir_ = tmp_.path();
  Faults faults_;
  std::unique_ptr<Catalog> catalog_;
  TableIdent ident_{"ns", "t"};
  Schema schema_;
};

TEST_F(SqlCatalogTest, ACommitAppliesOnlyWhileItsRequirementsHold) {
  ASSERT_TRUE(catalog_->CreateNamespace("ns").ok());
  ASSERT_TRUE(catalog_->CreateNamespace("ns").ok());  // idempotent
  auto t = OpenTable(catalog_.get());
  ASSERT_TRUE(t);
  EXPECT_EQ(catalog_->CreateTable(ident_, t->metadata()).status().code(),
            StatusCode::kAlreadyExists);
  const TableMetadata base = t->metadata();
  TableMetadata next = base;
  next.SetProperty("k", "1");
  auto commit = DescribeCommit(ident_, base, next);
  ASSERT_TRUE(commit.ok()) << commit.status().ToString();
  auto first = catalog_->CommitTable(*commit);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->metadata.Property("k"), std::optional<std::string>("1"));
  // A commit built on a uuid the table no longer has is refused and changes nothing.
  TableCommit stale = *commit;
  stale.requirements = Json::array({Json{{"type", "assert-table-uuid"}, {"uuid", "other"}}});
  stale.updates = Json::array({Json{{"action", "set-properties"}, {"updates", {{"k", "2"}}}}});
  auto refused = catalog_->CommitTable(stale);
  EXPECT_EQ(refused.status().code(), StatusCode::kCommitFailed) << refused.status().ToString();
  auto loaded = catalog_->LoadTable(ident_);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->metadata.Property("k"), std::optional<std::string>("1"));
  EXPECT_EQ((*loaded)->metadata_location, first->metadata_location);
  auto tables = catalog_->ListTables("ns");
  ASSERT_TRUE(tables.ok());
  ASSERT_EQ(tables->size(), 1u);
  EXPECT_EQ((*tables)[0].name, "t");
}

TEST_F(SqlCatalogTest, AnUpdateLostBeforeItWasSentIsSentAgainAfterAReconnect) {
  auto t = OpenTable(catalog_.get());
  ASSERT_TRUE(t);
  faults_.update_lost_before_send = 2;
  auto r = t->Append(OneFile(*t, "1"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(faults_.reconnects, 2);
  EXPECT_EQ(r->unknown_outcomes, 0);
  EXPECT_EQ(t->metadata().last_sequence_number(), 1);
}

TEST_F(SqlCatalogTest, AnUpdateLostAfterItWasSentIsReportedUnknownAndNotSentAgain) {
  auto t = OpenTable(catalog_.get());
  ASSERT_TRUE(t);
  TableMetadata next = t->metadata();
  next.SetProperty("k", "1");
  auto commit = DescribeCommit(ident_, t->metadata(), next);
  ASSERT_TRUE(commit.ok());
  faults_.update_lost_applied = 1;
  auto r = catalog_->CommitTable(*commit);
  EXPECT_EQ(r.status().code(), StatusCode::kCommitStateUnknown) << r.status().ToString();
  EXPECT_EQ(faults_.updates_sent, 1);
}

TEST_F(SqlCatalogTest, ReadsAreRepeatedAfterALostConnection) {
  auto t = OpenTable(catalog_.get());
  ASSERT_TRUE(t);
  faults_.reads_lost = 2;
  auto loaded = catalog_->LoadTable(ident_);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->metadata_location, t->metadata_location());
  EXPECT_EQ(faults_.reconnects, 2);
}

TEST_F(SqlCatalogTest, ACreateWhoseOutcomeWasLostIsReadBack) {
  faults_.insert_lost_applied = 1;
  auto t = OpenTable(catalog_.get());  // created, not "already exists"
  ASSERT_TRUE(t);
  auto loaded = catalog_->LoadTable(ident_);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->metadata_location, t->metadata_location());
}

TEST_F(SqlCatalogTest, NamespacesAreListedLoadedUpdatedAndDroppedWhenEmpty) {
  ASSERT_TRUE(catalog_->CreateNamespace("sales", {{"owner", "Ann"}}).ok());
  ASSERT_TRUE(catalog_->CreateNamespace("sales.eu").ok());
  ASSERT_TRUE(catalog_->CreateNamespace("Web Logs").ok());
  auto top = catalog_->ListNamespaces("");
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(*top, (std::vector<std::string>{"Web Logs", "sales"}));
  auto below = catalog_->ListNamespaces("sales");
  ASSERT_TRUE(below.ok());
  EXPECT_EQ(*below, (std::vector<std::string>{"sales.eu"}));
  ASSERT_TRUE(catalog_->UpdateNamespace("sales", {{"team", "x"}}, {"owner"}).ok());
  auto props = catalog_->LoadNamespace("sales");
  ASSERT_TRUE(props.ok() && props->has_value());
  EXPECT_EQ(**props, (std::map<std::string, std::string>{{"team", "x"}}));
  EXPECT_EQ(catalog_->UpdateNamespace("nope", {}, {}).code(), StatusCode::kNotFound);
  ident_ = TableIdent{"Web Logs", "t"};
  ASSERT_TRUE(OpenTable(catalog_.get()));
  EXPECT_EQ(catalog_->DropNamespace("Web Logs").code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(catalog_->RenameTable(ident_, TableIdent{"sales", "t2"}).ok());
  EXPECT_EQ(catalog_->RenameTable(ident_, TableIdent{"sales", "t2"}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(catalog_->DropNamespace("Web Logs").ok());
  EXPECT_FALSE(catalog_->LoadNamespace("Web Logs")->has_value());
  ASSERT_TRUE(catalog_->DropTable(TableIdent{"sales", "t2"}).ok());
  EXPECT_EQ(catalog_->DropTable(TableIdent{"sales", "t2"}).code(), StatusCode::kNotFound);
}

TEST_F(SqlCatalogTest, TablesCommitTogetherOrNotAtAll) {
  auto a = OpenTable(catalog_.get());
  ident_ = TableIdent{"ns", "u"};
  auto b = OpenTable(catalog_.get());
  ASSERT_TRUE(a && b);
  auto change = [](Table& t, const std::string& v) {
    TableMetadata next = t.metadata();
    next.SetProperty("k", v);
    return *DescribeCommit(t.ident(), t.metadata(), next);
  };
  ASSERT_TRUE(catalog_->CommitTables({change(*a, "1"), change(*b, "1")}).ok());
  // b's commit asks for a field id the table does not have: neither applies.
  TableCommit stale_b = change(*b, "2");
  ASSERT_TRUE(a->Refresh().ok() && b->Refresh().ok());
  TableCommit fresh_a = change(*a, "2");
  stale_b.requirements.push_back(
      Json{{"type", "assert-last-assigned-field-id"}, {"last-assigned-field-id", 999}});
  Status s = catalog_->CommitTables({fresh_a, stale_b});
  EXPECT_EQ(s.code(), StatusCode::kCommitFailed) << s.ToString();
  ASSERT_TRUE(a->Refresh().ok() && b->Refresh().ok());
  EXPECT_EQ(a->metadata().Property("k"), std::optional<std::string>("1"));
  EXPECT_EQ(b->metadata().Property("k"), std::optional<std::string>("1"));
}

TEST_F(SqlCatalogTest, UnsupportedOrUnreachableCatalogsNameTheProblemWithoutThePassword) {
  auto bad = OpenSqlCatalog("mysql://ferry:hunter22@db/lake", "c", LocalFileIO());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().find("hunter22"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("postgresql://"), std::string::npos);

  // Port 1 on the loopback address: nothing listens there.
  for (const std::string uri : {"postgresql://ferry:hunter22@127.0.0.1:1/lake",
                                "postgresql:host=127.0.0.1 port=1 dbname=lake user=ferry "
                                "password=hunter22"}) {
    auto down = OpenSqlCatalog(uri, "c", LocalFileIO());
    ASSERT_FALSE(down.ok());
    EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().ToString();
    const std::string& m = down.status().message();
    EXPECT_EQ(m.find("hunter22"), std::string::npos) << m;
    EXPECT_NE(m.find("postgresql://ferry@127.0.0.1:1/lake"), std::string::npos) << m;
    EXPECT_NE(m.find("check host and port in destination.catalog"), std::string::npos) << m;
  }
  auto garbled =
      OpenSqlCatalog("postgresql://ferry:hunter22@127.0.0.1:notaport/lake", "c", LocalFileIO());
  ASSERT_FALSE(garbled.ok());
  EXPECT_EQ(garbled.status().message().find("hunter22"), std::string::npos)
      << garbled.status().message();
}

// ---- the table's side: unknown outcomes are resolved by reading back, never by writing twice ----

TEST_F(SqlCatalogTest, ACommitThatLandedDespiteALostConnectionIsNotWrittenAgain) {
  auto t = OpenTable(catalog_.get());
  ASSERT_TRUE(t);
  faults_.update_lost_applied = 1;
  auto r = t->Append(OneFile(*t, "1"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->unknown_outcomes, 1);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(faults_.updates_sent, 1);  // read back, not sent again
  EXPECT_EQ(t->metadata().last_sequence_number(), 1);
  EXPECT_EQ(r->metadata_location, t->metadata_location());
}

TEST_F(SqlCatalogTest, ACommitThatDidNotLandIsMadeAgainByCompareAndSwap) {
  auto t = OpenTable(catalog_.get());
  faults_.update_lost_unapplied = 1;
  auto r = t->Append(OneFile(*t, "1"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->unknown_outcomes, 1);
  EXPECT_EQ(r->lost_races, 0);
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(t->metadata().last_sequence_number(), 1);
  EXPECT_EQ(FilesInTable(*t).size(), 1u);
}

TEST_F(SqlCatalogTest, ALandedCommitBuriedUnderAnotherWritersIsFoundByItsSnapshot) {
  // No marker check at all: only the snapshot it added can tell that the lost update landed.
  auto t = OpenTable(catalog_.get());
  Faults other_faults;
  auto other_catalog = OpenFaulty(&other_faults);
  auto other = OpenTable(other_catalog.get());
  faults_.update_lost_applied = 1;
  faults_.after_lost_update = [&] {
    auto r = other->Append(OneFile(*other, "other"));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  };
  AppendRequest mine = OneFile(*t, "1");
  auto r = t->Append(mine);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(faults_.updates_sent, 1);
  auto files = FilesInTable(*t);
  EXPECT_EQ(files.size(), 2u);  // ours once, the other writer's once
  EXPECT_EQ(std::count(files.begin(), files.end(), mine.data_files[0].path), 1);
}

TEST_F(SqlCatalogTest, ALandedCommitBuriedBeyondTheMetadataLogIsStillFoundAndNotWrittenAgain) {
  // Two commits of another writer bury ours beyond the one-entry metadata-log: its snapshot
  // (and the marker) tell that it landed.
  const std::map<std::string, std::string> props = {{"write.metadata.previous-versions-max", "1"}};
  auto t = OpenTable(catalog_.get(), props);
  Faults other_faults;
  auto other_catalog = OpenFaulty(&other_faults);
  auto other = OpenTable(other_catalog.get(), props);
  faults_.update_lost_applied = 1;
  faults_.after_lost_update = [&] {
    for (int i = 0; i < 2; ++i) {
      auto r = other->Append(OneFile(*other, "o", "ferry.marker.other"));
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
  };
  AppendRequest req = OneFile(*t, "chunk-1");
  req.already_landed = [&](const TableMetadata& m) {
    return m.Property("ferry.marker.p") == std::optional<std::string>("chunk-1");
  };
  auto r = t->Append(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(r->unknown_outcomes, 1);
  EXPECT_EQ(faults_.updates_sent, 1);
  EXPECT_EQ(t->metadata().last_sequence_number(), 3);
  EXPECT_EQ(FilesInTable(*t).size(), 3u);
}

TEST_F(SqlCatalogTest, ACommitReportedRefusedThatLandedAnywayIsFoundNotTakenForAnothersMarker) {
  // A resent request (a proxy's, an HTTP library's) can apply a commit whose answer says it lost
  // a race. The marker check then sees the work in the table: it must find it was this commit's
  // (its files are referenced), never "landed earlier" (whose files a sink would delete).
  // A catalog that applies the first commit and answers that it lost a race.
  class Denying final : public Catalog {
   public:
    explicit Denying(Catalog* inner) : in_(inner) {}
    Status CreateNamespace(const std::string& ns,
                           const std::map<std::string, std::string>& p) override {
      return in_->CreateNamespace(ns, p);
    }
    Result<std::vector<std::string>> ListNamespaces(const std::string& p) override {
      return in_->ListNamespaces(p);
    }
    Result<std::optional<std::map<std::string, std::string>>> LoadNamespace(
        const std::string& ns) override {
      return in_->LoadNamespace(ns);
    }
    Status UpdateNamespace(const std::string& ns, const std::map<std::string, std::string>& set,
                           const std::vector<std::string>& remove) override {
      return in_->UpdateNamespace(ns, set, remove);
    }
    Status DropNamespace(const std::string& ns) override { return in_->DropNamespace(ns); }
    Result<std::vector<TableIdent>> ListTables(const std::string& ns) override {
      return in_->ListTables(ns);
    }
    Result<std::optional<LoadedTable>> LoadTable(const TableIdent& t) override {
      return in_->LoadTable(t);
    }
    Result<LoadedTable> CreateTable(const TableIdent& t, const TableMetadata& m) override {
      return in_->CreateTable(t, m);
    }
    Result<LoadedTable> CommitTable(const TableCommit& c) override {
      auto r = in_->CommitTable(c);
      if (r.ok() && denials-- > 0) return Status::CommitFailed("a resent copy lost the race");
      return r;
    }
    Status CommitTables(const std::vector<TableCommit>& c) override { return in_->CommitTables(c); }
    Status DropTable(const TableIdent& t) override { return in_->DropTable(t); }
    Status RenameTable(const TableIdent& a, const TableIdent& b) override {
      return in_->RenameTable(a, b);
    }
    std::string Describe() const override { return "denying " + in_->Describe(); }
    int denials = 1;

   private:
    Catalog* in_;
  };
  Denying denying(catalog_.get());
  auto t = OpenTable(&denying);
  ASSERT_TRUE(t);
  AppendRequest req = OneFile(*t, "chunk-1");
  req.already_landed = [&](const TableMetadata& m) {
    return m.Property("ferry.marker.p") == std::optional<std::string>("chunk-1");
  };
  auto r = t->Append(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->already_landed);
  EXPECT_EQ(t->metadata().last_sequence_number(), 1);
  EXPECT_EQ(FilesInTable(*t), std::vector<std::string>{req.data_files[0].path});
}

// ---- old metadata files ----

TEST_F(SqlCatalogTest, MetadataFilesThatFallOffTheLogAreDeletedWhenTheTableAsks) {
  auto t = OpenTable(catalog_.get(), {{"write.metadata.delete-after-commit.enabled", "true"},
                                      {"write.metadata.previous-versions-max", "3"}});
  for (int i = 1; i <= 6; ++i) ASSERT_TRUE(t->Append(OneFile(*t, std::to_string(i))).ok());
  const Json& log = t->metadata().doc()["metadata-log"];
  ASSERT_EQ(log.size(), 3u);
  std::vector<std::string> expected = {t->metadata_location()};
  for (const auto& e : log) expected.push_back(e["metadata-file"].get<std::string>());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(MetadataFiles(), expected);  // the current file and the logged ones, nothing else
  // The table still reads: every data file is there.
  EXPECT_EQ(FilesInTable(*t).size(), 6u);
}

TEST_F(SqlCatalogTest, MetadataFilesAreKeptByDefault) {
  auto t = OpenTable(catalog_.get(), {{"write.metadata.previous-versions-max", "2"}});
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(t->Append(OneFile(*t, std::to_string(i))).ok());
  EXPECT_EQ(t->metadata().doc()["metadata-log"].size(), 2u);
  EXPECT_EQ(MetadataFiles().size(), 5u);  // Iceberg's default: delete-after-commit is off
}

TEST_F(SqlCatalogTest, PruningWorksAcrossConcurrentWriters) {
  const std::map<std::string, std::string> props = {
      {"write.metadata.delete-after-commit.enabled", "true"},
      {"write.metadata.previous-versions-max", "2"}};
  auto a = OpenTable(catalog_.get(), props);
  Faults other_faults;
  auto other_catalog = OpenFaulty(&other_faults);
  auto b = OpenTable(other_catalog.get(), props);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a->Append(OneFile(*a, "a")).ok());
    ASSERT_TRUE(b->Append(OneFile(*b, "b")).ok());  // b's base is stale: it retries once
  }
  ASSERT_TRUE(a->Refresh().ok());
  EXPECT_EQ(MetadataFiles().size(), 3u);
  EXPECT_EQ(FilesInTable(*a).size(), 10u);
}

}  // namespace
}  // namespace ferry::lake
