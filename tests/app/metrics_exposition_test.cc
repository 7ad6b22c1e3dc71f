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
  // A request is counted as it ends, just after its answer has left: the scrape waits for it.
  const std::string counted =
      "kvgate_requests_total{model=\"mock-8b\",route=\"completions\",status=\"2xx\"} 1";
  std::string seen = scraped->body;
  EXPECT_TRUE(wait_until(
      [&] {
        if (seen.find(counted) != std::string::npos) return true;
        auto again = own.get("/metrics");
        seen = again.ok() ? again->body : "";
        return false;
      },
      std::chrono::milliseconds(5000), std::chrono::milliseconds(20)))
      << seen.substr(std::min(seen.size(), seen.find("kvgate_requests_total")), 1200);
  auto other = own.get("/v1/models");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 404u) << "the metrics listener serves /metrics only";
}

// What a fleet costs a Prometheus server: at 16 workers, after streamed requests on every one (KV
// events applied, cache agreement and prefill rates learned), each worker names itself in at most
// 20 series, and the text still passes promtool.
TEST_F(MetricsExpositionTest, AWorkerHasAtMostTwentySeries) {
  constexpr size_t kWorkers = 16;
  auto cfg = base_config();
  for (size_t i = 0; i < kWorkers; ++i) {
    start_worker();
    cfg.worker_urls.push_back(url_of(i));
  }
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(kWorkers));
  auto c = client();
  for (size_t i = 0; i < 2 * kWorkers; ++i) {
    auto r = c.post("/v1/completions",
                    completion("series " + std::to_string(i) + " of a sixteen worker fleet", 4,
                               /*stream=*/true));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u) << r->body;
  }
  const auto fleet = gateway_->registry().snapshot();
  ASSERT_TRUE(wait_until([&] {
    size_t indexed = 0;
    for (const auto& w : fleet->workers) indexed += w->index_blocks() > 0 ? 1 : 0;
    return indexed >= kWorkers / 2;
  })) << "events from most workers applied";
  const std::string text = gateway_->metrics_text();
  EXPECT_EQ(promtool_check(text), "");
  for (size_t i = 0; i < kWorkers; ++i) {
    const std::string label = "worker=\"" + url_of(i) + "\"";
    size_t series = 0;
    std::string named;
    for (size_t at = 0; at < text.size();) {
      const size_t eol = std::min(text.find('\n', at), text.size());
      const std::string_view line(text.data() + at, eol - at);
      if (!line.empty() && line[0] != '#' && line.find(label) != std::string_view::npos) {
        ++series;
        named.append(line).append("\n");
      }
      at = eol + 1;
    }
    EXPECT_GT(series, 5u) << "the worker's series are there";
    EXPECT_LE(series, 20u) << named;
  }
}

}  // namespace
}  // namespace kvgate::app
