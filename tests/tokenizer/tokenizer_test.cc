// The tokenizer's rules on small hand-made tokenizer.json files, where each expected id follows
// from the rule under test (reference_test.cc compares real models' files with Hugging Face).
#include "kvgate/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace kvgate::tokenizer {
namespace {

// A tokenizer.json with `vocab` (a JSON object body), `merges` (a JSON list body) and the other
// sections given as JSON values ("null" for none).
std::string spec(const std::string& vocab, const std::string& merges,
                 const std::string& model_extra = "", const std::string& added = "[]",
                 const std::string& normalizer = "null", const std::string& pre = "null",
                 const std::string& post = "null", const std::string& decoder = "null") {
  return R"({"added_tokens":)" + added + R"(,"normalizer":)" + normalizer + R"(,"pre_tokenizer":)" +
         pre + R"(,"post_processor":)" + post + R"(,"decoder":)" + decoder +
         R"(,"model":{"type":"BPE")" + model_extra + R"(,"vocab":{)" + vocab + R"(},"merges":[)" +
         merges + "]}}";
}

std::unique_ptr<Tokenizer> make(const std::string& json) {
  auto t = parse_tokenizer(json, "test.json");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<TokenId> ids(const Tokenizer& t, std::string_view text, bool special = false) {
  std::vector<TokenId> out;
  EXPECT_TRUE(t.encode(text, special, &out).ok());
  return out;
}

const std::string kAbc = R"("a":0,"b":1,"c":2,"ab":3,"bc":4,"abc":5)";

TEST(Bpe, TheLowestRankMergesFirst) {
  auto bc_first = make(spec(kAbc, R"("b c","a b","a bc")"));
  EXPECT_EQ(ids(*bc_first, "abc"), (std::vector<TokenId>{5}));
  auto no_final = make(spec(kAbc, R"("b c","a b")"));
  EXPECT_EQ(ids(*no_final, "abc"), (std::vector<TokenId>{0, 4})) << "b c (rank 0) took b first";
  auto ab_first = make(spec(kAbc, R"("a b","b c")"));
  EXPECT_EQ(ids(*ab_first, "abc"), (std::vector<TokenId>{3, 2}));
}

TEST(Bpe, AmongEqualRanksTheLeftmostPairMerges) {
  auto t = make(spec(R"("a":0,"aa":1)", R"("a a")"));
  EXPECT_EQ(ids(*t, "aaa"), (std::vector<TokenId>{1, 0}));
  EXPECT_EQ(ids(*t, "aaaa"), (std::vector<TokenId>{1, 1}));
}

TEST(Bpe, MergesListedAsPairsReadLikeStrings) {
  auto t = make(spec(kAbc, R"(["a","b"],["ab","c"])"));
  EXPECT_EQ(ids(*t, "abc"), (std::vector<TokenId>{5}));
}

TEST(Bpe, IgnoreMergesTakesAWholeWordInTheVocabulary) {
  // Merges alone cannot make "abc" here; ignore_merges finds it directly.
  auto t = make(spec(kAbc, R"("a b")", R"(,"ignore_merges":true)"));
  EXPECT_EQ(ids(*t, "abc"), (std::vector<TokenId>{5}));
  auto without = make(spec(kAbc, R"("a b")"));
  EXPECT_EQ(ids(*without, "abc"), (std::vector<TokenId>{3, 2}));
}

TEST(Bpe, AnUnknownCharacterFallsBackToItsBytes) {
  std::string vocab = R"("a":0)";
  for (int b = 0; b < 256; ++b) {
    char name[16];
    std::snprintf(name, sizeof(name), ",\"<0x%02X>\":%d", b, 1 + b);
    vocab += name;
  }
  auto t = make(spec(vocab, "", R"(,"byte_fallback":true)"));
  // U+00E9 is C3 A9.
  EXPECT_EQ(ids(*t, "a\xC3\xA9"), (std::vector<TokenId>{0, 1 + 0xC3, 1 + 0xA9}));
  EXPECT_EQ(t->decode(std::vector<TokenId>{0, 1 + 0xC3, 1 + 0xA9}, false), "a <0xC3> <0xA9>")
      << "with no decoder the tokens are joined by spaces";
}

TEST(Bpe, UnknownCharactersBecomeTheUnknownTokenFusedWhenAsked) {
  const std::string vocab = R"("<unk>":0,"a":1)";
  auto fused = make(spec(vocab, "", R"(,"unk_token":"<unk>","fuse_unk":true)"));
  EXPECT_EQ(ids(*fused, "xya"), (std::vector<TokenId>{0, 1}));
  auto apart = make(spec(vocab, "", R"(,"unk_token":"<unk>")"));
  EXPECT_EQ(ids(*apart, "xya"), (std::vector<TokenId>{0, 0, 1}));
  auto none = make(spec(vocab, ""));
  EXPECT_EQ(ids(*none, "xya"), (std::vector<TokenId>{1})) << "no unk token: dropped";
}

// A SentencePiece model without a pre-tokenizer gets whole lines as words; a long one is cut
// before its word marks, except after a character some token joins to a mark ("b\u2581" here):
// the ids are those of the whole word.
TEST(Bpe, ALongWordIsCutAtWordMarksOnlyWhereNoTokenSpansTheCut) {
  auto t = make(spec(R"("\u2581":0,"a":1,"b":2,"\u2581a":3,"b\u2581":4,"b\u2581a":5,"c":6)",
                     R"("b \u2581","b\u2581 a","\u2581 a")"));
  ASSERT_TRUE(t);
  std::string word;
  std::vector<TokenId> want;
  for (int i = 0; i < 30; ++i) {
    word += "c\u2581a";
    want.insert(want.end(), {6, 3});
  }
  word += "b\u2581a";  // "b\u2581a" is one token: no cut before this mark
  want.push_back(5);
  ASSERT_GT(word.size(), 64u) << "long enough to be cut";
  EXPECT_EQ(ids(*t, word), want);
}

TEST(AddedTokens, SpecialTokensAreCutOutBeforeAnythingElse) {
  const std::string added =
      R"([{"id":9,"content":"<s>","special":true,"normalized":false},
          {"id":8,"content":"<sep>","special":true,"normalized":false,"lstrip":true,"rstrip":true}])";
  auto t = make(spec(R"("a":0," ":1,"<":2,"s":3,">":4)", "", "", added));
  EXPECT_EQ(ids(*t, "a<s>a"), (std::vector<TokenId>{0, 9, 0}));
  EXPECT_EQ(ids(*t, "a <sep> a"), (std::vector<TokenId>{0, 8, 0})) << "lstrip and rstrip";
  EXPECT_EQ(ids(*t, "a <s> a"), (std::vector<TokenId>{0, 1, 9, 1, 0}));
  EXPECT_EQ(ids(*t, "<sep"), (std::vector<TokenId>{2, 3}))
      << "no token matched: the characters, 'e' and 'p' unknown and dropped";
  EXPECT_EQ(t->token_to_id("<s>"), 9u);
  EXPECT_EQ(t->id_to_token(8), "<sep>");
}

