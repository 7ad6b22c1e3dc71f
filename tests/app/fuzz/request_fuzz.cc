// libFuzzer target for the request model: a client's body, as the gateway reads it to route it
// (built only with KVGATE_BUILD_FUZZ, under ASan+UBSan). Run by tools/ci-extra/fuzz.sh with the
// seed corpus in corpus/.
//
// The first byte picks the route (its value modulo the route count), whether the prompt is
// limited to 64 tokens (bit 3) and whether the model chooses the tokenizer (bit 4: "llama" gets
// Llama 3.1's, from the files tools/setup.sh fetches, when they are there; then the model is looked
// up before the body is walked); the rest is the body. Beyond "no crash, no leak, no UB", it checks
// what the gateway relies on: a body is accepted or refused with a client error (400), an accepted
// prompt fits the limit, a second parse of the same body gives the same answer (nothing leaks
// between requests through the per-thread parser), and the raw-length scan stays in the body.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "app/request_model.h"
#include "support/external.h"

namespace {

using kvgate::app::ApiRoute;
using kvgate::app::ParsedRequest;

bool client_error(const kvgate::Status& s) {
  return s.ok() || absl::IsInvalidArgument(s) || absl::IsOutOfRange(s);
}

bool same(const ParsedRequest& a, const ParsedRequest& b) {
  return a.model == b.model && a.stream == b.stream &&
         a.has_stream_options == b.has_stream_options && a.include_usage == b.include_usage &&
         a.cache_salt == b.cache_salt && a.tokens == b.tokens && a.tokens_given == b.tokens_given;
}

// "llama=" Llama 3.1's tokenizer, others the test tokenizer; the test tokenizer alone when the
// files are missing.
const kvgate::app::PromptTokenizers& per_model() {
  static const kvgate::app::PromptTokenizers tokenizers = [] {
    auto loaded = kvgate::app::PromptTokenizers::load(
        {"llama=" + kvgate::testing::tokenizer_dir() + "/llama3_1/tokenizer.json"});
    return loaded.ok() ? *std::move(loaded) : kvgate::app::PromptTokenizers();
  }();
  return tokenizers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const kvgate::app::PromptTokenizers test_only;  // the test tokenizer, for every model
  const kvgate::app::PromptTokenizers& tokenizers = (data[0] & 16) != 0 ? per_model() : test_only;
  const auto route = static_cast<ApiRoute>(data[0] % kvgate::app::kApiRouteCount);
  const size_t limit = (data[0] & 8) != 0 ? 64 : kvgate::app::kNoTokenLimit;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  ParsedRequest first;
  const kvgate::Status s1 = kvgate::app::parse_request(route, body, tokenizers, limit, &first);
  if (!client_error(s1)) std::abort();
  if (s1.ok() && limit != kvgate::app::kNoTokenLimit && first.tokens.size() > limit) std::abort();

  ParsedRequest second;
  const kvgate::Status s2 = kvgate::app::parse_request(route, body, tokenizers, limit, &second);
  if (s1.code() != s2.code() || kvgate::message_of(s1) != kvgate::message_of(s2)) std::abort();
  if (s1.ok() && !same(first, second)) std::abort();

  for (std::string_view key : {"prompt", "text", "model", "input"}) {
    if (auto n = kvgate::app::top_level_string_bytes(body, key); n && *n > body.size()) {
      std::abort();
    }
  }
  return 0;
}
