// The Redis destination: text forms of values and keys without a server; the commit protocol
// against a real redis-server (started here when installed, skipped otherwise), also with the
// connection cut during EXEC by a proxy (the commit's outcome unknown to the client).
#include "ferry/sink/redis/redis_sink.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <thread>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/sink/redis/resp.h"
#include "ferry/sink/sink_testing.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::sink {
namespace {

using namespace std::string_literals;
using redis::AppendFromValueText;
using redis::AppendValueText;

// ---- values ----

std::string TextOf(const Column& c, size_t row) {
  std::string out;
  Status s = AppendValueText(c, row, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// Writes every value of `col` as text, reads the texts back into a column of the same type and
// compares the bytes of both columns' fixed buffers or values.
void ExpectRoundTrip(const Column& col) {
  Column back(col.type());
  for (size_t r = 0; r < col.size(); ++r) {
    if (!col.IsValid(r)) {
      back.AppendNull();
      continue;
    }
    const std::string text = TextOf(col, r);
    Status s = AppendFromValueText(text, &back);
    ASSERT_TRUE(s.ok()) << col.type().ToIceberg() << " '" << text << "': " << s.ToString();
    EXPECT_EQ(TextOf(back, r), text);
  }
  ASSERT_EQ(back.size(), col.size());
  const int w = col.type().FixedWidth();
  if (w > 0) {
    EXPECT_EQ(std::memcmp(back.fixed_data(), col.fixed_data(), col.size() * w), 0)
        << col.type().ToIceberg();
  }
}

TEST(RedisValueTextTest, FormsOfEveryType) {
  Column b(DataType::Boolean());
  b.AppendBool(true);
  b.AppendBool(false);
  EXPECT_EQ(TextOf(b, 0), "true");
  EXPECT_EQ(TextOf(b, 1), "false");
  ExpectRoundTrip(b);

  Column i(DataType::Int64());
  i.AppendInt64(std::numeric_limits<int64_t>::min());
  i.AppendInt64(std::numeric_limits<int64_t>::max());
  i.AppendInt64(0);
  EXPECT_EQ(TextOf(i, 0), "-9223372036854775808");
  ExpectRoundTrip(i);

  Column f(DataType::Float32());
  for (float v : {0.1f, -0.0f, 1e-45f, 3.4028235e38f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    f.AppendFloat(v);
  }
  EXPECT_EQ(TextOf(f, 0), "0.1");
  EXPECT_EQ(TextOf(f, 1), "-0");
  EXPECT_EQ(TextOf(f, 4), "Infinity");
  EXPECT_EQ(TextOf(f, 5), "NaN");
  ExpectRoundTrip(f);

  Column d(DataType::Float64());
  for (double v : {0.1, -0.0, 5e-324, 1.7976931348623157e308, 1e16, 123.0,
                   -std::numeric_limits<double>::infinity()}) {
    d.AppendDouble(v);
  }
  EXPECT_EQ(TextOf(d, 0), "0.1");
  EXPECT_EQ(TextOf(d, 6), "-Infinity");
  ExpectRoundTrip(d);

  Column dec(DataType::Decimal(38, 4));
  dec.AppendDecimal(-1);
  dec.AppendDecimal(Pow10(37) * 9);
  EXPECT_EQ(TextOf(dec, 0), "-0.0001");
  ExpectRoundTrip(dec);

  Column date(DataType::Date());
  date.AppendInt32(*ParseDateIso("+10000-01-01"));
  date.AppendInt32(*ParseDateIso("-0044-03-15"));
  date.AppendInt32(*ParseDateIso("2024-02-29"));
  EXPECT_EQ(TextOf(date, 0), "+10000-01-01");
  EXPECT_EQ(TextOf(date, 2), "2024-02-29");
  ExpectRoundTrip(date);

  Column time(DataType::Time());
  time.AppendInt64(86399999999);
  EXPECT_EQ(TextOf(time, 0), "23:59:59.999999");
  ExpectRoundTrip(time);

  Column ts(DataType::TimestampTz());
  ts.AppendInt64(1);
  EXPECT_EQ(TextOf(ts, 0), "1970-01-01 00:00:00.000001+00:00");
  ExpectRoundTrip(ts);
  Column tsn(DataType::Timestamp());
  tsn.AppendInt64(-1);
  EXPECT_EQ(TextOf(tsn, 0), "1969-12-31 23:59:59.999999");
  ExpectRoundTrip(tsn);

  Column u(DataType::Uuid());
  uint8_t bytes[16];
  ASSERT_TRUE(ParseUuid("123E4567-E89B-12D3-A456-426614174000", bytes).ok());
  u.AppendUuid(bytes);
  EXPECT_EQ(TextOf(u, 0), "123e4567-e89b-12d3-a456-426614174000");
  ExpectRoundTrip(u);

  Column bin(DataType::Binary());
  bin.AppendBytes("\0\xff\r\n"s);
  EXPECT_EQ(TextOf(bin, 0), "\0\xff\r\n"s);
  ExpectRoundTrip(bin);
}

TEST(RedisValueTextTest, ListsAreJsonArrays) {
  Column l(DataType::List(DataType::Float32(), false));
  l.list_child().AppendFloat(0.1f);
  l.list_child().AppendNull();
  l.list_child().AppendFloat(std::numeric_limits<float>::quiet_NaN());
  l.AppendListEnd();
  l.AppendListEnd();  // empty
  l.AppendNull();
  EXPECT_EQ(TextOf(l, 0), "[0.1,null,\"NaN\"]");
  EXPECT_EQ(TextOf(l, 1), "[]");
  Column back(l.type());
  ASSERT_TRUE(AppendFromValueText(TextOf(l, 0), &back).ok());
  ASSERT_TRUE(AppendFromValueText(TextOf(l, 1), &back).ok());
  EXPECT_EQ(TextOf(back, 0), TextOf(l, 0));
  EXPECT_EQ(back.list_child().values<float>()[0], 0.1f);

  Column bl(DataType::List(DataType::Binary(), false));
  bl.list_child().AppendBytes("\0\x01"s);
  bl.AppendListEnd();
  EXPECT_EQ(TextOf(bl, 0), "[\"AAE=\"]");
  Column dl(DataType::List(DataType::Date(), true));
  dl.list_child().AppendInt32(0);
  dl.AppendListEnd();
  EXPECT_EQ(TextOf(dl, 0), "[\"1970-01-01\"]");
  ExpectRoundTrip(dl);
  // A bad element leaves the column as it was.
  Column il(DataType::List(DataType::Int32(), false));
  EXPECT_FALSE(AppendFromValueText("[1, 2, \"x\"]", &il).ok());
  EXPECT_EQ(il.size(), 0u);
  EXPECT_EQ(il.list_child().size(), 0u);
}

TEST(RedisValueTextTest, TextsThatAreNotValuesAreRefused) {
  auto refused = [](DataType t, std::string_view text) {
    Column c(t);
    return !AppendFromValueText(text, &c).ok() && c.size() == 0;
  };
  EXPECT_TRUE(refused(DataType::Boolean(), "1"));
  EXPECT_TRUE(refused(DataType::Int64(), "1.5"));
  EXPECT_TRUE(refused(DataType::Int64(), "+1"));
  EXPECT_TRUE(refused(DataType::Int64(), ""));
  EXPECT_TRUE(refused(DataType::Int32(), "2147483648"));
  EXPECT_TRUE(refused(DataType::Float64(), "inf"));
  EXPECT_TRUE(refused(DataType::Float64(), "1.0x"));
  EXPECT_TRUE(refused(DataType::Decimal(5, 2), "1.234"));
  EXPECT_TRUE(refused(DataType::Date(), "2023-02-29"));
  EXPECT_TRUE(refused(DataType::TimestampTz(), "yesterday"));
  EXPECT_TRUE(refused(DataType::Uuid(), "123"));
  EXPECT_TRUE(refused(DataType::List(DataType::Int64(), false), "{}"));
}

TEST(RedisKeysTest, PartsAndPatternsEscape) {
  EXPECT_EQ(redis::EscapeKeyPart("a:b\\c"), "a\\:b\\\\c");
  EXPECT_EQ(redis::EscapeKeyPart("plain"), "plain");
  EXPECT_EQ(redis::EscapeGlob("t*?[x]\\:"), "t\\*\\?\\[x\\]\\\\:");
}

// ---- against a server ----

using testing::F;
using testing::Rows;

// (id long key, name string)
std::shared_ptr<const Schema> KeyedSchema() {
  auto s = std::make_shared<Schema>();
  s->fields = {F(1, "id", DataType::Int64(), true), F(2, "name", DataType::String())};
  s->identifier_field_ids = {1};
  return s;
}

int FreePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// redis-server on 127.0.0.1 at a free port, as a child process, for the whole test suite.
class RedisServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";
  static bool Installed() { return ::access(kBinary, X_OK) == 0; }

  RedisServer() : port_(FreePort()) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      const std::string log = dir_.File("redis.log");
      ::execl(kBinary, kBinary, "--bind", "127.0.0.1", "--port", port.c_str(), "--save", "",
              "--appendonly", "no", "--dir", dir_.path().c_str(), "--requirepass", "pw:secret",
              "--logfile", log.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready when it answers PING.
    for (int i = 0; i < 200; ++i) {
      auto c = redis::Connection::Open(MakeEndpoint(), redis::Timeouts{1000, 1000});
      if (c.ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ADD_FAILURE() << "redis-server did not answer on port " << port_;
  }
  ~RedisServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  redis::Endpoint MakeEndpoint(int port = 0) const {
    redis::Endpoint e;
    e.host = "127.0.0.1";
    e.port = port ? port : port_;
    e.password = "pw:secret";
    return e;
  }
  std::string Url(int port = 0) const {
    return "redis://:pw%3Asecret@127.0.0.1:" + std::to_string(port ? port : port_);
  }
  int port() const { return port_; }

 private:
  testing::TempDir dir_;
  int port_;
  pid_t pid_ = -1;
};

// A TCP relay in front of the server that can cut one connection at EXEC: before passing EXEC
// on (nothing ran), or after the server answered it (it ran; the client never learns).
class ExecCutter {
 public:
  enum class Mode { kPass, kCutBeforeExec, kCutAfterExec };

  explicit ExecCutter(int server_port) : server_port_(server_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(listen_, 16);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~ExecCutter() {
    stop_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    ::close(listen_);
    acceptor_.join();
    for (auto& t : relays_) t.join();
  }
  int port() const { return port_; }
  void Arm(Mode m) { mode_ = m; }
  int cuts() const { return cuts_; }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{listen_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      int client = ::accept(listen_, nullptr, nullptr);
      if (client < 0) continue;
      int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(server_port_));
      if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(client);
        ::close(server);
        continue;
      }
      relays_.emplace_back([this, client, server] { Relay(client, server); });
    }
  }

  void Relay(int client, int server) {
    const std::string exec = "*1\r\n$4\r\nEXEC\r\n";
    char buf[65536];
    bool open = true;
    while (open && !stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 100) <= 0) continue;
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::recv(client, buf, sizeof buf, 0);
        if (n <= 0) break;
        std::string_view data(buf, static_cast<size_t>(n));
        Mode m = mode_;
        if (m != Mode::kPass && data.find(exec) != std::string_view::npos) {
          mode_ = Mode::kPass;
          ++cuts_;
          if (m == Mode::kCutAfterExec) {
            (void)::send(server, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
            (void)::recv(server, buf, sizeof buf, 0);  // the server's answer, dropped
          }
          break;
        }
        if (::send(server, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::recv(server, buf, sizeof buf, 0);
        if (n <= 0) break;
        if (::send(client, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
    }
    ::close(client);
    ::close(server);
  }

  int server_port_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<int> cuts_{0};
  std::thread acceptor_;
  std::vector<std::thread> relays_;
};

class RedisSinkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (RedisServer::Installed()) server_ = new RedisServer();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_ == nullptr) GTEST_SKIP() << "redis-server is not installed";
    auto c = redis::Connection::Open(server_->MakeEndpoint());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    conn_ = std::move(*c);
    ASSERT_TRUE(conn_->Command({"FLUSHALL"}).ok());
  }

  std::unique_ptr<Sink> Open(const std::string& pipeline = "p", int port = 0,
                             const std::string& prefix = "t") {
    config::DestinationConfig cfg;
    cfg.type = "redis";
    cfg.options = config::Options("destination", "/");
    cfg.options.Set("url", server_->Url(port), 1);
    cfg.options.Set("prefix", prefix, 2);
    auto s = OpenRedisSink(cfg, pipeline);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // The hash at `key` as field -> value.
  std::map<std::string, std::string> Hash(const std::string& key) {
    auto r = conn_->Command({"HGETALL", key});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::map<std::string, std::string> out;
    for (size_t i = 0; r.ok() && i + 1 < r->elements.size(); i += 2) {
      out[r->elements[i].str] = r->elements[i + 1].str;
    }
    return out;
  }
  std::vector<std::string> Keys(const std::string& pattern) {
    auto r = conn_->Command({"KEYS", pattern});
    EXPECT_TRUE(r.ok());
    std::vector<std::string> out;
    for (auto& e : r->elements) out.push_back(e.str);
    std::sort(out.begin(), out.end());
    return out;
  }
  // Every row the reader returns, as "id=name".
  std::vector<std::string> ReadBack(Sink* sink, const std::string& stream) {
    auto reader = sink->OpenReader(stream);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    std::vector<std::string> out;
    if (!reader.ok() || !*reader) return out;
    Status s = (*reader)->Read([&](const Batch& b) {
      for (size_t r = 0; r < b.num_rows(); ++r) {
        out.push_back(std::to_string(b.column(0).values<int64_t>()[r]) + "=" +
                      (b.column(1).IsValid(r) ? std::string(b.column(1).GetBytes(r)) : "NULL"));
      }
      return Status::OK();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::sort(out.begin(), out.end());
    return out;
  }

  static RedisServer* server_;
  std::unique_ptr<redis::Connection> conn_;
};

RedisServer* RedisSinkTest::server_ = nullptr;

MarkerCheck PositionAtLeast(int64_t p) {
  return [p](const Json& m) { return m.is_object() && m.value("position", -1) >= p; };
}

TEST_F(RedisSinkTest, ChangesLandOnceWithTheirCheckpoint) {
  auto sink = Open();
  ASSERT_TRUE(sink);
  EXPECT_EQ(sink->Describe(),
            "Redis at 127.0.0.1:" + std::to_string(server_->port()) + " db 0, prefix t");
  EXPECT_EQ(sink->Describe().find("secret"), std::string::npos);
  auto schema = KeyedSchema();
  auto st = sink->OpenStream("odd:name", *schema, false);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto& out = **st;
  EXPECT_TRUE(out.Marker().is_null());
  ASSERT_TRUE(out.WriteUpserts(Rows(schema, {{1, "a"}, {2, "NULL"}, {3, "c"}})).ok());
  auto r = out.Commit("", Json{{"position", 10}}, {}, PositionAtLeast(10));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->already_landed);
  EXPECT_EQ(Hash("t:odd\\:name:1"),
            (std::map<std::string, std::string>{{"id", "1"}, {"name", "a"}}));
  EXPECT_EQ(Hash("t:odd\\:name:2"), (std::map<std::string, std::string>{{"id", "2"}}));
  EXPECT_EQ(*sink->ReadMarker("odd:name"), (Json{{"position", 10}}));

  // The same changes again (a replay after a crash): the marker says they landed.
  ASSERT_TRUE(out.WriteUpserts(Rows(schema, {{1, "changed"}})).ok());
  r = out.Commit("", Json{{"position", 10}}, {}, PositionAtLeast(10));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->already_landed);
  EXPECT_EQ(Hash("t:odd\\:name:1")["name"], "a");
  EXPECT_FALSE(out.HasPending());

  // An upsert replaces the whole row; a delete removes it.
  ASSERT_TRUE(out.WriteUpserts(Rows(schema, {{3, "NULL"}})).ok());
  ASSERT_TRUE(out.WriteDeleteKeys(Rows(schema, {{1, "NULL"}})).ok());
  ASSERT_TRUE(out.Commit("", Json{{"position", 20}}, {}, PositionAtLeast(20)).ok());
  EXPECT_EQ(ReadBack(sink.get(), "odd:name"), (std::vector<std::string>{"2=NULL", "3=NULL"}));
  EXPECT_EQ(out.totals().rows, 4u);
  EXPECT_EQ(sink->OpenReader("missing").value(), nullptr);
}

TEST_F(RedisSinkTest, CompositeKeysEscapeTheirParts) {
  auto sink = Open();
  auto schema = std::make_shared<Schema>();
  schema->fields = {F(1, "a", DataType::String(), true), F(2, "b", DataType::Int64(), true)};
  schema->identifier_field_ids = {1, 2};
  auto st = sink->OpenStream("c", *schema, false);
  ASSERT_TRUE(st.ok());
  Batch b(schema);
  b.column(0).AppendBytes("x:y\\z");
  b.column(1).AppendInt64(-5);
  ASSERT_TRUE((*st)->WriteUpserts(b).ok());
  ASSERT_TRUE((*st)->Commit("", Json{{"position", 1}}, {}, PositionAtLeast(1)).ok());
  EXPECT_EQ(Keys("t:c:*"), (std::vector<std::string>{"t:c:x\\:y\\\\z:-5"}));
}

TEST_F(RedisSinkTest, LoadsReplaceRowsAndPublishDropsTheRest) {
  auto sink = Open();
  auto schema = KeyedSchema();
  // A neighbouring table whose name starts like this one's: never touched by its publish.
  auto other = sink->OpenStream("t:x", *schema, false);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->WriteUpserts(Rows(schema, {{7, "other"}})).ok());
  ASSERT_TRUE((*other)->Commit("", Json{{"position", 1}}, {}, PositionAtLeast(1)).ok());

  auto st = sink->OpenStream("t", *schema, true);
  ASSERT_TRUE(st.ok());
  auto& out = **st;
  auto chunk = [](int n) {
    return [n](const Json& m) { return m.is_object() && m.value("chunk", -1) >= n; };
  };
  ASSERT_TRUE(out.StartLoad("run1").ok());
  ASSERT_TRUE(out.Write(Rows(schema, {{1, "a"}, {2, "b"}, {3, "c"}})).ok());
  ASSERT_TRUE(out.Commit("run1", Json{{"chunk", 1}}, {}, chunk(1)).ok());
  ASSERT_TRUE(out.Publish("run1", Json{{"chunk", 2}}, chunk(2)).ok());
  EXPECT_EQ(ReadBack(sink.get(), "t"), (std::vector<std::string>{"1=a", "2=b", "3=c"}));

  // A second load (a crashed run left its set behind) without row 2.
  ASSERT_TRUE(out.StartLoad("run2").ok());
  ASSERT_TRUE(out.Write(Rows(schema, {{1, "a2"}})).ok());
  ASSERT_TRUE(out.Commit("run2", Json{{"chunk", 3}}, {}, chunk(3)).ok());
  EXPECT_EQ(Keys("t:ferry_load*").size(), 2u);  // the set and the run list
  ASSERT_TRUE(out.StartLoad("run3").ok());      // run2 abandoned: its set goes
  EXPECT_EQ(Keys("t:ferry_load:*"), std::vector<std::string>{});
  ASSERT_TRUE(out.Write(Rows(schema, {{1, "a3"}, {3, "c3"}})).ok());
  ASSERT_TRUE(out.Commit("run3", Json{{"chunk", 4}}, {}, chunk(4)).ok());
  // Mid-load, rows are replaced in place and row 2 is still there.
  EXPECT_EQ(ReadBack(sink.get(), "t"), (std::vector<std::string>{"1=a3", "2=b", "3=c3"}));
  ASSERT_TRUE(out.Publish("run3", Json{{"chunk", 5}}, chunk(5)).ok());
  EXPECT_EQ(ReadBack(sink.get(), "t"), (std::vector<std::string>{"1=a3", "3=c3"}));
  EXPECT_EQ(ReadBack(sink.get(), "t:x"), (std::vector<std::string>{"7=other"}));
  EXPECT_EQ(Keys("t:ferry_load*"), std::vector<std::string>{});
  // Publishing again is recognised from the marker.
  auto again = out.Publish("run3", Json{{"chunk", 5}}, chunk(5));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_landed);
}

TEST_F(RedisSinkTest, RefusesWhatCannotBeWritten) {
  auto sink = Open();
  auto keyless = std::make_shared<Schema>(*KeyedSchema());
  keyless->identifier_field_ids.clear();
  auto st = sink->OpenStream("k", *keyless, true);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("primary_key"), std::string::npos);
  EXPECT_FALSE(sink->OpenStream("ferry_state", *KeyedSchema(), false).ok());

  // Another pipeline's table.
  auto schema = KeyedSchema();
  auto mine = sink->OpenStream("owned", *schema, false);
  ASSERT_TRUE(mine.ok());
  ASSERT_TRUE((*mine)->Commit("", Json{{"position", 1}}, {}, PositionAtLeast(1)).ok());
  auto theirs = Open("q")->OpenStream("owned", *schema, false);
  ASSERT_FALSE(theirs.ok());
  EXPECT_NE(theirs.status().message().find("pipeline 'p'"), std::string::npos);

  // A key or type change of a table that is not replaced.
  auto changed = std::make_shared<Schema>(*schema);
  changed->fields[1].type = DataType::Int64();
  auto evolved = sink->OpenStream("owned", *changed, false);
  ASSERT_FALSE(evolved.ok());
  EXPECT_NE(evolved.status().message().find("full refresh"), std::string::npos);
  EXPECT_TRUE(sink->OpenStream("owned", *changed, true).ok());
  auto wider = std::make_shared<Schema>(*schema);
  wider->fields.push_back(F(3, "extra", DataType::Int32()));
  EXPECT_TRUE(sink->OpenStream("owned", *wider, false).ok());

  // A wrong password: refused, without the password in the message.
  config::DestinationConfig cfg;
  cfg.type = "redis";
  cfg.options = config::Options("destination", "/");
  cfg.options.Set("url", "redis://:wr0ng-pass@127.0.0.1:" + std::to_string(server_->port()), 1);
  auto bad = OpenRedisSink(cfg, "p");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(bad.status().message().find("wr0ng-pass"), std::string::npos);
}

TEST_F(RedisSinkTest, ColumnTypesEvolveByTheOneRuleOfEveryDestination) {
  auto sink = Open();
  ASSERT_TRUE(sink);
  testing::ExpectColumnTypesEvolveByTheRule(*sink, "rule");
}

TEST_F(RedisSinkTest, AFieldThatDoesNotParseIsCorruptionNamingKeyAndField) {
  auto sink = Open();
  auto schema = KeyedSchema();
  auto st = sink->OpenStream("s", *schema, false);
  ASSERT_TRUE((*st)->WriteUpserts(Rows(schema, {{1, "a"}})).ok());
  ASSERT_TRUE((*st)->Commit("", Json{{"position", 1}}, {}, PositionAtLeast(1)).ok());
  ASSERT_TRUE(conn_->Command({"HSET", "t:s:1", "id", "one"}).ok());
  auto reader = sink->OpenReader("s");
  ASSERT_TRUE(reader.ok() && *reader);
  Status s = (*reader)->Read([](const Batch&) { return Status::OK(); });
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("t:s:1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'id'"), std::string::npos) << s.message();
}

