// The mock over HTTP and ZMQ, in-process: the API shapes, usage, the load / info / metrics
// endpoints, and one test per fault hook showing its effect.
#include <random>
#include <set>

#include "kvgate/core/tokenizer.h"
#include "kvgate/http/sse.h"
#include "mock/fleet_fixture.h"
#include "support/sanitizer.h"

namespace kvgate::mock {
namespace {

using namespace testing;

std::vector<TokenId> prompt_ids(size_t n, uint32_t seed) {
  std::vector<TokenId> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = 300 + (seed * 7919 + i * 131) % 29000;
  return t;
}

std::string completion(const std::vector<TokenId>& ids, uint32_t max_tokens, bool stream = false) {
  return "{\"model\":\"mock-8b\",\"prompt\":" + ids_json(ids) +
         ",\"max_tokens\":" + std::to_string(max_tokens) + (stream ? ",\"stream\":true}" : "}");
}

uint64_t cached_tokens(const http::ClientResponse& r) {
  Json j(r.body);
  return j["usage"]["prompt_tokens_details"]["cached_tokens"].get_uint64();
}

class FleetTest : public ::testing::Test {
 protected:
  void start(FleetOptions o = small_fleet()) {
    auto f = Fleet::start(std::move(o));
    ASSERT_TRUE(f.ok()) << f.status();
    fleet_ = std::move(*f);
  }
  void TearDown() override {
    kv_.reset();
    if (fleet_) fleet_->stop();
  }
  uint16_t port(size_t worker = 0) { return fleet_->ports(worker).http; }
  // Subscribes to worker 0's ranks and waits until the SUBs receive (warm-up requests publish).
  void subscribe() {
    std::vector<std::string> eps;
    for (const auto& r : fleet_->ports(0).ranks) eps.push_back(r.pub_endpoint);
    kv_ = std::make_unique<KvCollector>(eps);
    Http h(port());
    uint32_t seed = 1000;
    ASSERT_TRUE(wait_until(
        [&] {
          for (uint32_t r = 0; r < eps.size(); ++r) {
            if (kv_->count(r) > 0) continue;
            h.post("/v1/completions",
                   "{\"prompt\":" + ids_json(prompt_ids(40, seed++)) +
                       ",\"max_tokens\":1,\"data_parallel_rank\":" + std::to_string(r) + "}");
            return false;
          }
          return true;
        },
        kFleetWait));
    for (size_t r = 0; r < eps.size(); ++r) wait_published(r);
  }
  // Waits until the SUB has every batch rank `rank` published so far.
  void wait_published(size_t rank = 0) {
    Http h(port());
    uint64_t next = Json(h.get("/admin/truth").body)["ranks"].at(rank)["next_seq"].get_uint64();
    ASSERT_TRUE(
        wait_until([&] { return kv_->count(rank) > 0 && last_seq(rank) + 1 >= next; }, kFleetWait));
  }
  uint64_t last_seq(size_t rank = 0) {
    auto m = kv_->messages(rank);
    return m.empty() ? 0 : m.back().seq;
  }

  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<KvCollector> kv_;
};

TEST_F(FleetTest, CompletionsUsageReportsTheCachedTokensThePoolHad) {
  start();
  Http h(port());
  auto ids = prompt_ids(100, 1);
  auto r = h.post("/v1/completions", completion(ids, 5));
  ASSERT_EQ(r.status, 200u) << r.body;
  Json j(r.body);
  EXPECT_EQ(j["object"].get_string().value(), "text_completion");
  EXPECT_EQ(j["usage"]["prompt_tokens"].get_uint64().value(), 100u);
  EXPECT_EQ(j["usage"]["completion_tokens"].get_uint64().value(), 5u);
  EXPECT_EQ(cached_tokens(r), 0u);
  // The same prompt again: every full block but the one holding the last token was cached.
  EXPECT_EQ(cached_tokens(h.post("/v1/completions", completion(ids, 5))), 96u);
  // A prompt sharing 50 tokens: 3 full blocks.
  auto other = ids;
  for (size_t i = 50; i < other.size(); ++i) other[i] = 7;
  EXPECT_EQ(cached_tokens(h.post("/v1/completions", completion(other, 5))), 48u);
  // Text prompts use the shared test tokenizer.
  auto t = h.post("/v1/completions", "{\"prompt\":\"hello mock engine\",\"max_tokens\":2}");
  ASSERT_EQ(t.status, 200u);
  EXPECT_EQ(Json(t.body)["usage"]["prompt_tokens"].get_uint64().value(),
            TestTokenizer().encode("hello mock engine").size());
  // Several prompts: one choice each, usage summed.
  auto many = h.post("/v1/completions", "{\"prompt\":[" + ids_json(ids) + "," +
                                            ids_json(prompt_ids(20, 9)) + "],\"max_tokens\":3}");
  ASSERT_EQ(many.status, 200u) << many.body;
  Json m(many.body);
  EXPECT_EQ(m["choices"].get_array().size(), 2u);
  EXPECT_EQ(m["usage"]["prompt_tokens"].get_uint64().value(), 120u);
  EXPECT_EQ(m["usage"]["completion_tokens"].get_uint64().value(), 6u);
}

TEST_F(FleetTest, StreamingSendsOneChunkPerTokenThenUsageAndDone) {
  start();
  Http h(port());
  http::ClientRequest req;
  req.method = http::Verb::post;
  req.target = "/v1/chat/completions";
  req.body =
      "{\"messages\":[{\"role\":\"user\",\"content\":\"stream please\"}],\"max_tokens\":7,"
      "\"stream\":true,\"stream_options\":{\"include_usage\":true}}";
  http::SseParser sse;
  std::vector<std::string> events;
  auto r = h.client().stream(req, [&](std::string_view piece) {
    sse.feed(piece, [&](std::string_view d) { events.emplace_back(d); });
    return Status();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header("Content-Type"), "text/event-stream");
  ASSERT_TRUE(sse.done());
  ASSERT_EQ(events.size(), 7u + 2);  // 7 tokens, usage, [DONE]
  EXPECT_EQ(Json(events[0])["choices"].at(0)["delta"]["role"].get_string().value(), "assistant");
  EXPECT_TRUE(Json(events[0])["choices"].at(0)["finish_reason"].is_null());
  EXPECT_EQ(Json(events[6])["choices"].at(0)["finish_reason"].get_string().value(), "length");
  EXPECT_EQ(Json(events[7])["usage"]["completion_tokens"].get_uint64().value(), 7u);
  EXPECT_EQ(events[8], "[DONE]");
}

TEST_F(FleetTest, SglangGenerate) {
  start();
  Http h(port());
  auto r = h.post("/generate", "{\"input_ids\":" + ids_json(prompt_ids(40, 2)) +
                                   ",\"sampling_params\":{\"max_new_tokens\":4}}");
  ASSERT_EQ(r.status, 200u) << r.body;
  Json j(r.body);
  EXPECT_EQ(j["output_ids"].get_array().size(), 4u);
  EXPECT_EQ(j["meta_info"]["prompt_tokens"].get_uint64().value(), 40u);
  EXPECT_EQ(j["meta_info"]["finish_reason"]["type"].get_string().value(), "length");
  auto batch = h.post("/generate", "{\"input_ids\":[" + ids_json(prompt_ids(40, 2)) + "," +
                                       ids_json(prompt_ids(10, 3)) +
                                       "],\"sampling_params\":{\"max_new_tokens\":2}}");
  ASSERT_EQ(batch.status, 200u);
  Json b(batch.body);
  ASSERT_EQ(b.root().get_array().size(), 2u);
  EXPECT_EQ(b.root().at(0)["meta_info"]["cached_tokens"].get_uint64().value(), 32u);
}

TEST_F(FleetTest, BadRequestsGet400) {
  FleetOptions o = small_fleet(1, 2);
  o.engine.max_model_len = 1000;
  start(o);
  Http h(port());
  EXPECT_EQ(h.post("/v1/completions", "{not json").status, 400u);
  EXPECT_EQ(h.post("/v1/completions", "{\"max_tokens\":3}").status, 400u);
  EXPECT_EQ(h.post("/v1/completions", "{\"prompt\":[1,-2],\"max_tokens\":3}").status, 400u);
  EXPECT_EQ(h.post("/v1/completions", completion(prompt_ids(990, 1), 20)).status, 400u);
  EXPECT_EQ(h.post("/v1/completions", "{\"prompt\":[1,2],\"data_parallel_rank\":2}").status, 400u);
  auto r = h.post("/v1/chat/completions", "{\"messages\":[]}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_TRUE(Json(r.body)["error"]["message"].is_string());
}

TEST_F(FleetTest, InfoLoadModelsHealthAndMetrics) {
  start(small_fleet(2, 2));
  for (size_t w = 0; w < 2; ++w) {
    Http h(port(w));
    EXPECT_EQ(h.get("/health").status, 200u);
    Json info(h.get("/server_info").body);
    EXPECT_EQ(info["worker_index"].get_uint64().value(), w);
    EXPECT_EQ(info["page_size"].get_uint64().value(), 16u);
    EXPECT_EQ(info["dp_size"].get_uint64().value(), 2u);
    auto eps = info["kv_events_endpoints"].get_array();
    ASSERT_EQ(eps.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(std::string(eps.at(r)["endpoint"].get_string().value()),
                fleet_->ports(w).ranks[r].pub_endpoint);
      EXPECT_EQ(std::string(eps.at(r)["replay_endpoint"].get_string().value()),
                fleet_->ports(w).ranks[r].replay_endpoint);
    }
    Json models(h.get("/v1/models").body);
    EXPECT_EQ(models["data"].at(0)["id"].get_string().value(), "mock-8b");
  }
  // Every holder has its own ports.
  std::set<uint16_t> all;
  for (size_t w = 0; w < 2; ++w) {
    all.insert(fleet_->ports(w).http);
    for (const auto& r : fleet_->ports(w).ranks) all.insert({r.pub, r.replay});
  }
  EXPECT_EQ(all.size(), 2u + 2 * 2 * 2);

  Http h(port(0));
  auto ids = prompt_ids(64, 5);
  h.post("/v1/completions", completion(ids, 2));
  h.post("/v1/completions", completion(ids, 2));
  Json load(h.get("/load").body);
  EXPECT_EQ(load["running"].get_uint64().value(), 0u);
  EXPECT_EQ(load["ranks"].get_array().size(), 2u);
  EXPECT_TRUE(load["kv_usage"].is_number());
  std::string metrics = h.get("/metrics").body;
  for (const char* name :
       {"vllm:num_requests_running{", "vllm:num_requests_waiting{", "vllm:kv_cache_usage_perc{",
        "vllm:gpu_cache_usage_perc{", "vllm:prefix_cache_queries_total{",
        "vllm:prefix_cache_hits_total{", "vllm:num_preemptions_total{",
        "vllm:time_to_first_token_seconds_bucket{", "vllm:generation_tokens_total{"}) {
    EXPECT_NE(metrics.find(name), std::string::npos) << name;
  }
  // 128 tokens queried, 48 hit (the second request's 3 full blocks before its last token).
  double queries = 0, hits = 0;
  for (auto [name, sum] : {std::pair{"vllm:prefix_cache_queries_total{", &queries},
                           std::pair{"vllm:prefix_cache_hits_total{", &hits}}) {
    for (size_t at = 0; (at = metrics.find(name, at)) != std::string::npos;) {
      at = metrics.find("} ", at) + 2;
      *sum += std::stod(metrics.substr(at, metrics.find('\n', at) - at));
    }
  }
  EXPECT_EQ(queries, 128);
  EXPECT_EQ(hits, 48);
}

TEST_F(FleetTest, DataParallelRankIsHonouredAndRecorded) {
  start(small_fleet(1, 2));
  Http h(port());
  h.post("/v1/completions", "{\"prompt\":" + ids_json(prompt_ids(64, 1)) +
                                ",\"max_tokens\":1,\"data_parallel_rank\":1}");
  Json truth(h.get("/admin/truth").body);
  EXPECT_EQ(truth["ranks"].at(0)["tiers"]["GPU"].get_array().size(), 0u);
  EXPECT_EQ(truth["ranks"].at(1)["tiers"]["GPU"].get_array().size(), 4u);
  Json rec(h.get("/admin/requests").body);
  auto list = rec["requests"].get_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list.at(0)["dp_rank"].get_uint64().value(), 1u);
  EXPECT_EQ(list.at(0)["prompt_tokens"].get_uint64().value(), 64u);
  EXPECT_EQ(list.at(0)["status"].get_string().value(), "finished");
  EXPECT_TRUE(list.at(0)["ttft_s"].is_number());
}

TEST_F(FleetTest, TtftFollowsTheTimingModelInRealTime) {
  FleetOptions o = small_fleet();
  o.engine.timing.speedup = 20;
  start(o);
  Http h(port());
  h.post("/v1/completions", completion(prompt_ids(4000, 1), 1));
  h.post("/v1/completions", completion(prompt_ids(4000, 1), 1));  // all but one block cached
  Json rec(h.get("/admin/requests").body);
  double cold = rec["requests"].at(0)["ttft_s"].get_double();
  double warm = rec["requests"].at(1)["ttft_s"].get_double();
  const TimingModel& tm = o.engine.timing;
  EXPECT_GE(cold, to_seconds(tm.step(4000, 0, 0)));
  EXPECT_GE(warm, to_seconds(tm.step(16, 0, 0)));
  EXPECT_LT(warm, cold);
}

// ---- fault hooks ----

TEST_F(FleetTest, DropBatchesLeavesAGapTheReplayFills) {
  start();
  subscribe();
  Http h(port());
  uint64_t before = last_seq();
  h.post("/admin/fault/drop_batches", "{\"count\":3}");
  // Each request stores at least one block: one batch each.
  for (uint32_t i = 0; i < 5; ++i) h.post("/v1/completions", completion(prompt_ids(32, 50 + i), 1));
  ASSERT_TRUE(wait_until([&] { return last_seq() == before + 5; }, kFleetWait));
  std::vector<uint64_t> seen;
  for (auto& m : kv_->messages(0)) {
    if (m.seq > before) seen.push_back(m.seq);
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{before + 4, before + 5}));  // seq advanced under the drop
  auto replayed = replay(fleet_->ports(0).ranks[0].replay_endpoint, before + 1);
  ASSERT_EQ(replayed.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(replayed[i].seq, before + 1 + i);
    EXPECT_FALSE(decode(replayed[i].payload).events.empty());
  }
  Json faults(h.get("/admin/faults").body);
  EXPECT_EQ(faults["ranks"].at(0)["drop_next"].get_uint64().value(), 0u);
}

TEST_F(FleetTest, DelayPublisherHoldsBatches) {
  start();
  subscribe();
  Http h(port());
  h.post("/admin/fault/delay_publisher", "{\"delay_ms\":400}");
  uint64_t before = last_seq();
  auto sent = std::chrono::steady_clock::now();
  h.post("/v1/completions", completion(prompt_ids(32, 77), 1));
  auto answered = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return last_seq() > before; }, kFleetWait));
  auto got = kv_->messages(0).back().received;
  EXPECT_GE(got - sent, 390ms);
  EXPECT_LT(answered - sent, 390ms);  // the request itself was not delayed
  h.post("/admin/fault/delay_publisher", "{\"delay_ms\":0}");
  wait_published();
  before = last_seq();
  sent = std::chrono::steady_clock::now();
  h.post("/v1/completions", completion(prompt_ids(32, 78), 1));
  ASSERT_TRUE(wait_until([&] { return last_seq() > before; }, kFleetWait));
  EXPECT_LT(kv_->messages(0).back().received - sent, 390ms);
}

