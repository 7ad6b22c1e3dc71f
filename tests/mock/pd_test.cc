// Prefill/decode disaggregation, SGLang's and vLLM's protocols, between two in-process fleets
// that share nothing but sockets (a prefill fleet of two workers and a decode fleet of one): the
// pair's answers, the transfer the decode's KV events announce, the blocks it skips once it holds
// them, every way a pairing fails, and the decode serving a request with no PD field itself.
#include <thread>

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

// A request body (a JSON object) with the three fields SGLang's router adds.
std::string with_bootstrap(std::string body, uint16_t bootstrap_port, uint64_t room) {
  body.pop_back();  // the closing brace
  return body +
         ",\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":" + std::to_string(bootstrap_port) +
         ",\"bootstrap_room\":" + std::to_string(room) + "}";
}

// A request body (a JSON object) with vLLM's kv_transfer_params set to `params` (a JSON object).
std::string with_kv(std::string body, std::string_view params) {
  body.pop_back();
  return body + ",\"kv_transfer_params\":" + std::string(params) + "}";
}

// What vLLM's proxy sends the prefill: the client's request, one token, not streamed.
constexpr std::string_view kRemoteDecode =
    "{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null,"
    "\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}";

std::string completion(const std::vector<TokenId>& ids, uint32_t max_tokens) {
  return "{\"model\":\"mock-8b\",\"prompt\":" + ids_json(ids) +
         ",\"max_tokens\":" + std::to_string(max_tokens) + "}";
}

uint64_t usage(const http::ClientResponse& r, std::string_view field) {
  Json j(r.body);
  if (field == "cached_tokens") {
    return j["usage"]["prompt_tokens_details"]["cached_tokens"].get_uint64();
  }
  return j["usage"][field].get_uint64();
}

