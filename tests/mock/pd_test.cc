// Prefill/decode disaggregation, SGLang's protocol, between two in-process fleets that share
// nothing but sockets (a prefill fleet of two workers and a decode fleet of one): the pair's
// answers, the transfer the decode's KV events announce, the blocks it skips once it holds them,
// and every way a pairing fails.
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
             std::chrono::milliseconds transfer_timeout = std::chrono::milliseconds(1'000'000)) {
    FleetOptions p = small_fleet(2);
    p.pd.role = PdRole::kPrefill;
    p.pd.bootstrap_port = 0;
    p.pd.room_timeout = room_timeout;
    auto pf = Fleet::start(std::move(p));
    ASSERT_TRUE(pf.ok()) << pf.status();
    prefill_ = std::move(*pf);
    FleetOptions d = small_fleet(1);
    d.pd.role = PdRole::kDecode;
    d.pd.transfer_timeout = transfer_timeout;
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

  std::unique_ptr<Fleet> prefill_;
  std::unique_ptr<Fleet> decode_;
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

  // The decode announces the received blocks as its own: one store of the prompt's 6 blocks.
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

TEST_F(PdTest, DecodeWithoutBootstrapFieldsIs400AndAPrefillServesSuchARequestWhole) {
  start();
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

}  // namespace
}  // namespace kvgate::mock
