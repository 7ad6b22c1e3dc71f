// /metrics as a Prometheus server reads it: accepted by promtool's linter, with the standard
// process_* series and kvgate_build_info, request-time buckets that reach the request timeout,
// and the same text on a listener of its own (--prometheus-port).
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "app/gateway_fixture.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "support/ports.h"

namespace kvgate::app {
namespace {

using MetricsExpositionTest = GatewayTest;

// promtool's verdict on `text` ("" when it accepts it).
std::string promtool_check(const std::string& text) {
  if (std::system("command -v promtool > /dev/null") != 0) {
    return "promtool is not installed (make setup installs Debian's prometheus package)";
  }
  const std::string in = ::testing::TempDir() + "kvgate-metrics.txt";
  const std::string out = in + ".out";
  std::ofstream(in) << text;
  const int rc = std::system(("promtool check metrics < " + in + " > " + out + " 2>&1").c_str());
  std::stringstream said;
  said << std::ifstream(out).rdbuf();
  std::remove(in.c_str());
  std::remove(out.c_str());
  return rc == 0 ? "" : "promtool: " + said.str();
}

TEST_F(MetricsExpositionTest, PromtoolAcceptsItAndTheStandardSeriesAreThere) {
  const uint16_t metrics_port = kvgate::testing::free_port();
  ASSERT_TRUE(start(1, [&](GatewayConfig& c) { c.prometheus_port = metrics_port; }));
  EXPECT_EQ(gateway_->metrics_port(), metrics_port);
  auto c = client();
  auto r = c.post("/v1/completions", completion("hello metrics", 4));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200u);
  auto main_port = c.get("/metrics");
  ASSERT_TRUE(main_port.ok());
  ASSERT_EQ(main_port->status, 200u);
  const std::string& text = main_port->body;
  EXPECT_EQ(promtool_check(text), "");

  EXPECT_GT(metric_value(text, "process_resident_memory_bytes"), 1e6);
  EXPECT_GT(metric_value(text, "process_open_fds"), 3);
  EXPECT_GT(metric_value(text, "process_max_fds"), 3);
  EXPECT_GE(metric_value(text, "process_cpu_seconds_total"), 0);
  EXPECT_GT(metric_value(text, "process_start_time_seconds"), 1.7e9);
  EXPECT_NE(text.find("kvgate_build_info{"), std::string::npos);
  EXPECT_NE(text.find(std::string("version=\"") + kVersion + "\""), std::string::npos);
  // A slow answer lands in a bucket, not in +Inf: the buckets reach the request timeout.
  EXPECT_NE(text.find("kvgate_request_duration_seconds_bucket{route=\"completions\",le=\"600\"}"),
            std::string::npos);

  http::SyncClient own("127.0.0.1", metrics_port);
  auto scraped = own.get("/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_EQ(scraped->status, 200u);
  EXPECT_EQ(promtool_check(scraped->body), "");
  EXPECT_NE(scraped->body.find("kvgate_requests_total{route=\"completions\",status=\"2xx\"} 1"),
            std::string::npos);
  auto other = own.get("/v1/models");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 404u) << "the metrics listener serves /metrics only";
}

}  // namespace
}  // namespace kvgate::app
