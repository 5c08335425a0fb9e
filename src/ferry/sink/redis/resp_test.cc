// The RESP2 encoder and parser, and Redis URLs, without a server.
#include "ferry/sink/redis/resp.h"

#include <gtest/gtest.h>

#include <string>

namespace ferry::sink::redis {
namespace {

using namespace std::string_literals;

// Parses all of `data` as one reply.
Reply ParseWhole(std::string_view data) {
  size_t pos = 0;
  auto r = ParseReply(data, &pos);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->has_value()) {
    ADD_FAILURE() << "incomplete";
    return Reply();
  }
  EXPECT_EQ(pos, data.size());
  return std::move(**r);
}

TEST(RespTest, EncodesCommandsAsArraysOfBinarySafeBulkStrings) {
  std::string out;
  AppendCommand({"SET", "k", "a\r\nb\0c"s}, &out);
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\na\r\nb\0c\r\n"s);
  out.clear();
  AppendCommand({"GET", ""}, &out);
  EXPECT_EQ(out, "*2\r\n$3\r\nGET\r\n$0\r\n\r\n");
  out.clear();
  AppendArrayHeader(3, &out);
  AppendBulk("HSET", &out);
  AppendBulk("h", &out);
  AppendBulk("ü", &out);
  EXPECT_EQ(out, "*3\r\n$4\r\nHSET\r\n$1\r\nh\r\n$2\r\nü\r\n");
}

TEST(RespTest, ParsesEveryReplyType) {
  Reply r = ParseWhole("+OK\r\n");
  EXPECT_TRUE(r.IsStatus("OK"));
  r = ParseWhole("-WRONGTYPE Operation against a key\r\n");
  EXPECT_TRUE(r.IsError());
  EXPECT_EQ(r.str, "WRONGTYPE Operation against a key");
  r = ParseWhole(":-9223372036854775808\r\n");
  EXPECT_EQ(r.type, Reply::Type::kInteger);
  EXPECT_EQ(r.integer, INT64_MIN);
  r = ParseWhole(":9223372036854775807\r\n");
  EXPECT_EQ(r.integer, INT64_MAX);
  r = ParseWhole("$-1\r\n");
  EXPECT_TRUE(r.IsNil());
  r = ParseWhole("*-1\r\n");
  EXPECT_TRUE(r.IsNil());
  r = ParseWhole("$0\r\n\r\n");
  EXPECT_EQ(r.type, Reply::Type::kBulk);
  EXPECT_EQ(r.str, "");
  r = ParseWhole("*0\r\n");
  EXPECT_EQ(r.type, Reply::Type::kArray);
  EXPECT_TRUE(r.elements.empty());
}

TEST(RespTest, BulkStringsAreBinarySafe) {
  const std::string value = "a\r\nb\0\xff\r\n"s;
  std::string wire = "$" + std::to_string(value.size()) + "\r\n" + value + "\r\n";
  Reply r = ParseWhole(wire);
  EXPECT_EQ(r.type, Reply::Type::kBulk);
  EXPECT_EQ(r.str, value);
}

TEST(RespTest, ParsesNestedArraysWithMixedElements) {
  // What EXEC and SCAN answer: arrays in arrays, nil and errors inside.
  Reply r =
      ParseWhole("*4\r\n:1\r\n*2\r\n$1\r\n0\r\n*2\r\n$3\r\na:b\r\n$0\r\n\r\n$-1\r\n-ERR x\r\n");
  ASSERT_EQ(r.elements.size(), 4u);
  EXPECT_EQ(r.elements[0].integer, 1);
  ASSERT_EQ(r.elements[1].elements.size(), 2u);
  EXPECT_EQ(r.elements[1].elements[0].str, "0");
  ASSERT_EQ(r.elements[1].elements[1].elements.size(), 2u);
  EXPECT_EQ(r.elements[1].elements[1].elements[0].str, "a:b");
  EXPECT_TRUE(r.elements[2].IsNil());
  EXPECT_TRUE(r.elements[3].IsError());
}

TEST(RespTest, ReadsSeveralRepliesFromOneBuffer) {
  std::string wire = "+QUEUED\r\n:3\r\n$2\r\nhi\r\n";
  size_t pos = 0;
  std::vector<Reply> got;
  for (;;) {
    auto r = ParseReply(wire, &pos);
    ASSERT_TRUE(r.ok());
    if (!r->has_value()) break;
    got.push_back(std::move(**r));
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(got[0].IsStatus("QUEUED"));
  EXPECT_EQ(got[1].integer, 3);
  EXPECT_EQ(got[2].str, "hi");
  EXPECT_EQ(pos, wire.size());
}

TEST(RespTest, TruncatedInputWaitsForMoreAtEveryByte) {
  const std::string wire = "*3\r\n$5\r\nab\r\nc\r\n*2\r\n:1\r\n$-1\r\n-ERR oops\r\n";
  for (size_t n = 0; n < wire.size(); ++n) {
    size_t pos = 0;
    auto r = ParseReply(std::string_view(wire).substr(0, n), &pos);
    ASSERT_TRUE(r.ok()) << "prefix of " << n << " bytes: " << r.status().ToString();
    EXPECT_FALSE(r->has_value()) << "prefix of " << n << " bytes parsed as complete";
    EXPECT_EQ(pos, 0u);
  }
  Reply r = ParseWhole(wire);
  ASSERT_EQ(r.elements.size(), 3u);
  EXPECT_EQ(r.elements[0].str, "ab\r\nc");
}

TEST(RespTest, MalformedInputIsCorruption) {
  for (std::string bad :
       {"HTTP/1.1 400 Bad Request\r\n"s, ":12a\r\n"s, "$3\r\nabcd\r\n"s, "$-2\r\n"s, "*-5\r\n"s,
        ":\r\n"s, ":-\r\n"s, ":99999999999999999999\r\n"s, "$99999999999999\r\n"s}) {
    size_t pos = 0;
    auto r = ParseReply(bad, &pos);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << bad;
  }
  // Too deeply nested arrays are refused, not recursed into without end.
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "*1\r\n";
  deep += ":1\r\n";
  size_t pos = 0;
  auto r = ParseReply(deep, &pos);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nested"), std::string::npos);
}

TEST(RespTest, ParsesRedisUrls) {
  auto e = ParseRedisUrl("redis://127.0.0.1:6380/3");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 6380);
  EXPECT_EQ(e->db, 3);
  EXPECT_EQ(e->password, "");
  e = ParseRedisUrl("redis://:p%40ss:w@example.com");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->host, "example.com");
  EXPECT_EQ(e->port, 6379);
  EXPECT_EQ(e->user, "");
  EXPECT_EQ(e->password, "p@ss:w");
  e = ParseRedisUrl("redis://alice:secret@[::1]:7000/");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->user, "alice");
  EXPECT_EQ(e->password, "secret");
  EXPECT_EQ(e->host, "::1");
  EXPECT_EQ(e->HostPort(), "[::1]:7000");
  for (const char* bad : {"http://h", "redis://", "redis://h:0", "redis://h:99999", "redis://h/x",
                          "redis://:s3cr3t@h:port", "redis://s3cr3t@h/x", "rediss://u:s3cr3t@h"}) {
    auto r = ParseRedisUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().find("s3cr3t"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(ParseRedisUrl("rediss://h").status().code(), StatusCode::kNotSupported);
}

TEST(RespTest, ErrorRepliesMapToCodesWithoutEchoingArguments) {
  Reply r;
  r.type = Reply::Type::kError;
  r.str = "WRONGPASS invalid username-password pair or user is disabled.";
  EXPECT_EQ(ErrorReplyStatus("AUTH", r, "Redis at h:1").code(), StatusCode::kPermissionDenied);
  r.str = "NOAUTH Authentication required.";
  EXPECT_EQ(ErrorReplyStatus("PING", r, "Redis at h:1").code(), StatusCode::kPermissionDenied);
  r.str = "LOADING Redis is loading the dataset in memory";
  EXPECT_EQ(ErrorReplyStatus("GET", r, "Redis at h:1").code(), StatusCode::kUnavailable);
  r.str = "MOVED 3999 127.0.0.1:6381";
  EXPECT_EQ(ErrorReplyStatus("GET", r, "Redis at h:1").code(), StatusCode::kNotSupported);
  r.str = "ERR unknown command 'SMISMEMBER', with args beginning with: 'secret-key' ";
  Status s = ErrorReplyStatus("SMISMEMBER", r, "Redis at h:1");
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message().find("secret-key"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("6.2"), std::string::npos) << s.message();
}

TEST(RespTest, ConnectionRefusedNamesTheAddressAndTheFix) {
  // A port nobody listens on: bind one, close it, connect.
  Endpoint e;
  e.host = "127.0.0.1";
  e.port = 1;  // privileged and unused in test environments
  e.password = "s3cr3t";
  auto c = Connection::Open(e, Timeouts{2000, 2000});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("127.0.0.1:1"), std::string::npos);
  EXPECT_NE(c.status().message().find("destination.url"), std::string::npos);
  EXPECT_EQ(c.status().message().find("s3cr3t"), std::string::npos);
}

}  // namespace
}  // namespace ferry::sink::redis
