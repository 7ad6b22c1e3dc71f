// A worker with two data-parallel ranks (one KV cache each): the gateway routes to the rank that
// holds the prefix and pins it, so a repeated prefix runs where it is cached; a fresh prefix may
// go to either rank.
#include <simdjson.h>

#include <set>

#include "app/gateway_fixture.h"
#include "kvgate/core/block_hash.h"
#include "kvgate/core/tokenizer.h"

namespace kvgate::app {
namespace {

std::string shared_prefix() {
  std::string s = "You are the assistant of a data-parallel deployment. ";
  while (s.size() < 2000) s += "Keep answers short and cite the shared context. ";
  return s;
}

class DpRankTest : public GatewayTest {
 protected:
  // One mock worker with two data-parallel ranks behind the gateway; true once both ranks are
  // known holders.
  bool start_one_worker_with_two_ranks() {
    start_worker_with([](mock::FleetOptions& o) { o.dp_size = 2; });
    GatewayConfig cfg = base_config();
    cfg.worker_urls = {url_of(0)};
    start_gateway(cfg);
    return wait_routable(1) &&
           wait_until(
               [&] { return gateway_->registry().snapshot()->infos[0]->holders.size() == 2; },
               std::chrono::seconds(5));
  }
};

TEST_F(DpRankTest, ARepeatedPrefixRunsOnTheRankThatHoldsIt) {
  ASSERT_TRUE(start_one_worker_with_two_ranks());
  auto c = client();
  const std::string prefix = shared_prefix();
  auto first = c.post("/v1/completions", completion(prefix + " question zero"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->status, 200u) << first->body;
  const std::string rank(first->header("x-kvgate-dp-rank"));
  ASSERT_TRUE(rank == "0" || rank == "1") << "the gateway pins a rank: '" << rank << "'";
  // Wait until the index holds the prefix on that rank's holder.
  const auto info = gateway_->registry().snapshot()->infos[0];
  HolderId holder;
  for (size_t k = 0; k < info->holders.size(); ++k) {
    if (std::to_string(info->holder_ranks[k]) == rank) holder = info->holders[k];
  }
  ASSERT_TRUE(holder.valid());
  std::vector<SeqHash> chain;
  BlockHasher().hash_blocks(TestTokenizer().encode(prefix), 16, nullptr, &chain);
  std::vector<index::HolderMatch> matches;
  ASSERT_TRUE(wait_until(
      [&] {
        gateway_->index().lookup(chain, matches);
        for (const auto& m : matches) {
          if (m.holder == holder && m.any_depth + 1 >= chain.size()) return true;
        }
        return false;
      },
      std::chrono::seconds(5)));
  for (int i = 1; i <= 10; ++i) {
    auto r = c.post("/v1/completions", completion(prefix + " question " + std::to_string(i)));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u);
    EXPECT_EQ(r->header("x-kvgate-dp-rank"), rank) << "request " << i;
    EXPECT_GE(cached_tokens(r->body), (chain.size() - 1) * 16)
        << "cached on the rank it ran on: " << r->body;
  }
}

TEST_F(DpRankTest, FreshPrefixesGoToEitherRank) {
  ASSERT_TRUE(start_one_worker_with_two_ranks());
  auto c = client();
  std::set<std::string> ranks;
  for (int i = 0; i < 24 && ranks.size() < 2; ++i) {
    auto r = c.post("/v1/completions",
                    completion("fresh topic number " + std::to_string(i * 7919) + " asks", 2));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200u);
    ranks.insert(std::string(r->header("x-kvgate-dp-rank")));
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
}

TEST_F(GatewayTest, WithoutDpAwarenessTheEnginePicksTheRank) {
  start_worker_with([](mock::FleetOptions& o) { o.dp_size = 2; });
  GatewayConfig cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  cfg.dp_aware = false;
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  auto r = client().post("/v1/completions", completion("no pinning", 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200u);
  EXPECT_TRUE(r->header("x-kvgate-dp-rank").empty());
}

// A prompt longer than the worker's context is a clear 400, streamed or not (a streamed request
// refused with a plain JSON error once read as "body limit exceeded").
TEST_F(GatewayTest, APromptOverTheContextIsAClear400EvenStreamed) {
  start_worker_with([](mock::FleetOptions& o) { o.engine.max_model_len = 256; });
  GatewayConfig cfg = base_config();
  cfg.worker_urls = {url_of(0)};
  start_gateway(cfg);
  ASSERT_TRUE(wait_routable(1));
  ASSERT_TRUE(wait_until([&] { return gateway_->registry().snapshot()->max_model_len == 256; },
                         std::chrono::seconds(5)));
  std::string prompt;
  while (prompt.size() < 4000) prompt += "word ";
  for (const bool stream : {false, true}) {
    http::SyncClient c("127.0.0.1", gateway_->port());
    http::ClientRequest req;
    req.method = http::Verb::post;
    req.target = "/v1/completions";
    req.body = completion(prompt, 4, stream);
    std::string body;
    auto r = c.stream(req, [&](std::string_view piece) {
      body.append(piece);
      return Status();
    });
    ASSERT_TRUE(r.ok()) << (stream ? "streamed: " : "") << r.status();
    EXPECT_EQ(r->status, 400u) << body;
    EXPECT_NE(body.find("maximum context length is 256 tokens"), std::string::npos) << body;
  }
}

}  // namespace
}  // namespace kvgate::app