TEST(AddedTokens, TheLongestTokenAtAPositionWins) {
  const std::string added = R"([{"id":5,"content":"<a>","special":true,"normalized":false},
                                {"id":6,"content":"<a>>","special":true,"normalized":false}])";
  auto t = make(spec(R"(">":0)", "", "", added));
  EXPECT_EQ(ids(*t, "<a>>>"), (std::vector<TokenId>{6, 0}));
}

// The scan for where a token may start steps sixteen bytes at a time when the tokens begin with
// few distinct bytes, and turns away a start whose second byte no token has: a token is found at
// every offset around those steps, beside near misses ("<a", a lone '\n' of a longer token) and
// a one-byte token followed by anything.
TEST(AddedTokens, FoundAtEveryOffsetAmongNearMisses) {
  const std::string few = R"([{"id":10,"content":"<b>","special":true,"normalized":false},
                              {"id":11,"content":"\n\n","special":false,"normalized":false},
                              {"id":12,"content":"\t","special":false,"normalized":false}])";
  // Seven more first bytes: past what one vector step compares, the byte-table scan runs.
  std::string many = few.substr(0, few.size() - 1);
  for (const char c : std::string("cdefghi")) {
    many += R"(,{"id":)" + std::to_string(20 + (c - 'c')) + R"(,"content":")" + c + c + c +
            R"(","special":true,"normalized":false})";
  }
  many += "]";
  const std::string vocab = R"("a":0,"<":1,"b":2,">":3,"\n":4,"c":5)";
  for (const std::string& added : {few, many}) {
    auto t = make(spec(vocab, "", "", added));
    ASSERT_NE(t, nullptr);
    for (size_t k = 0; k < 40; ++k) {
      const std::string text = std::string(k, 'a') + "<b>\n\n<a\ncc\ta" + std::string(20, 'a') +
                               "<b>" + std::string(k % 5, 'a');
      std::vector<TokenId> want(k, 0);
      for (const TokenId id : {10u, 11u, 1u, 0u, 4u, 5u, 5u, 12u, 0u}) want.push_back(id);
      want.insert(want.end(), 20, 0);
      want.push_back(10);
      want.insert(want.end(), k % 5, 0);
      EXPECT_EQ(ids(*t, text), want) << "offset " << k << (added == few ? ", few" : ", many");
    }
  }
}