TEST_F(FleetTest, RestartPublisherResetsSeqAndKeepsOrClearsTheCache) {
  start();
  subscribe();
  Http h(port());
  auto ids = prompt_ids(64, 3);
  h.post("/v1/completions", completion(ids, 1));
  for (uint32_t i = 0; i < 5; ++i) h.post("/v1/completions", completion(prompt_ids(32, 90 + i), 1));
  wait_published();  // nothing from before the restart is still on its way
  const size_t resident =
      Json(h.get("/admin/truth").body)["ranks"].at(0)["tiers"]["GPU"].get_array().size();

  // Kept: the sequence starts over, the cache (and prefix hits) survive.
  h.post("/admin/fault/restart_publisher", "{\"clear_cache\":false}");
  kv_->clear();
  uint32_t seed = 200;
  ASSERT_TRUE(wait_until(
      [&] {  // the SUB reconnects to the re-bound socket by itself
        h.post("/v1/completions", completion(prompt_ids(32, seed++), 1));
        return kv_->count(0) > 0;
      },
      kFleetWait));
  wait_published();
  Json after(h.get("/admin/truth").body);
  const uint64_t next = after["ranks"].at(0)["next_seq"].get_uint64();
  EXPECT_EQ(next, seed - 200);  // one batch per request since the restart, numbered from 0
  for (auto& m : kv_->messages(0)) EXPECT_LT(m.seq, next);
  auto replayed = replay(fleet_->ports(0).ranks[0].replay_endpoint, 0);
  ASSERT_EQ(replayed.size(), next);  // the old buffer went with the old process
  EXPECT_EQ(replayed.front().seq, 0u);
  EXPECT_GE(after["ranks"].at(0)["tiers"]["GPU"].get_array().size(), resident);
  EXPECT_EQ(after["ranks"].at(0)["publisher_restarts"].get_uint64().value(), 1u);
  EXPECT_EQ(cached_tokens(h.post("/v1/completions", completion(ids, 1))), 48u);

  // Cleared: the engine comes back empty, without announcing it.
  h.post("/admin/fault/restart_publisher", "{\"clear_cache\":true}");
  Json empty(h.get("/admin/truth").body);
  EXPECT_EQ(empty["ranks"].at(0)["tiers"]["GPU"].get_array().size(), 0u);
  EXPECT_EQ(empty["ranks"].at(0)["next_seq"].get_uint64().value(), 0u);
  kv_->clear();
  EXPECT_EQ(cached_tokens(h.post("/v1/completions", completion(ids, 1))), 0u);
  ASSERT_TRUE(wait_until(
      [&] {
        h.post("/v1/completions", completion(prompt_ids(32, seed++), 1));
        return kv_->count(0) > 0;
      },
      kFleetWait));
  for (auto& m : kv_->messages(0)) {
    for (auto& e : decode(m.payload).events) {
      EXPECT_FALSE(std::holds_alternative<events::AllBlocksCleared>(e));
    }
  }
}