class PdTest : public ::testing::Test {
 protected:
  // Durations are the fleet's own (divided by small_fleet's speedup of 100).
  void start(std::chrono::milliseconds room_timeout = std::chrono::milliseconds(600'000),
             std::chrono::milliseconds transfer_timeout = std::chrono::milliseconds(1'000'000),
             bool decode_local_prefill = true) {
    FleetOptions p = small_fleet(2);
    p.pd.role = PdRole::kPrefill;
    p.pd.bootstrap_port = 0;
    p.pd.room_timeout = room_timeout;
    auto pf = Fleet::start(std::move(p));
    ASSERT_TRUE(pf.ok()) << pf.status();
    prefill_ = std::move(*pf);
    FleetOptions d = small_fleet(1);
    d.engine.num_blocks = decode_blocks_;
    d.engine.timing.speedup = decode_speedup_;
    d.pd.role = PdRole::kDecode;
    d.pd.transfer_timeout = transfer_timeout;
    d.pd.decode_local_prefill = decode_local_prefill;
    auto df = Fleet::start(std::move(d));
    ASSERT_TRUE(df.ok()) << df.status();
    decode_ = std::move(*df);
  }
  void TearDown() override {
    if (decode_) decode_->stop();
    if (prefill_) prefill_->stop();
  }
  uint16_t prefill_port(size_t w = 0) { return prefill_->ports(w).http; }
  uint16_t bootstrap_port(size_t w = 0) { return prefill_->ports(w).bootstrap; }
  uint16_t decode_port() { return decode_->ports(0).http; }

  struct Pair {
    http::ClientResponse prefill, decode;
  };
  // What a PD router does: the same body to a prefill and the decode at once.
  Pair send_pair(const std::string& route, const std::string& body, size_t prefill = 0) {
    Pair out;
    std::thread t([&] {
      Http h(prefill_port(prefill));
      out.prefill = h.post(route, body);
    });
    Http h(decode_port());
    out.decode = h.post(route, body);
    t.join();
    return out;
  }
  // What vLLM's proxy does: `prefill_body` (the client's request cut to one token, not
  // streamed) to the prefill first, then `body` to the decode with the prefill's
  // kv_transfer_params, which `params` gets (empty when the prefill failed).
  Pair send_vllm(const std::string& route, const std::string& prefill_body, const std::string& body,
                 std::string* params) {
    Pair out;
    out.prefill = Http(prefill_port()).post(route, with_kv(prefill_body, kRemoteDecode));
    params->clear();
    Json j(out.prefill.body);
    if (out.prefill.status != 200 || !j.ok()) return out;
    *params = std::string(simdjson::minify(j["kv_transfer_params"]));
    out.decode = Http(decode_port()).post(route, with_kv(body, *params));
    return out;
  }
  uint64_t pd_stat(uint16_t port, std::string_view key, std::string_view sub = {}) {
    Http h(port);
    Json j(h.get("/admin/pd").body);
    if (!sub.empty()) return j[key][sub].get_uint64();
    return j[key].get_uint64();
  }
  // The BlockStored events of the decode's rank 0 so far, from its replay socket.
  std::vector<events::BlockStored> decode_stores() {
    std::vector<events::BlockStored> out;
    for (const KvMessage& m : replay(decode_->ports(0).ranks[0].replay_endpoint, 0)) {
      for (auto& e : decode(m.payload).events) {
        if (auto* s = std::get_if<events::BlockStored>(&e)) out.push_back(*s);
      }
    }
    return out;
  }

  // The decode announces the blocks it received as its own: one store, the first of its cache,
  // of the prompt's first six blocks (96 tokens).
  void expect_one_store_of_six_blocks(const std::vector<TokenId>& prompt) {
    const std::vector<TokenId> blocks(prompt.begin(), prompt.begin() + 96);
    std::vector<events::BlockStored> stores;
    ASSERT_TRUE(wait_until(
        [&] {
          stores = decode_stores();
          return !stores.empty();
        },
        kFleetWait));
    ASSERT_EQ(stores.size(), 1u);
    EXPECT_EQ(stores[0].block_hashes.size(), 6u);
    EXPECT_EQ(stores[0].token_ids, blocks);
    EXPECT_FALSE(stores[0].parent.has_value());
  }

  std::unique_ptr<Fleet> prefill_;
  std::unique_ptr<Fleet> decode_;
  uint32_t decode_blocks_ = 2048;
  double decode_speedup_ = 100;
};

TEST_F(PdTest, PairAnswersAndTheDecodeReceivesOnlyTheBlocksItLacks) {
  start();
  const auto prompt = prompt_ids(100, 1);  // 6 full blocks of 16 and 4 tokens
  Pair first =
      send_pair("/v1/completions", with_bootstrap(completion(prompt, 8), bootstrap_port(), 1));
  ASSERT_EQ(first.prefill.status, 200u) << first.prefill.body;
  ASSERT_EQ(first.decode.status, 200u) << first.decode.body;
  EXPECT_EQ(usage(first.prefill, "completion_tokens"), 1u);  // SGLang's prefill: one token
  EXPECT_EQ(usage(first.decode, "completion_tokens"), 8u);
  EXPECT_EQ(usage(first.decode, "prompt_tokens"), 100u);
  EXPECT_EQ(usage(first.decode, "cached_tokens"), 96u);  // the received blocks, as a cache hit
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 1u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_transferred"), 6u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_skipped"), 0u);
  EXPECT_EQ(pd_stat(prefill_port(), "rooms", "published"), 1u);
  EXPECT_EQ(pd_stat(prefill_port(), "rooms", "pulled"), 1u);

  expect_one_store_of_six_blocks(prompt);

  // The same prompt again (a new room): the decode holds every block, nothing is transferred.
  Pair second =
      send_pair("/v1/completions", with_bootstrap(completion(prompt, 8), bootstrap_port(), 2));
  ASSERT_EQ(second.decode.status, 200u) << second.decode.body;
  EXPECT_EQ(usage(second.decode, "cached_tokens"), 96u);
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 2u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_transferred"), 6u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_skipped"), 6u);
}

