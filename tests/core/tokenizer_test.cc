#include "kvgate/core/tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace kvgate {
namespace {

TEST(TestTokenizer, DeterministicAndPinned) {
  const TestTokenizer t;
  const auto a = t.encode("Hello, world! The quick brown fox.");
  EXPECT_EQ(a, t.encode("Hello, world! The quick brown fox."));
  // "Hell" "o" "," " " "worl" "d" "!" " " "The" " " "quic" "k" " " "brow" "n" " " "fox" "."
  EXPECT_EQ(a.size(), 18u);
  for (TokenId id : a) {
    EXPECT_GE(id, 256u);
    EXPECT_LT(id, TestTokenizer::kDefaultVocab);
  }
  EXPECT_EQ(a[0], 4983u);  // 256 + XXH3_64("Hell") % 31744
}

// The ids of every byte value, runs of each class and multi-byte characters, folded into one
// FNV-1a value per vocabulary: pins the rule itself (a faster implementation must give the same
// ids, or every index built from the mock fleet's events would disagree with the gateway).
TEST(TestTokenizer, EveryByteValueGivesThePinnedIds) {
  std::string text;
  for (int c = 0; c < 256; ++c) {
    text.push_back(static_cast<char>(c));
    if (c % 7 == 0) text += " word\t\tx  ";
  }
  text +=
      "The quick brown fox jumps over the lazy dog 0123456789 \xc3\xa9t\xc3\xa9 {\"a\":[1,2]}\r\n";
  const std::pair<uint32_t, uint64_t> pinned[] = {{512, 4927701030631441063ull},
                                                  {32000, 3973127434970739111ull},
                                                  {151936, 17795135635999497255ull}};
  for (const auto& [vocab, folded] : pinned) {
    const std::vector<TokenId> ids = TestTokenizer(vocab).encode(text);
    EXPECT_EQ(ids.size(), 347u) << vocab;
    uint64_t h = 14695981039346656037ull;
    for (TokenId id : ids) {
      h ^= id;
      h *= 1099511628211ull;
    }
    EXPECT_EQ(h, folded) << vocab;
  }
}

TEST(TestTokenizer, PrefixOfTextGivesPrefixOfTokensAtPieceBoundaries) {
  const TestTokenizer t;
  const std::string head = "system: you are helpful. ";
  const auto a = t.encode(head + "question one");
  const auto b = t.encode(head + "another question");
  const auto h = t.encode(head);
  ASSERT_GE(a.size(), h.size());
  EXPECT_TRUE(std::equal(h.begin(), h.end(), a.begin()));
  EXPECT_TRUE(std::equal(h.begin(), h.end(), b.begin()));
}

TEST(TestTokenizer, AboutFourBytesPerTokenOnWords) {
  const TestTokenizer t;
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "tokenization ";
  const double per_token =
      static_cast<double>(text.size()) / static_cast<double>(t.encode(text).size());
  EXPECT_GT(per_token, 3.0);
  EXPECT_LT(per_token, 5.0);
}

TEST(RenderChat, DocumentedRule) {
  const ChatMessage msgs[] = {{"system", "be brief"}, {"user", "hi"}};
  EXPECT_EQ(render_chat(msgs), "<|system|>\nbe brief\n<|user|>\nhi\n<|assistant|>\n");
}

}  // namespace
}  // namespace kvgate