TEST_F(FleetTest, PauseStopsGenerationWhileHealthAnswers) {
  start();
  Http h(port());
  h.post("/admin/fault/pause", "{\"paused\":true}");
  std::atomic<bool> done{false};
  std::thread t([&] {
    Http c(port());
    EXPECT_EQ(c.post("/v1/completions", completion(prompt_ids(32, 1), 3)).status, 200u);
    done = true;
  });
  ASSERT_TRUE(wait_until([&] { return Json(h.get("/load").body)["waiting"].get_uint64() == 1u; },
                         kFleetWait));
  EXPECT_EQ(h.get("/health").status, 200u);
  EXPECT_TRUE(Json(h.get("/load").body)["paused"].get_bool().value());
  EXPECT_FALSE(done.load());
  h.post("/admin/fault/pause", "{\"paused\":false}");
  ASSERT_TRUE(wait_until([&] { return done.load(); }, kFleetWait));
  t.join();

  // With a duration the pause ends by itself.
  auto start_time = std::chrono::steady_clock::now();
  h.post("/admin/fault/pause", "{\"duration_ms\":300}");
  EXPECT_EQ(h.post("/v1/completions", completion(prompt_ids(32, 2), 1)).status, 200u);
  EXPECT_GE(std::chrono::steady_clock::now() - start_time, 290ms);
}

