// The commit model: what ferry changes in a table's metadata, described as the REST protocol's
// requirements and updates, and applied back to the same metadata; the requirement checks; how
// a lost outcome is recognised in a table other writers changed since.
#include "ferry/lake/table_commit.h"

#include <gtest/gtest.h>

#include <set>

namespace ferry::lake {
namespace {

Schema TwoColumns() {
  Schema s;
  s.fields = {{1, "id", DataType::Int64(), true, ""}, {2, "name", DataType::String(), false, ""}};
  s.identifier_field_ids = {1};
  return s;
}

TableMetadata Base() {
  TableMetadata m = TableMetadata::NewTable("u-1", "file:///w/t", TwoColumns(), {{"a", "1"}});
  m.StartUpdate("", 1000);
  return m;
}

Json Snapshot(int64_t id, int64_t ts) {
  return Json{{"snapshot-id", id},
              {"timestamp-ms", ts},
              {"manifest-list", "file:///w/t/metadata/snap-" + std::to_string(id) + ".avro"},
              {"schema-id", 0},
              {"summary", {{"operation", "append"}}}};
}

// Describes base -> next, applies the commit to base, and compares with next.
TableCommit RoundTrip(const TableMetadata& base, const TableMetadata& next) {
  auto c = DescribeCommit(TableIdent{"ns", "t"}, base, next);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return {};
  EXPECT_TRUE(CheckRequirements(c->requirements, &base).ok());
  TableMetadata applied = base;
  applied.StartUpdate("file:///w/t/metadata/00000.metadata.json", next.last_updated_ms());
  Status s = ApplyUpdates(applied, c->updates);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (const char* key : {"schemas", "current-schema-id", "last-column-id", "partition-specs",
                          "default-spec-id", "last-partition-id", "snapshots", "refs",
                          "current-snapshot-id", "properties", "last-sequence-number"}) {
    EXPECT_EQ(applied.doc()[key], next.doc()[key]) << key;
  }
  return *c;
}

std::vector<std::string> Actions(const TableCommit& c) {
  std::vector<std::string> out;
  for (const auto& u : c.updates) out.push_back(u["action"].get<std::string>());
  return out;
}

TEST(TableCommitTest, AnAppendIsASnapshotItsRefAndTheMarkerOnTheBaseItWasBuiltOn) {
  TableMetadata base = Base();
  TableMetadata next = base;
  next.StartUpdate("m0", 2000);
  next.AddSnapshot(Snapshot(77, 2000), "main");
  next.SetProperty("ferry.marker.p", "{\"chunk\": 1}");
  TableCommit c = RoundTrip(base, next);
  EXPECT_EQ(Actions(c),
            (std::vector<std::string>{"add-snapshot", "set-snapshot-ref", "set-properties"}));
  // Built on a table without a main branch: main must still have none when it is applied.
  bool asserts_main = false;
  for (const auto& r : c.requirements) {
    if (r["type"] == "assert-ref-snapshot-id" && r["ref"] == "main") {
      asserts_main = r["snapshot-id"].is_null();
    }
  }
  EXPECT_TRUE(asserts_main) << c.requirements.dump();
  // Another writer's snapshot on main first: the requirement fails, nothing is applied.
  TableMetadata other = base;
  other.AddSnapshot(Snapshot(5, 1500), "main");
  Status s = CheckRequirements(c.requirements, &other);
  EXPECT_EQ(s.code(), StatusCode::kCommitFailed);
  EXPECT_NE(s.message().find("main"), std::string::npos) << s.message();
  // A dropped and re-created table fails on its uuid.
  TableMetadata recreated = TableMetadata::NewTable("u-2", "file:///w/t", TwoColumns(), {});
  EXPECT_EQ(CheckRequirements(c.requirements, &recreated).code(), StatusCode::kCommitFailed);
  EXPECT_EQ(CheckRequirements(c.requirements, nullptr).code(), StatusCode::kCommitFailed);
}

TEST(TableCommitTest, SchemaAndSpecChangesCarryTheIdsTheyWereDerivedFrom) {
  TableMetadata base = Base();
  TableMetadata next = base;
  Schema wider = TwoColumns();
  wider.fields.push_back({3, "added", DataType::Float64(), false, ""});
  next.SetCurrentSchema(next.AddSchema(wider));
  // As the Iceberg sink does: the wanted spec, then the unpartitioned one that global equality
  // deletes need; the wanted one becomes the default.
  PartitionSpec want;
  want.fields.push_back(PartitionField{1, 0, "id_bucket", *Transform::Parse("bucket[16]")});
  const int32_t id = next.AddSpec(want);
  next.SetDefaultSpec(id);
  next.AddSpec(PartitionSpec{});
  TableCommit c = RoundTrip(base, next);
  std::set<std::string> types;
  for (const auto& r : c.requirements) types.insert(r["type"].get<std::string>());
  for (const char* t :
       {"assert-table-uuid", "assert-last-assigned-field-id", "assert-current-schema-id",
        "assert-last-assigned-partition-id", "assert-default-spec-id"}) {
    EXPECT_TRUE(types.count(t)) << t << " in " << c.requirements.dump();
  }
}

TEST(TableCommitTest, ExpiringSnapshotsRemovesThemAndTheirHistory) {
  TableMetadata base = Base();
  base.AddSnapshot(Snapshot(1, 1100), "main");
  base.AddSnapshot(Snapshot(2, 1200), "main");
  base.AddSnapshot(Snapshot(3, 1300), "main");
  TableMetadata next = base;
  Json kept = Json::array();
  for (const auto& s : next.doc()["snapshots"]) {
    if (s["snapshot-id"] == 3) kept.push_back(s);
  }
  next.mutable_doc()["snapshots"] = kept;
  Json log = Json::array({base.doc()["snapshot-log"].back()});
  next.mutable_doc()["snapshot-log"] = log;
  TableCommit c = RoundTrip(base, next);
  EXPECT_EQ(Actions(c), (std::vector<std::string>{"remove-snapshots"}));
  TableMetadata applied = base;
  ASSERT_TRUE(ApplyUpdates(applied, c.updates).ok());
  EXPECT_EQ(applied.doc()["snapshot-log"], log);
  EXPECT_TRUE(UpdatesVisible(applied, c.updates));
  EXPECT_FALSE(UpdatesVisible(base, c.updates));
}

TEST(TableCommitTest, APublishMovesMainToTheLoadBranchAndDropsIt) {
  TableMetadata base = Base();
  base.AddSnapshot(Snapshot(1, 1100), "main");
  base.AddSnapshot(Snapshot(9, 1200), "ferry-load");
  TableMetadata next = base;
  next.StartUpdate("m1", 3000);
  next.SetBranch("main", 9, next.last_updated_ms());
  next.RemoveBranch("ferry-load");
  TableCommit c = RoundTrip(base, next);
  EXPECT_EQ(Actions(c), (std::vector<std::string>{"remove-snapshot-ref", "set-snapshot-ref"}));
  TableMetadata applied = base;
  applied.StartUpdate("m1", 3000);
  ASSERT_TRUE(ApplyUpdates(applied, c.updates).ok());
  EXPECT_EQ(applied.doc()["current-snapshot-id"], 9);
  EXPECT_EQ(applied.doc()["snapshot-log"].back()["timestamp-ms"], 3000);
}

TEST(TableCommitTest, AChangeTheProtocolCannotExpressIsRefusedNotSentHalf) {
  TableMetadata base = Base();
  base.AddSnapshot(Snapshot(1, 1100), "main");
  TableMetadata next = base;
  // A snapshot rewritten in place: no update says that.
  next.mutable_doc()["snapshots"][0]["summary"]["operation"] = "overwrite";
  auto c = DescribeCommit(TableIdent{"ns", "t"}, base, next);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInternal);
  EXPECT_NE(c.status().message().find("snapshots"), std::string::npos) << c.status().message();
}

TEST(TableCommitTest, OtherWritersUpdatesAreAppliedAsTheProtocolSays) {
  TableMetadata m = Base();
  // A client's schema with nested ids and no last-column-id; then made current by -1.
  Json schema = {{"type", "struct"},
                 {"schema-id", 5},
                 {"fields",
                  {{{"id", 1}, {"name", "id"}, {"required", true}, {"type", "long"}},
                   {{"id", 7},
                    {"name", "tags"},
                    {"required", false},
                    {"type",
                     {{"type", "list"},
                      {"element-id", 8},
                      {"element", "string"},
                      {"element-required", false}}}}}}};
  Json updates = Json::array({Json{{"action", "add-schema"}, {"schema", schema}},
                              Json{{"action", "set-current-schema"}, {"schema-id", -1}},
                              Json{{"action", "add-snapshot"}, {"snapshot", Snapshot(4, 1500)}},
                              Json{{"action", "set-snapshot-ref"},
                                   {"ref-name", "main"},
                                   {"type", "branch"},
                                   {"snapshot-id", 4}},
                              Json{{"action", "remove-properties"}, {"removals", {"a"}}}});
  ASSERT_TRUE(ApplyUpdates(m, updates).ok());
  EXPECT_EQ(m.current_schema_id(), 1);  // a new id, not the client's 5
  EXPECT_EQ(m.last_column_id(), 8);
  EXPECT_EQ(m.last_sequence_number(), 1);  // assigned: the snapshot had none
  EXPECT_EQ(m.doc()["current-snapshot-id"], 4);
  EXPECT_FALSE(m.Property("a").has_value());
  // The same snapshot again, a ref to a snapshot that does not exist, an unknown action.
  for (const Json& bad : {Json{{"action", "add-snapshot"}, {"snapshot", Snapshot(4, 1600)}},
                          Json{{"action", "set-snapshot-ref"},
                               {"ref-name", "x"},
                               {"type", "tag"},
                               {"snapshot-id", 99}},
                          Json{{"action", "rewrite-everything"}}}) {
    TableMetadata copy = m;
    EXPECT_EQ(ApplyUpdates(copy, Json::array({bad})).code(), StatusCode::kInvalidArgument)
        << bad.dump();
  }
  // A snapshot whose sequence number another writer's already took: a conflict to retry.
  Json stale = Snapshot(6, 1700);
  stale["sequence-number"] = 1;
  TableMetadata copy = m;
  EXPECT_EQ(ApplyUpdates(copy, Json::array({Json{{"action", "add-snapshot"}, {"snapshot", stale}}}))
                .code(),
            StatusCode::kCommitFailed);
  TableMetadata v3 = m;
  EXPECT_EQ(
      ApplyUpdates(v3,
                   Json::array({Json{{"action", "upgrade-format-version"}, {"format-version", 3}}}))
          .code(),
      StatusCode::kNotSupported);
}

TEST(TableCommitTest, ALostCommitIsRecognisedByItsSnapshotWhateverCameAfter) {
  TableMetadata base = Base();
  TableMetadata next = base;
  next.AddSnapshot(Snapshot(77, 2000), "main");
  next.SetProperty("ferry.marker.p", "1");
  auto c = DescribeCommit(TableIdent{"ns", "t"}, base, next);
  ASSERT_TRUE(c.ok());
  TableMetadata later = next;
  later.AddSnapshot(Snapshot(78, 2100), "main");  // another writer moved main on
  later.SetProperty("ferry.marker.p", "2");
  EXPECT_TRUE(UpdatesVisible(later, c->updates));
  EXPECT_FALSE(UpdatesVisible(base, c->updates));
}

}  // namespace
}  // namespace ferry::lake
