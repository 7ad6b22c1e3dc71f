// Encode throughput, one thread: kvgate's tokenizer against Hugging Face's tokenizers (Rust,
// through npm @anush008/tokenizers, which tools/setup.sh installs) on the same documents in the
// same run. Documents are ~32 KB joins of the tokenizer tests' corpus (prose, code, JSON, CJK,
// Arabic, emoji, digit and whitespace runs, special-token strings).
//
// Run: build/release/bin/kvgate-bench-tokenizer --mb 4 --runs 3
//      (families from ~/.cache/kvgate/tokenizers or $KVGATE_TOKENIZER_DIR)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kvgate/core/json_writer.h"
#include "kvgate/tokenizer/tokenizer.h"
#include "simdjson.h"
#include "support/external.h"
#include "tokenizer/corpus.h"

namespace kvgate {
namespace {

std::vector<std::string> make_documents(size_t total_bytes) {
  const std::vector<std::string> corpus = tokenizer::testing::make_corpus(20'000, 11);
  std::vector<std::string> docs(1);
  size_t total = 0;
  for (size_t i = 0; total < total_bytes; i = (i + 1) % corpus.size()) {
    if (docs.back().size() >= (32u << 10)) docs.emplace_back();
    docs.back() += corpus[i];
    docs.back() += '\n';
    total += corpus[i].size() + 1;
  }
  return docs;
}

// Seconds and tokens of one pass of the Rust reference (the median of `runs` runs).
bool reference(const std::string& tokenizer_json, const std::string& docs_file, int runs,
               double* seconds, uint64_t* tokens) {
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    const std::string cmd = "NODE_PATH=" + testing::npm_dir() + "/node_modules node " +
                            KVGATE_SOURCE_DIR + "/bench/tokenizer/reference_encode.cjs " +
                            tokenizer_json + " " + docs_file;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return false;
    char line[256] = {};
    const bool got = std::fgets(line, sizeof line, p) != nullptr;
    if (pclose(p) != 0 || !got) return false;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(line, std::strlen(line)).get(doc) != simdjson::SUCCESS) return false;
    times.push_back(doc["seconds"].get_double().value());
    *tokens = doc["tokens"].get_uint64().value();
  }
  std::sort(times.begin(), times.end());
  *seconds = times[times.size() / 2];
  return true;
}

}  // namespace
}  // namespace kvgate

int main(int argc, char** argv) {
  using namespace kvgate;
  CLI::App app("kvgate's tokenizer against Hugging Face's tokenizers: encode throughput");
  double mb = 4;
  int runs = 3;
  std::vector<std::string> families = {"qwen3", "llama3_1", "deepseek_v3", "gemma3", "llama2"};
  app.add_option("--mb", mb, "Megabytes of text per pass")->capture_default_str();
  app.add_option("--runs", runs, "Runs per side; the median is reported")->capture_default_str();
  app.add_option("--families", families, "Tokenizer folders under the tokenizer cache");
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> docs = make_documents(static_cast<size_t>(mb * (1 << 20)));
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  const std::string docs_file =
      (std::filesystem::temp_directory_path() / "kvgate-bench-tokenizer.jsonl").string();
  {
    std::ofstream f(docs_file, std::ios::binary);
    for (const auto& d : docs) {
      std::string line;
      JsonWriter(&line).value(d);
      f << line << '\n';
    }
  }
  std::printf("%zu documents, %.2f MB, one thread, median of %d runs\n", docs.size(),
              bytes / 1048576.0, runs);
  std::printf("| family | tokens | kvgate MB/s | kvgate Mtok/s | HF MB/s | HF Mtok/s | ratio |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::string& family : families) {
    const std::string path = testing::tokenizer_dir() + "/" + family + "/tokenizer.json";
    // No encode cache: every pass encodes every text, as the reference does.
    auto tok = tokenizer::load_tokenizer(path, /*encode_cache_bytes=*/0);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s: %s\n", family.c_str(), std::string(tok.status().message()).c_str());
      return 1;
    }
    std::vector<TokenId> ids;
    std::vector<double> times;
    uint64_t ours_tokens = 0;
    for (int r = 0; r <= runs; ++r) {  // the first pass warms up
      ours_tokens = 0;
      const auto start = std::chrono::steady_clock::now();
      for (const auto& d : docs) {
        ids.clear();
        (void)(*tok)->encode(d, false, &ids);
        ours_tokens += ids.size();
      }
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (r > 0) times.push_back(s);
    }
    std::sort(times.begin(), times.end());
    const double ours = times[times.size() / 2];
    double theirs = 0;
    uint64_t their_tokens = 0;
    if (!reference(path, docs_file, runs, &theirs, &their_tokens)) {
      std::fprintf(stderr, "%s: the reference did not run (tools/setup.sh installs it)\n",
                   family.c_str());
      return 1;
    }
    std::printf("| %s | %llu%s | %.1f | %.2f | %.1f | %.2f | %.2fx |\n", family.c_str(),
                static_cast<unsigned long long>(ours_tokens),
                ours_tokens == their_tokens ? "" : " (HF differs!)", bytes / 1048576.0 / ours,
                ours_tokens / ours / 1e6, bytes / 1048576.0 / theirs, their_tokens / theirs / 1e6,
                theirs / ours);
  }
  std::filesystem::remove(docs_file);
  return 0;
}