// A text that begins with a whole text encoded before (up to a special token) takes that text's
// ids and cuts only the rest; a special token that a longer token holds is no such place, since
// what follows it decides how it is cut.
TEST(EncodeCache, ATextResumesAfterAWholePrefixOnlyWhereNothingCanReachAcross) {
  const std::string vocab = R"("a":0,"b":1,"!":2,"<":3,">":4,"e":5,"o":6,"t":7)";
  const std::string eot = R"({"id":50,"content":"<eot>","special":true,"normalized":false})";
  const std::string longer = R"({"id":51,"content":"<eot>!","special":false,"normalized":false})";
  const std::string first = std::string(1100, 'a') + "<eot>";
  const auto a_then = [](std::vector<TokenId> tail) {
    std::vector<TokenId> out(1100, 0);
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  };
  auto safe = make(spec(vocab, "", "", "[" + eot + "]"));
  EXPECT_EQ(ids(*safe, first), a_then({50}));
  EXPECT_EQ(ids(*safe, first + "bb"), a_then({50, 1, 1}));
  EXPECT_EQ(safe->encode_cache_stats().prefix_hits, 1u) << "resumed after <eot>";
  auto held = make(spec(vocab, "", "", "[" + eot + "," + longer + "]"));
  EXPECT_EQ(ids(*held, first), a_then({50}));
  EXPECT_EQ(ids(*held, first + "!b"), a_then({51, 1})) << "<eot>! is the longer token there";
  EXPECT_EQ(held->encode_cache_stats().prefix_hits, 0u);
}

TEST(PostProcessor, TheTemplateAddsItsTokensOnlyWhenAsked) {
  const std::string post =
      R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<bos>","type_id":0}},
          {"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"<eos>","type_id":0}}],
          "special_tokens":{"<bos>":{"id":"<bos>","ids":[7],"tokens":["<bos>"]},
                            "<eos>":{"id":"<eos>","ids":[8],"tokens":["<eos>"]}}})";
  auto t = make(spec(R"("a":0)", "", "", "[]", "null", "null", post));
  EXPECT_EQ(ids(*t, "a", true), (std::vector<TokenId>{7, 0, 8}));
  EXPECT_EQ(ids(*t, "a", false), (std::vector<TokenId>{0}));
  EXPECT_EQ(ids(*t, "", true), (std::vector<TokenId>{7, 8}));
}

TEST(PreTokenizer, SplitBehavioursCutAsNamed) {
  const std::string vocab = R"("a":0,"-":1,"a-":2,"-a":3,"b":4)";
  const std::string merges = R"("a -","- a")";
  const auto with = [&](const char* behavior) {
    return make(spec(vocab, merges, "", "[]", "null",
                     std::string(R"({"type":"Split","pattern":{"String":"-"},"behavior":")") +
                         behavior + R"(","invert":false})"));
  };
  // Without the split "a-a" would merge "a -" first.
  EXPECT_EQ(ids(*with("Isolated"), "a-a"), (std::vector<TokenId>{0, 1, 0}));
  EXPECT_EQ(ids(*with("Removed"), "a-a"), (std::vector<TokenId>{0, 0}));
  EXPECT_EQ(ids(*with("MergedWithPrevious"), "a-a"), (std::vector<TokenId>{2, 0}));
  EXPECT_EQ(ids(*with("MergedWithNext"), "a-a"), (std::vector<TokenId>{0, 3}));
}