TEST_F(PdTest, ChatAndStreamedGenerateBatchesPairToo) {
  start();
  const std::string chat = with_bootstrap(
      "{\"messages\":[{\"role\":\"user\",\"content\":\"a question long enough to fill a block "
      "or two of the test tokenizer's tokens, then some more words\"}],\"max_tokens\":5}",
      bootstrap_port(), 11);
  Pair c = send_pair("/v1/chat/completions", chat);
  ASSERT_EQ(c.decode.status, 200u) << c.decode.body;
  ASSERT_EQ(c.prefill.status, 200u) << c.prefill.body;
  EXPECT_EQ(usage(c.prefill, "completion_tokens"), 1u);
  EXPECT_EQ(usage(c.decode, "completion_tokens"), 5u);

  // A batch: each field a list, one entry per prompt; the room binds the first prompt.
  const uint16_t bp = bootstrap_port();
  const std::string gen =
      "{\"input_ids\":[" + ids_json(prompt_ids(40, 2)) + "," + ids_json(prompt_ids(20, 3)) +
      "],\"sampling_params\":{\"max_new_tokens\":4},\"stream\":true,"
      "\"bootstrap_host\":[\"127.0.0.1\",\"127.0.0.1\"],\"bootstrap_port\":[" +
      std::to_string(bp) + "," + std::to_string(bp) + "],\"bootstrap_room\":[12,13]}";
  Pair g = send_pair("/generate", gen);
  ASSERT_EQ(g.decode.status, 200u) << g.decode.body;
  ASSERT_EQ(g.prefill.status, 200u) << g.prefill.body;
  EXPECT_NE(g.decode.body.find("\"completion_tokens\":4"), std::string::npos) << g.decode.body;
  EXPECT_NE(g.decode.body.find("[DONE]"), std::string::npos);
  EXPECT_NE(g.prefill.body.find("\"completion_tokens\":1"), std::string::npos) << g.prefill.body;
  EXPECT_EQ(g.prefill.body.find("\"completion_tokens\":2"), std::string::npos) << g.prefill.body;
  // The chat prompt's full blocks (its cache hit) and the batch's first prompt's 2.
  EXPECT_EQ(pd_stat(decode_port(), "blocks_transferred"),
            usage(c.decode, "cached_tokens") / 16 + 2);
}

TEST_F(PdTest, DecodeWithoutBootstrapFieldsIs400WithoutLocalPrefill) {
  start(std::chrono::milliseconds(600'000), std::chrono::milliseconds(1'000'000),
        /*decode_local_prefill=*/false);
  Http d(decode_port());
  for (const char* route : {"/v1/completions", "/v1/chat/completions", "/generate"}) {
    const std::string body = std::string(route) == "/generate" ? "{\"text\":\"hello there\"}"
                             : std::string(route) == "/v1/completions"
                                 ? "{\"prompt\":\"hello there\",\"bootstrap_room\":3}"
                                 : "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    auto r = d.post(route, body);
    EXPECT_EQ(r.status, 400u) << route;
    EXPECT_NE(
        r.body.find("a decode worker needs bootstrap_host, bootstrap_port and bootstrap_room"),
        std::string::npos)
        << r.body;
    EXPECT_NE(r.body.find("\"error\""), std::string::npos);
  }
  auto bad = d.post("/v1/completions", with_bootstrap("{\"prompt\":\"hi\"}", 0, 1));
  EXPECT_EQ(bad.status, 400u) << bad.body;  // port 0 is no port
  Http p(prefill_port());
  auto whole = p.post("/v1/completions", completion(prompt_ids(30, 4), 6));
  ASSERT_EQ(whole.status, 200u);
  EXPECT_EQ(usage(whole, "completion_tokens"), 6u);
}

TEST_F(PdTest, RoomThatNeverAppearsFailsAfterTheTransferTimeout) {
  start(std::chrono::milliseconds(600'000), std::chrono::milliseconds(20'000));  // 200 ms
  Http d(decode_port());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = d.post("/v1/completions",
                  with_bootstrap(completion(prompt_ids(40, 5), 4), bootstrap_port(), 4242));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
  EXPECT_EQ(r.status, 502u) << r.body;
  EXPECT_NE(r.body.find("never received the room"), std::string::npos) << r.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "unknown_room"), 1u);

  // A room the prefill holds but has not computed (its engine paused): not ready in time, 504.
  Http(prefill_port()).post("/admin/fault/pause", "{\"paused\":true}");
  const std::string body = with_bootstrap(completion(prompt_ids(40, 6), 4), bootstrap_port(), 43);
  http::ClientResponse prefill_answer;
  std::thread t([&] { prefill_answer = Http(prefill_port()).post("/v1/completions", body); });
  ASSERT_TRUE(wait_until([&] { return pd_stat(prefill_port(), "open_rooms") == 1; }, kFleetWait));
  auto late = d.post("/v1/completions", body);
  EXPECT_EQ(late.status, 504u) << late.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "timeout"), 1u);
  Http(prefill_port()).post("/admin/fault/pause", "{\"paused\":false}");
  t.join();
  EXPECT_EQ(prefill_answer.status, 200u);
}

