#include "ferry/source/position.h"

#include <gtest/gtest.h>

namespace ferry::source {
namespace {

using Kind = Position::Kind;

TEST(PositionTest, EachKindHasItsTextAndTheJsonRecordsAlwaysHeld) {
  EXPECT_EQ(Position::Lsn(0x16D8A38).ToString(), "0/16D8A38");
  EXPECT_EQ(Position::Lsn((uint64_t{0x16} << 32) | 0xB374D848).ToString(), "16/B374D848");
  EXPECT_EQ(Position::Sequence(42).ToString(), "#42");
  EXPECT_EQ(Position::Binlog(3, 154).ToString(), "binlog 000003:154");
  EXPECT_EQ(Position().ToString(), "the start");

  // Sequences and LSNs are bare numbers in state files and markers, as before positions had a
  // type: a record written by an older ferry reads the same.
  EXPECT_EQ(Position::Lsn(23953464).ToJson(), nlohmann::json(23953464));
  EXPECT_EQ(Position::Sequence(7).ToJson(), nlohmann::json(7));
  EXPECT_EQ(Position().ToJson(), nlohmann::json(0));
  EXPECT_EQ(Position::Binlog(3, 154).ToJson(), nlohmann::json::parse(R"({"file":3,"offset":154})"));

  for (const Position& p :
       {Position::Lsn(23953464), Position::Sequence(7), Position::Binlog(12, 4), Position()}) {
    const Kind kind = p.none() ? Kind::kLsn : p.kind();
    auto back = Position::FromJson(p.ToJson(), kind, "position");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, p) << p;
    EXPECT_EQ(back->kind(), p.kind());
  }
  // Zero is "nothing yet" for every kind that is a number.
  EXPECT_TRUE(Position::Sequence(0).none());
  EXPECT_TRUE(Position::Lsn(0).none());
}

TEST(PositionTest, OrderWithinALogAndNoneFirst) {
  EXPECT_LT(Position::Lsn(5), Position::Lsn(6));
  EXPECT_LT(Position(), Position::Lsn(1));
  EXPECT_GT(Position::Sequence(1), Position());
  EXPECT_EQ(Position(), Position::Sequence(0));
  // A binlog position orders by file first: a new file's small offsets come after an old file's
  // large ones.
  EXPECT_LT(Position::Binlog(3, 900000), Position::Binlog(4, 4));
  EXPECT_LT(Position::Binlog(4, 4), Position::Binlog(4, 5));
  EXPECT_EQ(std::max(Position::Lsn(9), Position::Lsn(3)), Position::Lsn(9));
}

TEST(PositionTest, ValuesOfAnotherFormAreRefusedNamingTheValue) {
  for (const char* text : {"-1", "\"0/16D8A38\"", "1.5", "[1,2]", "null", "{\"file\":3}"}) {
    auto r = Position::FromJson(nlohmann::json::parse(text), Kind::kLsn, "cdc_start");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << text;
    EXPECT_NE(r.status().message().find("cdc_start"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(Position::FromJson(nlohmann::json(12), Kind::kBinlog, "position").ok());
  EXPECT_FALSE(
      Position::FromJson(nlohmann::json::parse(R"({"file":-1,"offset":4})"), Kind::kBinlog, "p")
          .ok());
  auto b =
      Position::FromJson(nlohmann::json::parse(R"({"file":2,"offset":4})"), Kind::kBinlog, "p");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, Position::Binlog(2, 4));
  // A number no sequence can be.
  EXPECT_FALSE(Position::FromJson(nlohmann::json(UINT64_MAX), Kind::kSequence, "p").ok());
}

}  // namespace
}  // namespace ferry::source