TEST(PreTokenizer, RegexSplitUsesUnicodeClasses) {
  const std::string pre =
      R"({"type":"Split","pattern":{"Regex":"\\p{L}+|\\p{N}{1,3}"},"behavior":"Isolated",
          "invert":false})";
  // Without splitting, "ab12" would merge into one token.
  auto t = make(spec(R"("a":0,"b":1,"1":2,"2":3,"ab":4,"12":5,"ab1":6,"ab12":7)",
                     R"("a b","1 2","ab 1","ab1 2")", "", "[]", "null", pre));
  EXPECT_EQ(ids(*t, "ab12"), (std::vector<TokenId>{4, 5}));
}

TEST(ByteLevel, BytesBecomePrintableCharactersBothWays) {
  // GPT-2's alphabet: space is U+0120 (Ġ), 'a' is itself.
  auto t = make(spec(R"("a":0,"\u0120":1,"\u0120a":2)", R"("\u0120 a")", "", "[]", "null",
                     R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})", "null",
                     R"({"type":"ByteLevel"})"));
  EXPECT_EQ(ids(*t, "a a"), (std::vector<TokenId>{2, 2})) << "a prefix space, then ' a'";
  EXPECT_EQ(t->decode(std::vector<TokenId>{2, 2}, false), " a a");
}

TEST(Metaspace, SpacesBecomeTheReplacementAndDecodeBack) {
  auto t = make(spec(R"("\u2581a":0,"\u2581":1,"a":2)", R"("\u2581 a")", "", "[]", "null",
                     R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"always",
                         "split":true})",
                     "null", R"({"type":"Metaspace","replacement":"\u2581",
                                 "prepend_scheme":"always","split":true})"));
  EXPECT_EQ(ids(*t, "a a"), (std::vector<TokenId>{0, 0}));
  EXPECT_EQ(t->decode(std::vector<TokenId>{0, 0}, false), "a a");
}

TEST(Normalizer, SentencePieceStyleReplaceAndPrepend) {
  const std::string normalizer =
      R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"\u2581"},
          {"type":"Replace","pattern":{"String":" "},"content":"\u2581"}]})";
  auto t = make(spec(R"("\u2581a":0,"\u2581":1,"a":2)", R"("\u2581 a")", "", "[]", normalizer));
  EXPECT_EQ(ids(*t, "a a"), (std::vector<TokenId>{0, 0}));
}

TEST(Normalizer, NfcComposesAndLowercaseLowers) {
  const std::string vocab = R"("\u00e9":0,"e":1,"\u0301":2)";
  auto nfc = make(spec(vocab, "", "", "[]", R"({"type":"NFC"})"));
  EXPECT_EQ(ids(*nfc, "e\xCC\x81"), (std::vector<TokenId>{0}));
  auto raw = make(spec(vocab, ""));
  EXPECT_EQ(ids(*raw, "e\xCC\x81"), (std::vector<TokenId>{1, 2}));
  auto lower = make(spec(vocab, "", "", "[]", R"({"type":"Lowercase"})"));
  EXPECT_EQ(ids(*lower, "\xC3\x89"), (std::vector<TokenId>{0}));
}