TEST_F(PdTest, WrongPairingsFail) {
  start(std::chrono::milliseconds(600'000), std::chrono::milliseconds(20'000));
  // The room went to prefill worker 0, the decode asks worker 1.
  const std::string body = completion(prompt_ids(50, 7), 4);
  Http p0(prefill_port(0));
  ASSERT_EQ(p0.post("/v1/completions", with_bootstrap(body, bootstrap_port(0), 7)).status, 200u);
  Http d(decode_port());
  auto other = d.post("/v1/completions", with_bootstrap(body, bootstrap_port(1), 7));
  EXPECT_EQ(other.status, 502u) << other.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "unknown_room"), 1u);

  // The right prefill, another prompt under the same room.
  ASSERT_EQ(p0.post("/v1/completions", with_bootstrap(body, bootstrap_port(0), 8)).status, 200u);
  auto mismatch = d.post("/v1/completions",
                         with_bootstrap(completion(prompt_ids(50, 8), 4), bootstrap_port(0), 8));
  EXPECT_EQ(mismatch.status, 502u) << mismatch.body;
  EXPECT_NE(mismatch.body.find("wrong pairing"), std::string::npos) << mismatch.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "prompt_mismatch"), 1u);

  // Room 7 is still on worker 0 and can be pulled once; a second pull finds it gone.
  auto right = d.post("/v1/completions", with_bootstrap(body, bootstrap_port(0), 7));
  EXPECT_EQ(right.status, 200u) << right.body;
  auto again = d.post("/v1/completions", with_bootstrap(body, bootstrap_port(0), 7));
  EXPECT_EQ(again.status, 502u) << again.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "room_gone"), 1u);
}

TEST_F(PdTest, AnUnpulledRoomIsFreedAfterTheRoomTimeout) {
  start(std::chrono::milliseconds(5'000));  // 50 ms at the fleet's speedup
  Http p(prefill_port());
  const std::string body = with_bootstrap(completion(prompt_ids(40, 9), 4), bootstrap_port(), 9);
  auto r = p.post("/v1/completions", body);
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_TRUE(
      wait_until([&] { return pd_stat(prefill_port(), "rooms", "expired") == 1; }, kFleetWait));
  EXPECT_EQ(pd_stat(prefill_port(), "open_rooms"), 0u);
  auto gone = Http(bootstrap_port()).get("/room/9");
  EXPECT_EQ(gone.status, 410u);
  EXPECT_NE(gone.body.find("expired"), std::string::npos) << gone.body;
  auto d = Http(decode_port()).post("/v1/completions", body);
  EXPECT_EQ(d.status, 502u) << d.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "room_gone"), 1u);
  EXPECT_NE(
      Http(prefill_port())
          .get("/metrics")
          .body.find("kvgate_mock_pd_rooms_total{event=\"expired\",model_name=\"mock-8b\"} 1"),
      std::string::npos);
}

TEST_F(PdTest, StopWithAPullInFlightEndsIt) {
  start();  // the decode would wait 10 s for a room that never comes
  http::ClientResponse answer;
  std::thread t([&] {
    auto r = Http(decode_port())
                 .client()
                 .post("/v1/completions",
                       with_bootstrap(completion(prompt_ids(40, 10), 4), bootstrap_port(), 77));
    if (r.ok()) answer = *r;
  });
  ASSERT_TRUE(
      wait_until([&] { return pd_stat(decode_port(), "pulls_in_flight") == 1; }, kFleetWait));
  const auto t0 = std::chrono::steady_clock::now();
  decode_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s * testing_support::kSlowdown);
  t.join();
  // Answered as a shutdown, or the connection cut: it did not wait for its room.
  EXPECT_TRUE(answer.status == 0 || answer.status == 503) << answer.status << answer.body;
}

