#include "ferry/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "ferry/metrics/server.h"

namespace ferry::metrics {
namespace {

// A GET of `path` on 127.0.0.1:port: the whole response, status line included.
std::string Get(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(MetricsTest, SeriesCarryTheirLabelsAndValuesInTheTextFormat) {
  Metrics& m = Metrics::Get();
  StreamSeries s = m.Stream("shop", "db1", "orders", "shop.orders");
  s.rows_read->Increment(42);
  s.rows_committed->Increment(40);
  s.load_chunks_planned->Set(10);
  TableSeries t = m.Table("shop", "shop.orders");
  t.Count(Checkpoint::kStarted);
  t.Count(Checkpoint::kCompleted);
  t.commit_seconds->Observe(0.02);
  // The same labels give the same series.
  m.Stream("shop", "db1", "orders", "shop.orders").rows_read->Increment(1);
  const std::string text = m.Text();
  EXPECT_NE(text.find("# TYPE ferry_rows_read_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("ferry_rows_read_total{pipeline=\"shop\",source=\"db1\",stream=\"orders\","
                      "table=\"shop.orders\"} 43"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ferry_checkpoints_total{outcome=\"completed\",pipeline=\"shop\","
                      "table=\"shop.orders\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ferry_commit_duration_seconds_bucket{pipeline=\"shop\",table=\"shop."
                      "orders\",le=\"0.025\"} 1"),
            std::string::npos)
      << text;
  // The process's own series.
  EXPECT_NE(text.find("process_resident_memory_bytes "), std::string::npos) << text;
  EXPECT_NE(text.find("process_cpu_seconds_total "), std::string::npos) << text;
}

TEST(MetricsServerTest, ServesMetricsHealthAndReadiness) {
  std::atomic<bool> ready{false};
  auto server = Server::Start("127.0.0.1:0", [&] {
    return ready.load() ? Readiness{true, ""} : Readiness{false, "no round has reached the source"};
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  Metrics::Get().Retries("served").Increment();
  std::string r = Get(port, "/metrics");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("text/plain; version=0.0.4"), std::string::npos) << r;
  EXPECT_NE(r.find("ferry_retries_total{pipeline=\"served\"} 1"), std::string::npos) << r;
  r = Get(port, "/healthz");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  r = Get(port, "/readyz");
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  EXPECT_NE(r.find("not ready: no round has reached the source"), std::string::npos) << r;
  ready = true;
  r = Get(port, "/readyz");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  r = Get(port, "/metrics/x");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
  r = Get(port, "/");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
}

TEST(MetricsServerTest, AnAddressInUseOrMalformedIsNamed) {
  auto first = Server::Start("127.0.0.1:0", [] { return Readiness{true, ""}; });
  ASSERT_TRUE(first.ok());
  const std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = Server::Start(taken, [] { return Readiness{true, ""}; });
  ASSERT_FALSE(second.ok());
  // What is wrong, in words: not civetweb's "null context when constructing CivetServer".
  EXPECT_NE(second.status().message().find(taken + " is in use"), std::string::npos)
      << second.status().ToString();
  EXPECT_EQ(second.status().message().find("null context"), std::string::npos)
      << second.status().ToString();
  auto bad = Server::Start("localhost", [] { return Readiness{true, ""}; });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("host:port"), std::string::npos);
}

}  // namespace
}  // namespace ferry::metrics
