#include "ferry/source/postgres/partitions.h"

#include <gtest/gtest.h>

namespace ferry::source::pg {
namespace {

TEST(TableIdentityTest, TextRoundTrips) {
  for (const TableIdentity& id : {TableIdentity{16384, false, {}}, TableIdentity{16384, true, {}},
                                  TableIdentity{16384, true, {16390}},
                                  TableIdentity{16384, true, {16390, 16395, 4294967295u}}}) {
    auto back = TableIdentity::Parse(id.ToString());
    ASSERT_TRUE(back.ok()) << id.ToString() << ": " << back.status().ToString();
    EXPECT_EQ(*back, id) << id.ToString();
  }
  EXPECT_EQ((TableIdentity{16384, true, {16390, 16395}}.ToString()), "16384/16390,16395");
  EXPECT_EQ((TableIdentity{16384, true, {}}.ToString()), "16384/");
  EXPECT_EQ((TableIdentity{16384, false, {}}.ToString()), "16384");
}

TEST(TableIdentityTest, ARecordOfOlderFerryNamesTheRelationAlone) {
  auto id = TableIdentity::Parse("16384");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->relid, 16384u);
  EXPECT_FALSE(id->partitioned);
}

TEST(TableIdentityTest, DamagedIdsAreCorruptionNamingTheId) {
  for (const char* bad : {"", "x", "0", "16384/x", "16384/16390,", "16384/16395,16390",
                          "16384/16390,16390", "99999999999", "16384/,1", "-5"}) {
    auto id = TableIdentity::Parse(bad);
    ASSERT_FALSE(id.ok()) << bad;
    EXPECT_EQ(id.status().code(), StatusCode::kCorruption) << bad;
    EXPECT_NE(id.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << id.status().message();
  }
}

}  // namespace
}  // namespace ferry::source::pg