TEST_F(PdTest, VllmSequenceAnswersAndTheSecondTransfersNothing) {
  start();
  const auto prompt = prompt_ids(100, 21);  // 6 full blocks of 16 and 4 tokens: 7 blocks
  std::string params;
  Pair first = send_vllm("/v1/completions", completion(prompt, 1), completion(prompt, 8), &params);
  ASSERT_EQ(first.prefill.status, 200u) << first.prefill.body;
  ASSERT_EQ(first.decode.status, 200u) << first.decode.body;
  EXPECT_EQ(usage(first.prefill, "completion_tokens"), 1u);
  EXPECT_EQ(usage(first.decode, "completion_tokens"), 8u);
  EXPECT_EQ(usage(first.decode, "prompt_tokens"), 100u);
  EXPECT_EQ(usage(first.decode, "cached_tokens"), 96u);  // the received blocks, as a cache hit

  Json kv(params);
  ASSERT_TRUE(kv.ok()) << first.prefill.body;
  EXPECT_TRUE(kv["do_remote_prefill"].get_bool().value());
  EXPECT_FALSE(kv["do_remote_decode"].get_bool().value());
  Json report(Http(prefill_port()).get("/admin/pd").body);
  EXPECT_EQ(kv["remote_engine_id"].get_string().value(), report["engine_id"].get_string().value());
  EXPECT_EQ(kv["remote_block_ids"].get_array().size(), 7u);
  EXPECT_EQ(kv["remote_host"].get_string().value(), "127.0.0.1");
  EXPECT_EQ(kv["remote_port"].get_uint64().value(), bootstrap_port());
  EXPECT_EQ(kv["tp_size"].get_uint64().value(), 1u);

  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 1u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_transferred"), 6u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_skipped"), 0u);
  EXPECT_EQ(pd_stat(prefill_port(), "rooms", "published"), 1u);
  EXPECT_EQ(pd_stat(prefill_port(), "rooms", "pulled"), 1u);
  EXPECT_EQ(pd_stat(prefill_port(), "open_rooms"), 0u);

  expect_one_store_of_six_blocks(prompt);

  // The same sequence again: new block ids, and the decode holds every block already.
  std::string again_params;
  Pair second =
      send_vllm("/v1/completions", completion(prompt, 1), completion(prompt, 8), &again_params);
  ASSERT_EQ(second.decode.status, 200u) << second.decode.body;
  EXPECT_NE(again_params, params);
  EXPECT_EQ(usage(second.decode, "cached_tokens"), 96u);
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 2u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_transferred"), 6u);
  EXPECT_EQ(pd_stat(decode_port(), "blocks_skipped"), 6u);

  // Chat: the prefill's max_completion_tokens is 1 as well, the decode's the client's.
  const std::string question =
      "{\"messages\":[{\"role\":\"user\",\"content\":\"a question long enough to fill a block "
      "or two of the test tokenizer's tokens, then some more words\"}],";
  const std::string chat_prefill =
      question + "\"max_tokens\":1,\"max_completion_tokens\":1,\"stream\":false}";
  const std::string chat = question + "\"max_completion_tokens\":5}";
  Pair c = send_vllm("/v1/chat/completions", chat_prefill, chat, &params);
  ASSERT_EQ(c.prefill.status, 200u) << c.prefill.body;
  ASSERT_EQ(c.decode.status, 200u) << c.decode.body;
  EXPECT_EQ(usage(c.prefill, "completion_tokens"), 1u);
  EXPECT_EQ(usage(c.decode, "completion_tokens"), 5u);
  EXPECT_NE(c.prefill.body.find("\"kv_transfer_params\":{"), std::string::npos);
}

