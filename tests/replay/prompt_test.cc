#include "replay/prompt.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kvgate/core/block_hash.h"
#include "simdjson.h"

namespace kvgate::replay {
namespace {

corpus::TraceRow row(std::vector<uint64_t> ids, uint64_t input_length, uint64_t output = 10) {
  corpus::TraceRow r;
  r.hash_ids = std::move(ids);
  r.input_length = input_length;
  r.output_length = output;
  return r;
}

TEST(ParseRows, Forms) {
  auto all = parse_rows("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->begin, 0u);
  EXPECT_EQ(all->end, std::numeric_limits<size_t>::max());
  auto ab = parse_rows("10:20");
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(ab->begin, 10u);
  EXPECT_EQ(ab->end, 20u);
  auto from = parse_rows("7:");
  ASSERT_TRUE(from.ok());
  EXPECT_EQ(from->begin, 7u);
  EXPECT_EQ(from->end, std::numeric_limits<size_t>::max());
  auto to = parse_rows(":300");
  ASSERT_TRUE(to.ok());
  EXPECT_EQ(to->begin, 0u);
  EXPECT_EQ(to->end, 300u);
  auto one = parse_rows("5");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->begin, 5u);
  EXPECT_EQ(one->end, 6u);
}

TEST(ParseRows, Rejects) {
  for (const char* bad : {"x", "1:x", "5:3", "4:4", "-1:2", "1:2:3", " 1:2"}) {
    EXPECT_FALSE(parse_rows(bad).ok()) << bad;
  }
}

TEST(LengthFactor, TokensPerId) {
  EXPECT_EQ(*block_tokens_for_length_factor(1.0), 512u);
  EXPECT_EQ(*block_tokens_for_length_factor(0.25), 128u);
  EXPECT_EQ(*block_tokens_for_length_factor(1e-9), 1u);
  for (double bad : {0.0, -0.5, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(block_tokens_for_length_factor(bad).ok()) << bad;
  }
  EXPECT_FALSE(validate({.block_tokens = 0}).ok());
  EXPECT_FALSE(validate({.block_tokens = 513}).ok());
  EXPECT_FALSE(validate({.block_tokens = 16, .vocab = 1}).ok());
  EXPECT_TRUE(validate({.block_tokens = 16}).ok());
}

TEST(PromptBuilder, LengthFollowsInputLengthAndBlockTokens) {
  PromptBuilder full({});
  // 6758 tokens over 14 ids: 13 full blocks and 102 tokens of the 14th.
  EXPECT_EQ(full.prompt_tokens(row({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, 6758)), 6758u);
  PromptBuilder quarter({.block_tokens = 128});
  EXPECT_EQ(quarter.prompt_tokens(row({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, 6758)),
            1690u);  // ceil(6758 / 4)
  // Inconsistent rows are clamped into the last id's block.
  EXPECT_EQ(full.prompt_tokens(row({1, 2}, 100)), 513u);
  EXPECT_EQ(full.prompt_tokens(row({1, 2}, 5000)), 1024u);
  EXPECT_EQ(full.prompt_tokens(row({}, 100)), 0u);
  std::vector<TokenId> t;
  full.build(row({3, 4}, 700), &t);
  EXPECT_EQ(t.size(), 700u);
}

TEST(PromptBuilder, EqualIdsGiveEqualTokensAndDifferentIdsDiffer) {
  PromptBuilder b({.block_tokens = 64, .seed = 7, .vocab = 1000});
  std::vector<TokenId> a, c, d;
  b.build(row({5, 6, 7}, 3 * 512), &a);
  b.build(row({5, 6, 9}, 3 * 512), &c);
  b.build(row({8, 6, 7}, 3 * 512), &d);
  ASSERT_EQ(a.size(), 192u);
  ASSERT_EQ(c.size(), 192u);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 128, c.begin()));
  EXPECT_FALSE(std::equal(a.begin() + 128, a.end(), c.begin() + 128));
  // The same id at another position gives the same tokens (content, not position).
  EXPECT_TRUE(std::equal(a.begin() + 64, a.end(), d.begin() + 64));
  EXPECT_FALSE(std::equal(a.begin(), a.begin() + 64, d.begin()));
  for (TokenId x : a) EXPECT_LT(x, 1000u);
  // Another seed, other tokens.
  PromptBuilder other({.block_tokens = 64, .seed = 8, .vocab = 1000});
  std::vector<TokenId> e;
  other.build(row({5, 6, 7}, 3 * 512), &e);
  EXPECT_NE(a, e);
}

TEST(PromptBuilder, SharedIdsAreSharedBlockChainsAtTheEngineBlockSize) {
  PromptBuilder b({});
  std::vector<TokenId> a, c;
  b.build(row({0, 1, 2}, 1500), &a);
  b.build(row({0, 1, 3}, 1400), &c);
  BlockHasher h;
  std::vector<SeqHash> sa, sc;
  h.hash_blocks(a, 16, nullptr, &sa);
  h.hash_blocks(c, 16, nullptr, &sc);
  ASSERT_EQ(sa.size(), 1500u / 16);
  ASSERT_EQ(sc.size(), 1400u / 16);
  size_t common = 0;
  while (common < sc.size() && sa[common] == sc[common]) ++common;
  EXPECT_EQ(common, 2u * 512 / 16);  // two shared ids, 32 blocks each
}

TEST(CompletionBody, IsTheRequestTheMockAndGatewayRead) {
  std::string body;
  completion_body("mock-8b \"q\"", {1, 22, 333}, 17, &body);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(body).get(doc), simdjson::SUCCESS) << body;
  EXPECT_EQ(std::string_view(doc["model"].get_string().value()), "mock-8b \"q\"");
  auto prompt = doc["prompt"].get_array().value();
  std::vector<uint64_t> ids;
  for (auto e : prompt) ids.push_back(e.get_uint64().value());
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 22, 333}));
  EXPECT_EQ(doc["max_tokens"].get_uint64().value(), 17u);
  EXPECT_TRUE(doc["stream"].get_bool().value());
  EXPECT_TRUE(doc["stream_options"]["include_usage"].get_bool().value());
}

}  // namespace
}  // namespace kvgate::replay
