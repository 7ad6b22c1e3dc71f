// The gateway against real mock workers on loopback: cache-aware routing checked against the
// workers' engine truth, spreading, failover, clients that leave, and workers added at run time.
#include <simdjson.h>

#include <atomic>
#include <map>
#include <set>

#include "app/gateway_fixture.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/tokenizer.h"

namespace kvgate::app {
namespace {

std::string worker_header(const http::ClientResponse& r) {
  return std::string(r.header("x-kvgate-worker"));
}

std::set<uint64_t> truth_seq_hashes(uint16_t port) {
  http::SyncClient c("127.0.0.1", port);
  auto r = c.get("/admin/truth");
  std::set<uint64_t> out;
  if (!r.ok()) return out;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (p.parse(r->body).get(doc) != simdjson::SUCCESS) return out;
  for (auto rank : doc["ranks"].get_array()) {
    for (auto b : rank["tiers"]["GPU"].get_array()) out.insert(b["seq_hash"].get_uint64().value());
  }
  return out;
}

std::string long_prefix(int variant) {
  std::string s = "System prompt " + std::to_string(variant) + ": you are a careful assistant. ";
  while (s.size() < 3000) s += "Answer briefly and cite the documents you were given. ";
  return s;
}

TEST_F(GatewayTest, RepeatedPrefixRequestsLandOnTheWorkerHoldingIt) {
  for (int i = 0; i < 3; ++i) start_worker();
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0), url_of(1), url_of(2)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(3));
  auto c = client();
  const std::string prefix = long_prefix(1);
  auto first = c.post("/v1/completions", completion(prefix + "question zero"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->status, 200u) << first->body;
  const std::string holder = worker_header(*first);
  ASSERT_FALSE(holder.empty());
  // The prefix's blocks as the router names them; wait until the gateway's index has them.
  std::vector<TokenId> tokens = TestTokenizer().encode(prefix);
  std::vector<SeqHash> chain;
  BlockHasher().hash_blocks(tokens, 16, nullptr, &chain);
  ASSERT_GT(chain.size(), 20u);
  std::vector<index::HolderMatch> matches;
  ASSERT_TRUE(wait_until(
      [&] {
        gateway_->index().lookup(chain, matches);
        return !matches.empty() && matches[0].any_depth == chain.size();
      },
      std::chrono::milliseconds(5000)));
  for (int i = 1; i <= 10; ++i) {
    auto r = c.post("/v1/completions", completion(prefix + "question " + std::to_string(i)));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u);
    EXPECT_EQ(worker_header(*r), holder) << "request " << i;
    // The engine really had the prefix cached: usage and engine truth agree with the routing.
    EXPECT_GE(cached_tokens(r->body), chain.size() * 16);
  }
  size_t holder_index = 0;
  for (size_t i = 0; i < 3; ++i) {
    if (url_of(i) == holder) holder_index = i;
  }
  const auto truth = truth_seq_hashes(worker_port(holder_index));
  for (SeqHash s : chain)
    EXPECT_TRUE(truth.count(s)) << "block missing from the chosen worker's engine truth";
  for (size_t i = 0; i < 3; ++i) {
    if (i == holder_index) continue;
    EXPECT_EQ(truth_seq_hashes(worker_port(i)).count(chain[0]), 0u)
        << "another worker also computed the prefix";
  }
}

TEST_F(GatewayTest, FreshPrefixesSpreadOverIdleWorkers) {
  for (int i = 0; i < 4; ++i) start_worker();
  auto cfg = base_config();
  for (int i = 0; i < 4; ++i) cfg.worker_urls.push_back(url_of(i));
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(4));
  auto c = client();
  std::map<std::string, int> share;
  for (int i = 0; i < 40; ++i) {
    auto r = c.post("/v1/completions",
                    completion("fresh topic number " + std::to_string(i * 7919) + " tell me more"));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u);
    ++share[worker_header(*r)];
  }
  EXPECT_EQ(share.size(), 4u) << "every idle worker receives fresh prefixes";
}

TEST_F(GatewayTest, KilledWorkerIsRoutedAroundAndItsInFlightRequestsRetried) {
  start_worker(/*speedup=*/1);
  start_worker(/*speedup=*/1);
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0), url_of(1)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(2));
  const std::string victim = url_of(0);
  // Slow non-streamed requests (200 tokens each, ~1.5 s) on both workers; then kill worker 0.
  constexpr int kRequests = 8;
  std::atomic<int> ok{0}, from_victim{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      http::SyncClient c("127.0.0.1", gateway_->port(),
                         {.request_timeout = std::chrono::seconds(60)});
      auto r =
          c.post("/v1/completions", completion("slow request " + std::to_string(i * 104729), 200));
      if (r.ok() && r->status == 200) {
        ++ok;
        if (worker_header(*r) == victim) ++from_victim;
      }
    });
  }
  ASSERT_TRUE(
      wait_until([&] { return gateway_->registry().snapshot()->workers[0]->in_flight() > 0; },
                 std::chrono::milliseconds(5000)));
  fleets_[0]->stop();
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kRequests) << "every request answered despite the kill";
  EXPECT_EQ(from_victim.load(), 0) << "nothing was answered by the killed worker";
  const std::string metrics = gateway_->metrics_text();
  EXPECT_NE(metrics.find("kvgate_upstream_retries_total "), std::string::npos);
  EXPECT_EQ(metrics.find("kvgate_upstream_retries_total 0\n"), std::string::npos)
      << "in-flight requests were retried";
  // New requests go to the survivor.
  auto c = client();
  for (int i = 0; i < 5; ++i) {
    auto r = c.post("/v1/completions", completion("after the kill " + std::to_string(i)));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200u);
    EXPECT_EQ(worker_header(*r), url_of(1));
  }
}

