#include "kvgate/core/tokenizer.h"

#include <gtest/gtest.h>

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
