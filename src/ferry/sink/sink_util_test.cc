#include "ferry/sink/sink_util.h"

#include <gtest/gtest.h>

namespace ferry::sink {
namespace {

TEST(SinkUtilTest, LoadNamesStayWhatEarlierVersionsNamedThem) {
  // A resumed load finds its table by this name: it never changes.
  EXPECT_EQ(LoadId({"pipe", "orders", "run-1"}), "b621db36eb04ef95");
  EXPECT_EQ(Hex16(Fnv1a64(std::string_view("pipe\0orders\0run-1", 17))), "f10586083be266cd");
}

TEST(SinkUtilTest, KeysInKeyOrder) {
  Schema s;
  s.fields = {
      {1, "a", DataType::Int64()}, {2, "b", DataType::String()}, {3, "c", DataType::Int32()}};
  s.identifier_field_ids = {3, 1};
  EXPECT_TRUE(IsKey(s, 1));
  EXPECT_FALSE(IsKey(s, 2));
  EXPECT_EQ(KeyNames(s), (std::vector<std::string>{"c", "a"}));
  EXPECT_EQ(KeyPositions(s), (std::vector<size_t>{2, 0}));
  EXPECT_EQ(JoinNames(KeyNames(s)), "(c, a)");
}

TEST(SinkUtilTest, JsonThatIsNotUtf8IsRefusedNamingIt) {
  EXPECT_EQ(*DumpJson(nlohmann::json{{"a", 1}}, "the marker"), "{\"a\":1}");
  auto bad = DumpJson(nlohmann::json("\xff"), "the marker");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("the marker"), std::string::npos);
}

}  // namespace
}  // namespace ferry::sink
