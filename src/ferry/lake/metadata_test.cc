#include "ferry/lake/metadata.h"

#include <gtest/gtest.h>

namespace ferry::lake {
namespace {

Schema TwoColumns() {
  Schema s;
  s.fields = {{1, "id", DataType::Int64(), true, ""}, {2, "name", DataType::String(), false, ""}};
  s.identifier_field_ids = {1};
  return s;
}

TEST(MetadataTest, NewTableHasEveryRequiredV2Field) {
  TableMetadata m = TableMetadata::NewTable("u-1", "file:///w/t", TwoColumns(), {{"a", "b"}});
  const Json& d = m.doc();
  for (const char* key :
       {"format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms",
        "last-column-id", "schemas", "current-schema-id", "partition-specs", "default-spec-id",
        "last-partition-id", "sort-orders", "default-sort-order-id"}) {
    EXPECT_TRUE(d.contains(key)) << key;
  }
  EXPECT_EQ(d["format-version"], 2);
  EXPECT_EQ(d["last-column-id"], 2);
  EXPECT_EQ(d["last-partition-id"], 999);
  EXPECT_EQ(d["current-snapshot-id"], -1);
  EXPECT_EQ(d["schemas"][0]["identifier-field-ids"], Json::array({1}));
  EXPECT_FALSE(m.BranchHead("main").has_value());
}

TEST(MetadataTest, SnapshotsGetIncreasingSequenceNumbersAndMainUpdatesTheLog) {
  TableMetadata m = TableMetadata::NewTable("u", "file:///w/t", TwoColumns(), {});
  m.AddSnapshot(Json{{"snapshot-id", 10},
                     {"timestamp-ms", 100},
                     {"manifest-list", "x"},
                     {"summary", {{"operation", "append"}}}},
                "main");
  m.AddSnapshot(Json{{"snapshot-id", 11},
                     {"timestamp-ms", 200},
                     {"manifest-list", "y"},
                     {"summary", {{"operation", "append"}}}},
                "load");
  EXPECT_EQ(m.last_sequence_number(), 2);
  EXPECT_EQ(*m.BranchHead("main"), 10);
  EXPECT_EQ(*m.BranchHead("load"), 11);
  EXPECT_EQ(m.doc()["current-snapshot-id"], 10);
  EXPECT_EQ(m.doc()["snapshot-log"].size(), 1u);
  m.SetBranch("main", 11, 300);
  m.RemoveBranch("load");
  EXPECT_EQ(m.doc()["current-snapshot-id"], 11);
  EXPECT_EQ(m.doc()["snapshot-log"].size(), 2u);
  EXPECT_EQ(m.Branches(), std::vector<std::string>{"main"});
}

TEST(MetadataTest, UnknownFieldsSurviveARewrite) {
  TableMetadata m = TableMetadata::NewTable("u", "file:///w/t", TwoColumns(), {});
  Json d = m.doc();
  d["some-engine-extension"] = {{"x", 1}};
  auto parsed = TableMetadata::Parse(d.dump(), "mem");
  ASSERT_TRUE(parsed.ok());
  parsed->SetProperty("k", "v");
  auto again = TableMetadata::Parse(parsed->ToJsonText(), "mem");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->doc()["some-engine-extension"]["x"], 1);
  EXPECT_EQ(*again->Property("k"), "v");
}

TEST(MetadataTest, AddSchemaReusesAnEqualSchemaAndTracksLastColumnId) {
  TableMetadata m = TableMetadata::NewTable("u", "file:///w/t", TwoColumns(), {});
  EXPECT_EQ(m.AddSchema(TwoColumns()), 0);
  Schema wider = TwoColumns();
  wider.fields.push_back({3, "price", DataType::Decimal(10, 2), false, ""});
  EXPECT_EQ(m.AddSchema(wider), 1);
  EXPECT_EQ(m.last_column_id(), 3);
  auto back = m.SchemaById(1);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->fields[2].type == DataType::Decimal(10, 2));
}

TEST(MetadataTest, MetadataLogIsTrimmedToPreviousVersionsMax) {
  TableMetadata m = TableMetadata::NewTable("u", "file:///w/t", TwoColumns(),
                                            {{"write.metadata.previous-versions-max", "3"}});
  for (int i = 0; i < 10; ++i) m.StartUpdate("file:///w/t/metadata/" + std::to_string(i), 1000 + i);
  EXPECT_EQ(m.doc()["metadata-log"].size(), 3u);
  EXPECT_EQ(m.doc()["metadata-log"][2]["metadata-file"], "file:///w/t/metadata/9");
  // last-updated-ms never goes backwards
  m.StartUpdate("p", 5);
  EXPECT_EQ(m.last_updated_ms(), 1009);
}

TEST(MetadataTest, RejectsWhatItCannotWrite) {
  EXPECT_EQ(TableMetadata::Parse("{", "f").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(TableMetadata::Parse(R"({"format-version":1})", "f").status().code(),
            StatusCode::kNotSupported);
  EXPECT_EQ(MetadataVersion("file:///w/t/metadata/00012-abc.metadata.json"), 12);
  EXPECT_EQ(MetadataVersion("file:///w/t/metadata/v3.metadata.json"), -1);
}

}  // namespace
}  // namespace ferry::lake