TEST_F(FleetTest, FailRequestsByCountAndRatio) {
  start();
  Http h(port());
  h.post("/admin/fault/fail_requests", "{\"count\":2,\"status\":503}");
  auto body = completion(prompt_ids(16, 1), 1);
  auto first = h.post("/v1/completions", body);
  EXPECT_EQ(first.status, 503u);
  EXPECT_TRUE(Json(first.body)["error"]["message"].is_string());
  EXPECT_EQ(h.post("/v1/completions", body).status, 503u);
  EXPECT_EQ(h.post("/v1/completions", body).status, 200u);
  EXPECT_EQ(h.get("/health").status, 200u);  // only inference fails
  h.post("/admin/fault/fail_requests", "{\"ratio\":1.0}");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(h.post("/v1/completions", body).status, 500u);
  h.post("/admin/fault/fail_requests", "{\"ratio\":0.5}");
  int failed = 0;
  for (int i = 0; i < 200; ++i) failed += h.post("/v1/completions", body).status == 500u;
  EXPECT_GT(failed, 60);
  EXPECT_LT(failed, 140);
  h.post("/admin/fault/reset", "");
  EXPECT_EQ(h.post("/v1/completions", body).status, 200u);
}

TEST_F(FleetTest, CloseListenerRefusesConnectionsForAWhile) {
  start();
  Http h(port());
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(h.post("/admin/fault/close_listener", "{\"duration_ms\":500}").status, 200u);
  auto refused = [&] {
    http::SyncClient c("127.0.0.1", port(), {.connect_timeout = 200ms, .request_timeout = 200ms});
    return !c.get("/health").ok();
  };
  ASSERT_TRUE(wait_until(refused, kFleetWait));
  EXPECT_TRUE(refused());
  ASSERT_TRUE(wait_until([&] { return !refused(); }, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 480ms);
  EXPECT_EQ(Http(port()).post("/v1/completions", completion(prompt_ids(16, 4), 1)).status, 200u);
}

TEST_F(FleetTest, ClearCachePublishesAllBlocksCleared) {
  start();
  subscribe();
  Http h(port());
  auto ids = prompt_ids(64, 8);
  h.post("/v1/completions", completion(ids, 1));
  wait_published();
  uint64_t before = last_seq();
  EXPECT_EQ(h.post("/admin/clear_cache", "").status, 200u);
  ASSERT_TRUE(wait_until([&] { return last_seq() == before + 1; }, kFleetWait));
  auto batch = decode(kv_->messages(0).back().payload);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<events::AllBlocksCleared>(batch.events[0]));
  EXPECT_EQ(Json(h.get("/admin/truth").body)["ranks"].at(0)["tiers"]["GPU"].get_array().size(), 0u);
  EXPECT_EQ(cached_tokens(h.post("/v1/completions", completion(ids, 1))), 0u);
}

