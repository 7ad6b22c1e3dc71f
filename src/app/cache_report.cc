#include "app/cache_report.h"

#include "app/worker_exchange.h"

#include "spdlog/spdlog.h"

#include <algorithm>

namespace kvgate::app {

uint64_t predicted_cached_tokens(uint32_t matched_blocks, uint64_t prompt_tokens,
                                 uint32_t block_size) {
  if (block_size == 0 || prompt_tokens == 0) return 0;
  const uint64_t cacheable_blocks = (prompt_tokens - 1) / block_size;
  return std::min<uint64_t>(matched_blocks, cacheable_blocks) * block_size;
}

std::optional<uint64_t> reported_cached_tokens(std::string_view answer) {
  return reported_count(answer, "\"cached_tokens\"");
}

std::optional<uint64_t> reported_count(std::string_view answer, std::string_view quoted_key) {
  const size_t at = answer.rfind(quoted_key);
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + quoted_key.size();
  while (i < answer.size() && (answer[i] == ' ' || answer[i] == ':')) ++i;
  if (i >= answer.size() || answer[i] < '0' || answer[i] > '9') return std::nullopt;
  uint64_t v = 0;
  for (; i < answer.size() && answer[i] >= '0' && answer[i] <= '9'; ++i) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(answer[i] - '0');
  }
  return v;
}

void note_cached_tokens(workers::Worker& worker, uint64_t predicted, std::string_view answer,
                        spdlog::logger& log) {
  const std::optional<uint64_t> reported = reported_cached_tokens(answer);
  if (!reported) return;
  workers::CacheAgreement& agreement = worker.cache_agreement();
  const workers::CacheAgreement::Change change = agreement.note(predicted, *reported);
  if (change == workers::CacheAgreement::Change::kBecameDisagreeing) {
    log.warn(
        "worker {}: its engine reports cached prompt tokens that disagree with the index "
        "(agreement {:.2f}): check its block size, hash seed and tokenizer against the gateway's",
        worker.url(), agreement.ratio());
  } else if (change == workers::CacheAgreement::Change::kBecameAgreeing) {
    log.info("worker {}: cached prompt tokens agree with the index again ({:.2f})", worker.url(),
             agreement.ratio());
  }
}

void write_cached_tokens(JsonWriter& w, const workers::CacheAgreement& a) {
  w.key("cached_tokens").begin_object();
  w.member("predicted", a.predicted_total()).member("reported", a.reported_total());
  w.member("agreement", a.ratio()).member("disagreeing", a.disagreeing()).end_object();
}

std::optional<std::string> with_stream_usage(std::string_view body) {
  return with_members(body, R"("stream_options":{"include_usage":true})");
}

}  // namespace kvgate::app
