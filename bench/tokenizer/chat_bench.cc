// What a multi-turn chat costs the gateway before routing, one thread: the model's chat template
// rendered, the prompt encoded, its blocks hashed. A chat client resends the whole conversation
// every turn; each sample is turn N of a conversation of ~`--tokens` tokens, measured
//   new      the first time the gateway sees the conversation (its messages are new to the
//            encode cache), and
//   warm     right after the same conversation's turn N-1 went through, as it does when the
//            client's previous request came through this gateway (the turn's new messages, an
//            answer and a question of ~`--tokens`/`--turns`/2 tokens each, are encoded),
//   resent   the same request once more (a retry: nothing new to encode), and
//   answered as warm, in a conversation whose previous answer the gateway encoded after
//            sending it (its answer memory, app/answer_memory.h): only the question is new.
//
// Run: build/release/bin/kvgate-bench-chat --tokens 16000 --turns 20 --samples 200
//      (families from ~/.cache/kvgate/tokenizers or $KVGATE_TOKENIZER_DIR)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "kvgate/core/block_hash.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"
#include "kvgate/tokenizer/tokenizer.h"
#include "support/external.h"
#include "tokenizer/corpus.h"

namespace kvgate {
namespace {

using Clock = std::chrono::steady_clock;

using Messages = std::vector<std::pair<std::string, std::string>>;  // role, text

// The first `turns` turns (a user message and, but for the last, the assistant's answer) of
// conversation `c` after a system message, each message about `message_bytes` long.
Messages conversation(const std::vector<std::string>& corpus, size_t c, size_t turns,
                      size_t message_bytes) {
  Messages out = {{"system", "You are a helpful assistant."}};
  size_t next = c * 7919;
  for (size_t t = 0; t < turns; ++t) {
    for (const char* role : {"user", "assistant"}) {
      if (t + 1 == turns && std::string_view(role) == "assistant") break;
      std::string text = "Turn " + std::to_string(t) + " of chat " + std::to_string(c) + ". ";
      while (text.size() < message_bytes) text += corpus[next++ % corpus.size()] + " ";
      out.emplace_back(role, std::move(text));
    }
  }
  return out;
}

// The "messages" JSON of the first `count` messages.
std::string json_of(const Messages& m, size_t count) {
  std::string out;
  JsonWriter w(&out);
  w.begin_array();
  for (size_t i = 0; i < count && i < m.size(); ++i) {
    w.begin_object().member("role", m[i].first).member("content", m[i].second).end_object();
  }
  w.end_array();
  return out;
}

struct Cost {
  double render_us = 0, encode_us = 0, hash_us = 0, total_us = 0;
  size_t tokens = 0;
};

Cost one_request(const tokenizer::PromptTokenizer& tok, const std::string& messages) {
  thread_local std::vector<TokenId> ids;
  thread_local std::vector<SeqHash> seq;
  static const BlockHasher hasher;
  ids.clear();
  seq.clear();
  const auto t0 = Clock::now();
  auto text = tok.render_chat({.messages_json = messages});
  const auto t1 = Clock::now();
  if (!text.ok() || !tok.encode_chat(*text, static_cast<size_t>(-1), &ids).ok()) {
    std::fprintf(stderr, "cannot render or encode: %s\n", text.status().ToString().c_str());
    std::exit(1);
  }
  const auto t2 = Clock::now();
  hasher.hash_blocks(ids, 16, nullptr, &seq);
  const auto t3 = Clock::now();
  const auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
  return {us(t1 - t0), us(t2 - t1), us(t3 - t2), us(t3 - t0), ids.size()};
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace
}  // namespace kvgate

int main(int argc, char** argv) {
  using namespace kvgate;
  CLI::App app{"Render + encode + hash cost of a long multi-turn chat, cold and with the cache"};
  size_t tokens = 16'000, turns = 20, samples = 200;
  std::vector<std::string> families = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"};
  app.add_option("--tokens", tokens, "Tokens of the last turn's prompt (about)")
      ->capture_default_str();
  app.add_option("--turns", turns, "Turns in the conversation")->capture_default_str();
  app.add_option("--samples", samples, "Conversations measured per family")->capture_default_str();
  app.add_option("--families", families, "Tokenizer folders under the tokenizer cache")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> corpus = tokenizer::testing::make_corpus(20'000, 5);
  std::printf("%zu-turn chats of ~%zu tokens, %zu conversations per family, one thread\n", turns,
              tokens, samples);
  std::printf("%-12s %7s | %-20s | %-20s | %-34s | %-15s | %-16s | %s\n", "family", "tokens",
              "new p50 / p99 (us)", "warm p50 / p99 (us)", "warm p50: render / encode / hash (us)",
              "resent p50 (us)", "answered p50/p99", "answered p50: encode + hash (us)");
  for (const std::string& family : families) {
    const std::string folder = testing::tokenizer_dir() + "/" + family;
    auto warm_tok = tokenizer::load_prompt_tokenizer(folder);
    if (!warm_tok.ok()) {
      std::fprintf(stderr, "%s: %s\n", family.c_str(), warm_tok.status().ToString().c_str());
      return 1;
    }
    const tokenizer::PromptTokenizer& warm = **warm_tok;
    // Size the messages so the last turn has about `tokens` tokens.
    const size_t messages = 2 * turns;
    size_t message_bytes = tokens * 4 / messages;
    const Cost probe =
        one_request(warm, json_of(conversation(corpus, 999'999, turns, message_bytes), -1));
    message_bytes =
        static_cast<size_t>(static_cast<double>(message_bytes) * static_cast<double>(tokens) /
                            static_cast<double>(std::max<size_t>(1, probe.tokens)));

    std::vector<double> cold, warm_total, warm_render, warm_encode, warm_hash, resent;
    std::vector<double> answered_total, answered_encode_hash;
    size_t last_tokens = 0;
    for (size_t c = 0; c < samples; ++c) {
      const Messages m = conversation(corpus, c, turns, message_bytes);
      const std::string before = json_of(m, m.size() - 2);  // the client's previous request
      const std::string now = json_of(m, m.size());
      cold.push_back(
          one_request(warm, json_of(conversation(corpus, samples + c, turns, message_bytes), -1))
              .total_us);
      one_request(warm, before);
      const Cost w = one_request(warm, now);
      warm_total.push_back(w.total_us);
      warm_render.push_back(w.render_us);
      warm_encode.push_back(w.encode_us);
      warm_hash.push_back(w.hash_us);
      last_tokens = w.tokens;
      resent.push_back(one_request(warm, now).total_us);
      // Another conversation whose previous answer the gateway encoded after sending it.
      const Messages a = conversation(corpus, 2 * samples + c, turns, message_bytes);
      one_request(warm, json_of(a, a.size() - 2));
      const std::optional<std::string> next =
          tokenizer::next_turn_messages(json_of(a, a.size() - 2), a[a.size() - 2].second);
      auto next_text = warm.render_chat({.messages_json = *next});
      thread_local std::vector<TokenId> next_ids;
      next_ids.clear();
      if (!next_text.ok() ||
          !warm.encode_chat(*next_text, static_cast<size_t>(-1), &next_ids).ok()) {
        std::fprintf(stderr, "cannot encode the next turn: %s\n",
                     next_text.status().ToString().c_str());
        return 1;
      }
      const Cost after = one_request(warm, json_of(a, a.size()));
      answered_total.push_back(after.total_us);
      answered_encode_hash.push_back(after.encode_us + after.hash_us);
    }
    std::printf(
        "%-12s %7zu | %8.0f / %-9.0f | %8.0f / %-9.0f | %8.0f / %5.0f / %-15.1f | %-15.0f | %8.0f "
        "/ %-5.0f | %.0f\n",
        family.c_str(), last_tokens, percentile(cold, 0.5), percentile(cold, 0.99),
        percentile(warm_total, 0.5), percentile(warm_total, 0.99), percentile(warm_render, 0.5),
        percentile(warm_encode, 0.5), percentile(warm_hash, 0.5), percentile(resent, 0.5),
        percentile(answered_total, 0.5), percentile(answered_total, 0.99),
        percentile(answered_encode_hash, 0.5));
    if (const tokenizer::Tokenizer* model = warm.model()) {
      const tokenizer::EncodeCacheStats st = model->encode_cache_stats();
      std::fprintf(stderr, "  %s encode cache: %llu hits, %llu misses, %llu evictions\n",
                   family.c_str(), static_cast<unsigned long long>(st.hits),
                   static_cast<unsigned long long>(st.misses),
                   static_cast<unsigned long long>(st.evictions));
    }
  }
  return 0;
}