TEST(Errors, InvalidUtf8IsRefusedNotEncoded) {
  auto t = make(spec(R"("a":0)", ""));
  std::vector<TokenId> out;
  const Status s = t->encode("a\xC3(", false, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->encode("\xF5\x80\x80\x80", false, &out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Errors, WhatCannotBeEncodedExactlyIsALoadErrorNamingIt) {
  const auto error = [](const std::string& json) {
    auto t = parse_tokenizer(json, "model.json");
    return t.ok() ? std::string("loaded") : std::string(t.status().message());
  };
  EXPECT_NE(error(R"({"model":{"type":"Unigram","vocab":[]}})").find("model type \"Unigram\""),
            std::string::npos);
  EXPECT_NE(error(spec(R"("a":0)", "", "", "[]", R"({"type":"BertNormalizer"})"))
                .find("normalizer type \"BertNormalizer\""),
            std::string::npos);
  EXPECT_NE(error(spec(R"("a":0)", R"("a b")")).find("model.merges[0]"), std::string::npos);
  EXPECT_NE(error("{not json").find("model.json: not JSON"), std::string::npos);
  EXPECT_FALSE(load_tokenizer("/nonexistent/tokenizer.json").ok());
}

// A conversation resent with one more turn: its earlier stretches come from the cache, with the
// ids an uncached encode gives.
TEST(EncodeCache, ARepeatedStretchIsServedFromTheCacheWithTheSameIds) {
  const std::string added = R"([{"id":9,"content":"<s>","special":true,"normalized":false}])";
  const std::string json = spec(kAbc, R"("a b","b c","a bc")", "", added);
  auto cached = make(json);
  auto plain = parse_tokenizer(json, "test.json", /*encode_cache_bytes=*/0);
  ASSERT_TRUE(plain.ok());
  std::string turns;
  for (int turn = 0; turn < 6; ++turn) {
    turns += "<s>";
    for (int i = 0; i < 100 + turn; ++i) turns += turn % 2 ? "abc" : "bca";
    const EncodeCacheStats before = cached->encode_cache_stats();
    EXPECT_EQ(ids(*cached, turns), ids(**plain, turns)) << "turn " << turn;
    const EncodeCacheStats st = cached->encode_cache_stats();
    EXPECT_EQ(st.misses, static_cast<uint64_t>(turn + 1)) << "only the new stretch is encoded";
    // The earlier stretches one by one, or, once the previous turn kept its text up to its last
    // <s> (past kMinPrefixBytes), that prefix at once and the previous turn's stretch.
    const uint64_t hits = st.hits - before.hits;
    const uint64_t prefix_hits = st.prefix_hits - before.prefix_hits;
    EXPECT_TRUE((prefix_hits == 0 && hits == static_cast<uint64_t>(turn)) ||
                (prefix_hits == 1 && hits == 2))
        << "turn " << turn << ": " << hits << " hits, " << prefix_hits << " of a prefix";
    if (turn == 5) {
      EXPECT_EQ(prefix_hits, 1u);
    }
  }
  EXPECT_EQ((*plain)->encode_cache_stats().entries, 0u);
  // A short stretch is never cached: hashing it would cost more than encoding it.
  const uint64_t entries = cached->encode_cache_stats().entries;
  ids(*cached, "<s>abc<s>abc");
  EXPECT_EQ(cached->encode_cache_stats().entries, entries);
}

// Stretches too short for the shared cache go through a memo of the thread's own: keyed by the
// tokenizer and by whether the stretch begins the input, as the ids are.
TEST(EncodeCache, ShortStretchesAreRememberedPerTokenizerAndPerPlaceInTheInput) {
  const std::string added = R"([{"id":9,"content":"<s>","special":true,"normalized":false}])";
  const std::string metaspace =
      R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":true})";
  const std::string vocab = kAbc + R"(,"\u2581":6)";
  auto merging = make(spec(vocab, R"("a b","b c","a bc")", "", added, "null", metaspace));
  auto unmerged = make(spec(vocab, "", "", added, "null", metaspace));
  ASSERT_TRUE(merging && unmerged);
  for (int round = 0; round < 3; ++round) {
    // "abc" begins the input: Metaspace's "first" scheme marks it; after <s> it does not.
    EXPECT_EQ(ids(*merging, "abc"), (std::vector<TokenId>{6, 3, 2})) << round;
    EXPECT_EQ(ids(*merging, "<s>abc"), (std::vector<TokenId>{9, 3, 2})) << round;
    EXPECT_EQ(ids(*unmerged, "abc"), (std::vector<TokenId>{6, 0, 1, 2})) << round;
    EXPECT_EQ(ids(*unmerged, "<s>abc"), (std::vector<TokenId>{9, 0, 1, 2})) << round;
  }
  EXPECT_EQ(merging->encode_cache_stats().entries, 0u) << "short stretches stay out of it";
}

// The cuts between two special tokens (a message cut at a non-special token such as Gemma 3's
// newline) are one entry: one lookup when the message comes back, the ids those of its cuts.
// The entry is keyed by how the span was cut as well as by its bytes: the same bytes at the start
// of the input are cut as the first stretch there, and Metaspace's "first" scheme marks it.
TEST(EncodeCache, ASpanBetweenSpecialTokensIsOneEntryKeyedByItsCuts) {
  const std::string added = R"([{"id":9,"content":"<s>","special":true,"normalized":false},)"
                            R"({"id":8,"content":"\n","special":false,"normalized":false}])";
  const std::string metaspace =
      R"({"type":"Metaspace","replacement":"\u2581","prepend_scheme":"first","split":true})";
  const std::string json =
      spec(kAbc + R"(,"\u2581":6)", R"("a b","b c","a bc")", "", added, "null", metaspace);
  auto cached = make(json);
  auto plain = parse_tokenizer(json, "test.json", /*encode_cache_bytes=*/0);
  ASSERT_TRUE(cached && plain.ok());
  std::string message;
  for (int line = 0; line < 8; ++line) message += std::string(5 + line, 'a') + "bc\n";
  ASSERT_GE(message.size(), 32u);
  for (int round = 0; round < 3; ++round) {
    for (const std::string& text : {message, "<s>" + message, message + "<s>" + message}) {
      EXPECT_EQ(ids(*cached, text), ids(**plain, text)) << "round " << round << ": " << text;
    }
  }
  EXPECT_EQ(ids(*cached, message).front(), 6u) << "the first stretch is marked";
  EXPECT_NE(ids(*cached, "<s>" + message)[1], 6u) << "after <s> it is not";
  const EncodeCacheStats before = cached->encode_cache_stats();
  ids(*cached, "<s>" + message + "<s>" + message);
  const EncodeCacheStats after = cached->encode_cache_stats();
  EXPECT_EQ(after.hits - before.hits, 2u) << "one lookup per span, not one per line";
  EXPECT_EQ(after.misses, before.misses);
}

TEST(EncodeCache, OverItsBudgetTheLeastRecentlyUsedGoFirst) {
  const std::string added = R"([{"id":9,"content":"<s>","special":true,"normalized":false}])";
  const std::string json = spec(kAbc, R"("a b","b c","a bc")", "", added);
  auto small = parse_tokenizer(json, "test.json", /*encode_cache_bytes=*/64 << 10);
  auto plain = parse_tokenizer(json, "test.json", 0);
  ASSERT_TRUE(small.ok() && plain.ok());
  for (int i = 0; i < 400; ++i) {
    const std::string text = std::string(300 + i, 'a') + "<s>" + std::string(300, 'b');
    ASSERT_EQ(ids(**small, text), ids(**plain, text));
  }
  const EncodeCacheStats st = (*small)->encode_cache_stats();
  EXPECT_GT(st.evictions, 0u);
  EXPECT_LE(st.bytes, 64u << 10);
  EXPECT_GT(st.hits, 350u) << "the repeated second stretch stays";
}

// Threads that share a tokenizer share its encode cache: the same ids on every thread, and under
// ThreadSanitizer no race between finds, inserts and evictions.
TEST(EncodeCache, ThreadsSharingItGetTheIdsOfOneThread) {
  const std::string added = R"([{"id":9,"content":"<s>","special":true,"normalized":false}])";
  const std::string json = spec(kAbc, R"("a b","b c","a bc")", "", added);
  auto shared = parse_tokenizer(json, "test.json", /*encode_cache_bytes=*/32 << 10);
  auto plain = parse_tokenizer(json, "test.json", 0);
  ASSERT_TRUE(shared.ok() && plain.ok());
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    texts.push_back(std::string(40 + i % 7, 'a') + "<s>" + std::string(33 + i, 'b') + "<s>abc");
  }
  std::vector<std::vector<TokenId>> expected;
  for (const std::string& t : texts) expected.push_back(ids(**plain, t));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 200; ++round) {
        const size_t i = static_cast<size_t>(round * 7 + k) % texts.size();
        std::vector<TokenId> out;
        if (!(*shared)->encode(texts[i], false, &out).ok() || out != expected[i]) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT((*shared)->encode_cache_stats().hits, 0u);
}

}  // namespace
}  // namespace kvgate::tokenizer