TEST_F(PdTest, VllmParamsNoPrefillIssuedOrAlreadyPulledFail) {
  start();
  const std::string body = completion(prompt_ids(50, 22), 4);  // 4 blocks: 3 full
  std::string prefill_body = body;
  prefill_body.pop_back();
  prefill_body += ",\"stream\":false}";
  auto p = Http(prefill_port()).post("/v1/completions", with_kv(prefill_body, kRemoteDecode));
  ASSERT_EQ(p.status, 200u) << p.body;
  const std::string params = std::string(simdjson::minify(Json(p.body)["kv_transfer_params"]));
  const std::string engine = std::string(Json(params)["remote_engine_id"].get_string().value());
  const uint64_t first = Json(params)["remote_block_ids"].at(0).get_uint64().value();
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    return s.replace(s.find(from), from.size(), to);
  };
  Http d(decode_port());

  // Another engine's id (a wrong pairing, or the prefill restarted since).
  auto other = d.post("/v1/completions",
                      with_kv(body, replace(params, engine, "kvgate-mock-w9-0000000000000000")));
  EXPECT_EQ(other.status, 502u) << other.body;
  EXPECT_NE(other.body.find("never issued"), std::string::npos) << other.body;
  // Block ids this prefill never issued as one transfer: shifted, or a part of it.
  auto shifted =
      d.post("/v1/completions", with_kv(body, replace(params, "[" + std::to_string(first) + ",",
                                                      "[" + std::to_string(first + 100) + ",")));
  EXPECT_EQ(shifted.status, 502u) << shifted.body;
  auto part = d.post("/v1/completions",
                     with_kv(body, replace(params, "[" + std::to_string(first) + ",", "[")));
  EXPECT_EQ(part.status, 502u) << part.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "unknown_room"), 3u);

  // Those refusals left the transfer whole: pulled once, then gone.
  auto right = d.post("/v1/completions", with_kv(body, params));
  EXPECT_EQ(right.status, 200u) << right.body;
  EXPECT_EQ(usage(right, "completion_tokens"), 4u);
  auto again = d.post("/v1/completions", with_kv(body, params));
  EXPECT_EQ(again.status, 502u) << again.body;
  EXPECT_NE(again.body.find("pulled"), std::string::npos) << again.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "room_gone"), 1u);
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 1u);

  // Another transfer handed to a request with another prompt: refused once read, before any
  // block enters the decode's pool.
  auto p2 = Http(prefill_port()).post("/v1/completions", with_kv(prefill_body, kRemoteDecode));
  ASSERT_EQ(p2.status, 200u) << p2.body;
  const std::string params2 = std::string(simdjson::minify(Json(p2.body)["kv_transfer_params"]));
  auto mismatch = d.post("/v1/completions", with_kv(completion(prompt_ids(50, 23), 4), params2));
  EXPECT_EQ(mismatch.status, 502u) << mismatch.body;
  EXPECT_NE(mismatch.body.find("wrong pairing"), std::string::npos) << mismatch.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "prompt_mismatch"), 1u);
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 1u);
}

TEST_F(PdTest, VllmParamsExpireAfterTheRoomTimeout) {
  start(std::chrono::milliseconds(5'000));  // 50 ms at the fleet's speedup
  const std::string body = completion(prompt_ids(40, 24), 4);
  auto p = Http(prefill_port()).post("/v1/completions", with_kv(body, kRemoteDecode));
  ASSERT_EQ(p.status, 200u) << p.body;
  const std::string params = std::string(simdjson::minify(Json(p.body)["kv_transfer_params"]));
  ASSERT_TRUE(
      wait_until([&] { return pd_stat(prefill_port(), "rooms", "expired") == 1; }, kFleetWait));
  EXPECT_EQ(pd_stat(prefill_port(), "open_rooms"), 0u);
  auto d = Http(decode_port()).post("/v1/completions", with_kv(body, params));
  EXPECT_EQ(d.status, 502u) << d.body;
  EXPECT_NE(d.body.find("expired"), std::string::npos) << d.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "room_gone"), 1u);
}