TEST_F(RedisSinkTest, AConnectionCutDuringExecIsSettledByTheCheckpoint) {
  ExecCutter cutter(server_->port());
  auto sink = Open("p", cutter.port());
  ASSERT_TRUE(sink);
  auto schema = KeyedSchema();
  auto st = sink->OpenStream("cut", *schema, false);
  ASSERT_TRUE(st.ok());
  auto& out = **st;

  // Cut before EXEC reaches the server: nothing ran, the commit is retryable.
  cutter.Arm(ExecCutter::Mode::kCutBeforeExec);
  ASSERT_TRUE(out.WriteUpserts(Rows(schema, {{1, "a"}})).ok());
  auto r = out.Commit("", Json{{"position", 1}}, {}, PositionAtLeast(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(cutter.cuts(), 1);
  EXPECT_EQ(Keys("t:cut:*"), std::vector<std::string>{});
  EXPECT_TRUE(sink->ReadMarker("cut")->is_null());
  // The engine's retry: the rows again, committed once.
  out.DiscardPending();
  ASSERT_TRUE(out.WriteUpserts(Rows(schema, {{1, "a"}})).ok());
  r = out.Commit("", Json{{"position", 1}}, {}, PositionAtLeast(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->already_landed);

  // Cut after the server ran EXEC: the client reads the checkpoint back and knows it landed.
  cutter.Arm(ExecCutter::Mode::kCutAfterExec);
  ASSERT_TRUE(out.WriteUpserts(Rows(schema, {{2, "b"}})).ok());
  r = out.Commit("", Json{{"position", 2}}, {}, PositionAtLeast(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(cutter.cuts(), 2);
  EXPECT_EQ(*sink->ReadMarker("cut"), (Json{{"position", 2}}));
  EXPECT_EQ(ReadBack(sink.get(), "cut"), (std::vector<std::string>{"1=a", "2=b"}));
}

TEST_F(RedisSinkTest, ExecRetriesWhenAnotherWriterMovesTheCheckpoint) {
  auto sink = Open();
  auto schema = KeyedSchema();
  auto st = sink->OpenStream("w", *schema, false);
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE((*st)->WriteUpserts(Rows(schema, {{1, "a"}})).ok());
  // The check runs between WATCH and EXEC: another client changes the checkpoint the first time.
  int calls = 0;
  auto landed = [&](const Json& m) {
    if (calls++ == 0) {
      EXPECT_TRUE(conn_->Command({"SET", "t:ferry_state:p:w", "{\"position\":0}"}).ok());
    }
    return m.is_object() && m.value("position", -1) >= 5;
  };
  auto r = (*st)->Commit("", Json{{"position", 5}}, {}, landed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->already_landed);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(*sink->ReadMarker("w"), (Json{{"position", 5}}));
  EXPECT_EQ(Hash("t:w:1")["name"], "a");
}

}  // namespace
}  // namespace ferry::sink
