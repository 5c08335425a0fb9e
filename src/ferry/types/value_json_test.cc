#include "ferry/types/value_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ferry/types/value_text.h"

namespace ferry {
namespace {

// The destination's own text form, for the types JSON has no literal for: dates here.
Result<std::string> DateText(const Column& c, size_t i) {
  int32_t days;
  std::memcpy(&days, c.fixed_data() + i * sizeof(days), sizeof(days));
  return FormatDateIso(days);
}
Status ParseDate(std::string_view text, Column* col) {
  FERRY_ASSIGN_OR_RETURN(int32_t days, ParseDateIso(text));
  col->AppendInt32(days);
  return Status::OK();
}

std::string Json1(const DataType& element, const std::function<void(Column&)>& fill) {
  Column c(DataType::List(element, true, 2));
  fill(c.list_child());
  c.AppendListEnd();
  auto j = FormatListJson(c, 0, DateText);
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return j.ok() ? *j : "";
}

TEST(ListJsonTest, ElementsAreJsonLiteralsAndFloatsTheirShortestText) {
  EXPECT_EQ(Json1(DataType::Float32(),
                  [](Column& e) {
                    e.AppendFloat(0.1f);
                    e.AppendFloat(std::numeric_limits<float>::quiet_NaN());
                    e.AppendFloat(-std::numeric_limits<float>::infinity());
                    e.AppendNull();
                  }),
            R"([0.1,"NaN","-Infinity",null])");
  EXPECT_EQ(Json1(DataType::Int64(),
                  [](Column& e) {
                    e.AppendInt64(std::numeric_limits<int64_t>::min());
                    e.AppendInt64(7);
                  }),
            "[-9223372036854775808,7]");
  EXPECT_EQ(Json1(DataType::Binary(), [](Column& e) { e.AppendBytes(std::string("\0\xff", 2)); }),
            R"(["AP8="])");
  EXPECT_EQ(Json1(DataType::Date(), [](Column& e) { e.AppendInt32(-1); }), R"(["1969-12-31"])");
}

TEST(ListJsonTest, ReadsBackWhatItWrote) {
  for (const DataType& element :
       {DataType::Float32(), DataType::Float64(), DataType::Binary(), DataType::Date()}) {
    Column c(DataType::List(element, true, 2));
    Column& e = c.list_child();
    switch (element.kind()) {
      case TypeKind::kFloat32:
        e.AppendFloat(3.4e38f);
        e.AppendFloat(std::numeric_limits<float>::infinity());
        break;
      case TypeKind::kFloat64:
        e.AppendDouble(-1.5e300);
        e.AppendDouble(std::numeric_limits<double>::quiet_NaN());
        break;
      case TypeKind::kBinary:
        e.AppendBytes(std::string("a\0b", 3));
        break;
      default:
        e.AppendInt32(-719162);  // 0001-01-01
        break;
    }
    e.AppendNull();
    c.AppendListEnd();
    auto text = FormatListJson(c, 0, DateText);
    ASSERT_TRUE(text.ok());
    Column back(c.type());
    ASSERT_TRUE(AppendListJson(*text, &back, ParseDate).ok()) << *text;
    auto again = FormatListJson(back, 0, DateText);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *text);
    EXPECT_EQ(back.list_child().size(), c.list_child().size());
  }
}

TEST(ListJsonTest, AnElementThatDoesNotFitIsNamedAndNothingIsAppended) {
  Column c(DataType::List(DataType::Int32(), true, 2));
  Status s = AppendListJson("[1, 2, 4294967296]", &c, ParseDate);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("list element 4294967296 is not a int"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.list_child().size(), 0u);
  s = AppendListJson("{\"a\": 1}", &c, ParseDate);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is not a JSON array"), std::string::npos) << s.ToString();
  Column dates(DataType::List(DataType::Date(), true, 2));
  s = AppendListJson(R"(["1969-13-01"])", &dates, ParseDate);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(dates.list_child().size(), 0u);
}

}  // namespace
}  // namespace ferry