TEST_F(GatewayTest, ClientThatLeavesAbortsItsNonStreamedRequestOnTheWorker) {
  start_worker(/*speedup=*/1);
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  // 2,000 output tokens: about 15 s of decoding at speedup 1, far longer than this test waits.
  const std::string body = completion("a question nobody waits for", 2000);
  {
    boost::asio::io_context ctx;
    boost::asio::ip::tcp::socket s(ctx);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), gateway_->port()});
    const std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    boost::asio::write(s, boost::asio::buffer(req));
    ASSERT_TRUE(
        wait_until([&] { return gateway_->registry().snapshot()->workers[0]->in_flight() > 0; },
                   std::chrono::milliseconds(5000)));
    s.close();
  }
  http::SyncClient worker("127.0.0.1", worker_port(0));
  std::string records;
  EXPECT_TRUE(wait_until(
      [&] {
        auto r = worker.get("/admin/requests");
        if (r.ok()) records = r->body;
        return records.find("\"status\":\"aborted\"") != std::string::npos;
      },
      std::chrono::milliseconds(5000)))
      << "the worker still runs the abandoned request: " << records;
  EXPECT_TRUE(
      wait_until([&] { return gateway_->registry().snapshot()->workers[0]->in_flight() == 0; },
                 std::chrono::milliseconds(2000)));
  const std::string metrics = gateway_->metrics_text();
  EXPECT_NE(metrics.find("kvgate_request_errors_total{reason=\"client_abort\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kvgate_upstream_retries_total 0\n"), std::string::npos)
      << "an abandoned request is not sent anywhere else";
  // The worker is not blamed: the next request is served by it.
  auto r = client().post("/v1/completions", completion("and now someone who waits"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u);
}

// The mock's /server_info says its KV pool (num_gpu_blocks, as SGLang's says
// max_total_num_tokens): the gateway passes it on with the subscription, and the chain index
// sizes the holder's record map for it on the holder's lane before any request (16-byte records
// at 4/5 load: 4 MB for 200,000 blocks), instead of rehashing it again and again as the cache
// fills.
TEST_F(GatewayTest, AnEnginesKvPoolSizesItsHolderInTheIndexAtDiscovery) {
  start_worker(20, 200'000);
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  EXPECT_TRUE(wait_until([&] { return gateway_->index().stats().bytes >= 200'000 * 20; },
                         std::chrono::milliseconds(10000)))
      << gateway_->index().stats().bytes;
  EXPECT_EQ(gateway_->index().stats().memberships, 0u) << "sized before any event";
  // Routing knows the pool too (the wait rule weighs what the queue ahead would evict).
  EXPECT_EQ(gateway_->registry().snapshot()->infos[0]->kv_blocks, 200'000u);
  EXPECT_EQ(gateway_->registry().snapshot()->routes[0].kv_tokens, 200'000u * 16);
}

TEST_F(GatewayTest, WorkerAddedAtRunTimeReceivesTraffic) {
  start_worker();
  auto cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  const std::string added = start_worker();
  auto c = client();
  std::string body;
  JsonWriter(&body).begin_object().member("url", added).end_object();
  auto r = c.post("/workers", body);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 201u) << r->body;
  auto dup = c.post("/workers", body);
  EXPECT_EQ(dup->status, 409u);
  ASSERT_TRUE(wait_routable(2));
  int to_added = 0;
  for (int i = 0; i < 40 && to_added == 0; ++i) {
    auto g =
        c.post("/v1/completions", completion("runtime worker check " + std::to_string(i * 31337)));
    ASSERT_TRUE(g.ok());
    to_added += worker_header(*g) == added ? 1 : 0;
  }
  EXPECT_GT(to_added, 0);
  // Removal leaves nothing behind: out of the registry, its holder gone from the index.
  auto del = c.request({.method = http::Verb::delete_, .target = "/workers?url=" + added});
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->status, 200u);
  EXPECT_EQ(gateway_->registry().snapshot()->workers.size(), 1u);
  EXPECT_EQ(gateway_->metrics_text().find(added), std::string::npos)
      << "its metric series are gone";
  for (int i = 0; i < 5; ++i) {
    auto g = c.post("/v1/completions", completion("after removal " + std::to_string(i)));
    EXPECT_EQ(worker_header(*g), url_of(0));
  }
}

}  // namespace
}  // namespace kvgate::app