TEST_F(FleetTest, StopWithStreamsOpenEndsThem) {
  FleetOptions o = small_fleet();
  o.engine.timing.speedup = 1;  // slow: the stream is still open when stop() runs
  start(o);
  std::atomic<int> chunks{0};
  Status result;
  std::thread t([&] {
    Http c(port());
    http::ClientRequest req;
    req.method = http::Verb::post;
    req.target = "/v1/completions";
    req.body = completion(prompt_ids(16, 1), 20000, /*stream=*/true);
    result = c.client()
                 .stream(req,
                         [&](std::string_view) {
                           ++chunks;
                           return Status();
                         })
                 .status();
  });
  const bool streaming = wait_until([&] { return chunks.load() > 2; }, kFleetWait);
  auto t0 = std::chrono::steady_clock::now();
  fleet_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s * testing_support::kSlowdown);
  t.join();
  EXPECT_TRUE(streaming);
  // Either the stream ended with finish_reason "abort" or the connection was cut; it did not hang.
  SUCCEED() << result;
}

}  // namespace
}  // namespace kvgate::mock

namespace kvgate::mock::testing {
namespace {

// The fleet's oracle: each request record carries the longest prefix any rank of any worker held
// at its arrival, capped as the engine caps its own hits.
TEST_F(FleetTest, RequestRecordsCarryTheFleetOracle) {
  start(small_fleet(/*workers=*/2));
  Http w0(port(0)), w1(port(1));
  const auto ids = prompt_ids(100, 3);
  ASSERT_EQ(w0.post("/v1/completions", completion(ids, 2)).status, 200u);
  // Worker 1 has never seen the prompt; worker 0 holds its 6 full blocks (96 of 100 tokens).
  const auto r1 = w1.post("/v1/completions", completion(ids, 2));
  ASSERT_EQ(r1.status, 200u);
  EXPECT_EQ(cached_tokens(r1), 0u);
  const auto r0 = w0.post("/v1/completions", completion(ids, 2));
  EXPECT_EQ(cached_tokens(r0), 96u);
  const auto oracle_of = [](Http& h, size_t i) {
    Json j(h.get("/admin/requests").body);
    return j["requests"].at(i)["oracle_tokens"].get_uint64().value();
  };
  EXPECT_EQ(oracle_of(w0, 0), 0u);   // the first request: nobody held anything
  EXPECT_EQ(oracle_of(w1, 0), 96u);  // a miss on worker 1, though the fleet held the prefix
  EXPECT_EQ(oracle_of(w0, 1), 96u);  // a hit: cached equals the oracle
}

}  // namespace
}  // namespace kvgate::mock::testing