TEST_F(PdTest, DecodeServesARequestWithoutAnyPdFieldWhole) {
  start();
  Http d(decode_port());
  const std::string kBodies[][2] = {
      {"/v1/completions", completion(prompt_ids(40, 25), 6)},
      {"/v1/chat/completions",
       "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":6}"},
      {"/generate", "{\"text\":\"hello there\",\"sampling_params\":{\"max_new_tokens\":6}}"}};
  for (const auto& [route, body] : kBodies) {
    auto r = d.post(route, body);
    ASSERT_EQ(r.status, 200u) << route << r.body;
    EXPECT_NE(r.body.find("\"completion_tokens\":6"), std::string::npos) << r.body;
  }
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 0u);

  // A PD field, but not what a decode takes: refused, never served locally.
  auto partial = d.post("/v1/completions", "{\"prompt\":\"hello there\",\"bootstrap_room\":3}");
  EXPECT_EQ(partial.status, 400u) << partial.body;
  auto remote_decode = d.post("/v1/completions", with_kv("{\"prompt\":\"hi\"}", kRemoteDecode));
  EXPECT_EQ(remote_decode.status, 400u) << remote_decode.body;
  auto no_remote = d.post("/v1/completions", with_kv("{\"prompt\":\"hi\"}", "{}"));
  EXPECT_EQ(no_remote.status, 400u) << no_remote.body;
  EXPECT_NE(no_remote.body.find("need do_remote_prefill true"), std::string::npos)
      << no_remote.body;
  auto both =
      d.post("/v1/completions",
             with_kv(with_bootstrap("{\"prompt\":\"hi\"}", bootstrap_port(), 5), kRemoteDecode));
  EXPECT_EQ(both.status, 400u) << both.body;

  // The prefill side: a remote-decode request that asks to stream is refused too.
  Http p(prefill_port());
  auto streamed =
      p.post("/v1/completions", with_kv("{\"prompt\":\"hi\",\"stream\":true}", kRemoteDecode));
  EXPECT_EQ(streamed.status, 400u) << streamed.body;
}

// vLLM keeps a transferred request waiting while its decode has too few free blocks: it imports
// once a running request frees them, and fails only at the transfer timeout.
TEST_F(PdTest, ATransferWaitsForKvRoomUntilTheTransferTimeout) {
  decode_blocks_ = 20;
  decode_speedup_ = 1;  // real durations: a 200-token decode runs ~1.2 s, the timeout is 3 s
  start(std::chrono::milliseconds(600'000), std::chrono::milliseconds(3'000));
  // A long request served whole on the decode: 2 blocks and more once it has its first token.
  http::ClientResponse long_answer;
  std::thread running([&] {
    long_answer = Http(decode_port()).post("/v1/completions", completion(prompt_ids(16, 30), 200));
  });
  Http d(decode_port());
  ASSERT_TRUE(
      wait_until([&] { return Json(d.get("/load").body)["used_blocks"].get_uint64().value() >= 2; },
                 kFleetWait));
  // Frozen with those blocks held: a 19-block transfer finds 18 free at most.
  d.post("/admin/fault/pause", "{\"paused\":true}");
  const auto prompt = prompt_ids(304, 31);
  auto transfer = [&](http::ClientResponse* out) {
    auto p =
        Http(prefill_port()).post("/v1/completions", with_kv(completion(prompt, 1), kRemoteDecode));
    ASSERT_EQ(p.status, 200u) << p.body;
    const std::string params = std::string(simdjson::minify(Json(p.body)["kv_transfer_params"]));
    *out = Http(decode_port()).post("/v1/completions", with_kv(completion(prompt, 2), params));
  };
  auto waiting = [&] { return Json(d.get("/load").body)["waiting"].get_uint64().value(); };

  http::ClientResponse late;
  std::thread first([&] { transfer(&late); });
  ASSERT_TRUE(wait_until([&] { return waiting() == 1; }, kFleetWait));  // counted as waiting
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 0u);  // waiting for room, not in the engine
  first.join();  // the 3 s timeout passes while the decode stays frozen
  EXPECT_EQ(late.status, 503u) << late.body;
  EXPECT_NE(late.body.find("within the transfer timeout"), std::string::npos) << late.body;
  EXPECT_EQ(pd_stat(decode_port(), "failures", "pool_full"), 1u);
  EXPECT_EQ(waiting(), 0u);

  http::ClientResponse served;
  std::thread second([&] { transfer(&served); });
  ASSERT_TRUE(wait_until([&] { return waiting() == 1; }, kFleetWait));
  d.post("/admin/fault/pause", "{\"paused\":false}");  // the long request runs to its end
  second.join();
  running.join();
  EXPECT_EQ(long_answer.status, 200u) << long_answer.body;
  ASSERT_EQ(served.status, 200u) << served.body;
  // All 19 blocks received; a prompt hit whole recomputes its last token, so its last block.
  EXPECT_EQ(usage(served, "cached_tokens"), 288u);
  EXPECT_EQ(pd_stat(decode_port(), "transfers"), 1u);
  EXPECT_EQ(pd_stat(decode_port(), "failures", "pool_full"), 1u);
}

}  // namespace
}  // namespace kvgate::mock
