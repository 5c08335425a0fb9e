// The Kafka destination's records without a broker: topic names, JSON values of every type
// (parsed back by nlohmann's parser, which shares nothing with the encoder), keys, and the
// envelope and flat events.
#include "ferry/sink/kafka/events.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

namespace ferry::sink::kafka {
namespace {

using Json = nlohmann::json;

std::string ValueOf(const Column& c, size_t row) {
  std::string out;
  Status s = AppendJsonValue(c, row, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(KafkaTopicNameTest, TemplatesAndCharactersKafkaRefuses) {
  EXPECT_EQ(*TopicName("{pipeline}.{table}", "shop", "public.orders"), "shop.public.orders");
  EXPECT_EQ(*TopicName("cdc-{schema}-{name}", "p", "sales.Line Items"), "cdc-sales-Line_Items");
  EXPECT_EQ(*TopicName("{name}", "p", "orders"), "orders");
  EXPECT_EQ(*TopicName("x.{schema}.{name}", "p", "orders"), "x..orders");
  // Quotes, spaces, unicode: each byte Kafka refuses becomes '_'.
  EXPECT_EQ(*TopicName("{table}", "p", "Odd \"Tab\" \xc3\xbc:x"), "Odd__Tab_____x");
  auto bad = TopicName("{pipeline}.{tabel}", "p", "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("{tabel}"), std::string::npos);
  EXPECT_NE(bad.status().message().find("{pipeline}, {table}, {schema} and {name}"),
            std::string::npos);
  EXPECT_FALSE(TopicName("{pipeline", "p", "t").ok());
  EXPECT_FALSE(TopicName("{schema}", "p", "t").ok());  // empty
  EXPECT_FALSE(TopicName("..", "p", "t").ok());
  EXPECT_FALSE(TopicName(std::string(250, 'a'), "p", "t").ok());
}

TEST(KafkaJsonValueTest, EveryTypeParsesBackToItsValue) {
  Column b(DataType::Boolean());
  b.AppendBool(true);
  b.AppendNull();
  EXPECT_EQ(ValueOf(b, 0), "true");
  EXPECT_EQ(ValueOf(b, 1), "null");

  Column i(DataType::Int64());
  i.AppendInt64(std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Json::parse(ValueOf(i, 0)).get<int64_t>(), std::numeric_limits<int64_t>::min());

  Column d(DataType::Float64());
  for (double v : {0.1, -0.0, 5e-324, 1.7976931348623157e308}) d.AppendDouble(v);
  d.AppendDouble(std::nan(""));
  d.AppendDouble(-INFINITY);
  for (size_t r = 0; r < 4; ++r) {
    const double back = Json::parse(ValueOf(d, r)).get<double>();
    EXPECT_EQ(std::signbit(back), std::signbit(d.ValueAt<double>(r)));
    EXPECT_EQ(back, d.ValueAt<double>(r));
  }
  EXPECT_EQ(ValueOf(d, 0), "0.1");
  EXPECT_EQ(ValueOf(d, 4), "\"NaN\"");
  EXPECT_EQ(ValueOf(d, 5), "\"-Infinity\"");

  Column f(DataType::Float32());
  f.AppendFloat(0.1f);
  EXPECT_EQ(ValueOf(f, 0), "0.1");

  Column dec(DataType::Decimal(38, 3));
  dec.AppendDecimal(-static_cast<int128_t>(12345));
  EXPECT_EQ(ValueOf(dec, 0), "\"-12.345\"");

  Column date(DataType::Date());
  date.AppendInt32(-719528);  // 0000-01-01
  date.AppendInt32(19875);
  EXPECT_EQ(ValueOf(date, 0), "\"0000-01-01\"");
  EXPECT_EQ(ValueOf(date, 1), "\"2024-06-01\"");

  Column ts(DataType::TimestampTz());
  ts.AppendInt64(1);
  EXPECT_EQ(ValueOf(ts, 0), "\"1970-01-01 00:00:00.000001+00:00\"");

  Column s(DataType::String());
  s.AppendBytes("q\"b\\s\n\t\x01 \xc3\xbc \xf0\x9f\x98\x80");
  EXPECT_EQ(Json::parse(ValueOf(s, 0)).get<std::string>(),
            "q\"b\\s\n\t\x01 \xc3\xbc \xf0\x9f\x98\x80");
  s.AppendBytes("bad \xff");
  std::string out;
  EXPECT_FALSE(AppendJsonValue(s, 1, &out).ok());

  Column bin(DataType::Binary());
  bin.AppendBytes(std::string("\x00\xff\x10", 3));
  EXPECT_EQ(ValueOf(bin, 0), "\"AP8Q\"");

  Column list(DataType::List(DataType::Int32(), false, 7));
  list.list_child().AppendInt32(1);
  list.list_child().AppendNull();
  list.AppendListEnd();
  EXPECT_EQ(Json::parse(ValueOf(list, 0)), Json::parse("[1,null]"));
}

// Each value written as JSON and parsed back into a column of its type is the same value.
TEST(KafkaJsonValueTest, ValuesReadBackFromJson) {
  std::vector<Column> cols;
  cols.emplace_back(DataType::Boolean());
  cols.back().AppendBool(false);
  cols.emplace_back(DataType::Int32());
  cols.back().AppendInt32(std::numeric_limits<int32_t>::min());
  cols.emplace_back(DataType::Int64());
  cols.back().AppendInt64(std::numeric_limits<int64_t>::max());
  cols.emplace_back(DataType::Float32());
  cols.back().AppendFloat(3.4028235e38f);
  cols.emplace_back(DataType::Float64());
  cols.back().AppendDouble(-0.0);
  cols.emplace_back(DataType::Float64());
  cols.back().AppendDouble(std::nan(""));
  cols.emplace_back(DataType::Decimal(38, 2));
  cols.back().AppendDecimal(-static_cast<int128_t>(1) << 100);
  cols.emplace_back(DataType::Timestamp());
  cols.back().AppendInt64(-62135596800000000);  // 0001-01-01
  cols.emplace_back(DataType::String());
  cols.back().AppendBytes("\"\xf0\x9f\x98\x80\"");
  cols.emplace_back(DataType::Binary());
  cols.back().AppendBytes(std::string("\0\1", 2));
  cols.emplace_back(DataType::List(DataType::Date(), false, 9));
  cols.back().list_child().AppendInt32(0);
  cols.back().list_child().AppendNull();
  cols.back().AppendListEnd();
  cols.emplace_back(DataType::Int64());
  cols.back().AppendNull();
  for (const Column& c : cols) {
    const std::string text = ValueOf(c, 0);
    Column back(c.type());
    Status s = AppendFromJson(Json::parse(text), &back);
    ASSERT_TRUE(s.ok()) << text << ": " << s.ToString();
    EXPECT_EQ(ValueOf(back, 0), text) << c.type().ToIceberg();
  }
  Column i(DataType::Int32());
  EXPECT_FALSE(AppendFromJson(Json::parse("2147483648"), &i).ok());
  EXPECT_FALSE(AppendFromJson(Json::parse("\"1\""), &i).ok());
  Column b(DataType::Binary());
  EXPECT_FALSE(AppendFromJson(Json::parse("\"not base64!\""), &b).ok());
}

std::shared_ptr<const Schema> OrdersSchema() {
  auto s = std::make_shared<Schema>();
  s->fields = {{1, "id", DataType::Int64(), true, ""},
               {2, "Note \"x\"", DataType::String(), false, ""},
               {3, "day", DataType::Date(), false, ""}};
  s->identifier_field_ids = {1};
  return s;
}

Batch OrdersBatch(const std::shared_ptr<const Schema>& schema) {
  Batch b(schema);
  b.column(0).AppendInt64(7);
  b.column(1).AppendBytes("hi");
  b.column(2).AppendNull();
  return b;
}

TEST(KafkaEventTest, EnvelopeOfAChangeAndOfADelete) {
  auto schema = OrdersSchema();
  EventEncoder e(schema, Format::kEnvelope, "shop", "public.orders");
  Batch b = OrdersBatch(schema);
  std::string key, value;
  ASSERT_TRUE(e.Key(b, 0, &key).ok());
  EXPECT_EQ(key, "{\"id\":7}");

  EventSource src;
  src.op = 'u';
  src.commit_us = 1700000000123456;
  src.position = "0/16B3748";
  src.commit = "0123456789abcdef";
  ASSERT_TRUE(e.Row(b, 0, src, 42, &value).ok());
  Json j = Json::parse(value);
  EXPECT_TRUE(j["before"].is_null());
  EXPECT_EQ(j["after"], Json::parse(R"({"id":7,"Note \"x\"":"hi","day":null})"));
  EXPECT_EQ(j["op"], "u");
  EXPECT_EQ(j["source"]["pipeline"], "shop");
  EXPECT_EQ(j["source"]["table"], "public.orders");
  EXPECT_EQ(j["source"]["position"], "0/16B3748");
  EXPECT_EQ(j["source"]["ts_ms"], 1700000000123);
  EXPECT_EQ(j["source"]["ts_us"], 1700000000123456);
  EXPECT_EQ(j["source"]["snapshot"], false);
  EXPECT_EQ(j["source"]["commit"], "0123456789abcdef");
  EXPECT_EQ(j["ts_ms"], 42);

  src.commit_us = -1500;  // before 1970: milliseconds round down
  ASSERT_TRUE(e.Delete(b, 0, src, 43, &value).ok());
  j = Json::parse(value);
  EXPECT_EQ(j["before"], Json::parse(R"({"id":7})"));
  EXPECT_TRUE(j["after"].is_null());
  EXPECT_EQ(j["op"], "d");
  EXPECT_EQ(j["source"]["ts_ms"], -2);

  EventSource load;
  load.snapshot = true;
  ASSERT_TRUE(e.Row(b, 0, load, 44, &value).ok());
  j = Json::parse(value);
  EXPECT_EQ(j["op"], "r");
  EXPECT_TRUE(j["source"]["position"].is_null());
  EXPECT_TRUE(j["source"]["ts_ms"].is_null());
  EXPECT_EQ(j["source"]["snapshot"], true);
}

TEST(KafkaEventTest, FlatRowsAndDeletesAndKeylessTables) {
  auto schema = OrdersSchema();
  EventEncoder e(schema, Format::kFlat, "shop", "orders");
  Batch b = OrdersBatch(schema);
  std::string value;
  EventSource src;
  src.op = 'c';
  src.commit = "00ff";
  ASSERT_TRUE(e.Row(b, 0, src, 1, &value).ok());
  EXPECT_EQ(Json::parse(value),
            Json::parse(R"({"id":7,"Note \"x\"":"hi","day":null,"__op":"c","__deleted":false,
                            "__commit":"00ff"})"));
  ASSERT_TRUE(e.Delete(b, 0, src, 1, &value).ok());
  EXPECT_EQ(Json::parse(value),
            Json::parse(R"({"id":7,"__op":"d","__deleted":true,"__commit":"00ff"})"));

  auto keyless = std::make_shared<Schema>(*schema);
  keyless->identifier_field_ids.clear();
  EventEncoder k(keyless, Format::kEnvelope, "shop", "orders");
  EXPECT_FALSE(k.keyed());
  std::string key = "stale";
  ASSERT_TRUE(k.Key(b, 0, &key).ok());
  EXPECT_TRUE(key.empty());
}

TEST(KafkaEventTest, TextThatIsNotUtf8NamesTheColumn) {
  auto schema = OrdersSchema();
  EventEncoder e(schema, Format::kEnvelope, "shop", "orders");
  Batch b(schema);
  b.column(0).AppendInt64(1);
  b.column(1).AppendBytes("\xc3(");
  b.column(2).AppendNull();
  std::string value;
  Status s = e.Row(b, 0, EventSource(), 1, &value);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Note \"x\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("UTF-8"), std::string::npos);
}

}  // namespace
}  // namespace ferry::sink::kafka
