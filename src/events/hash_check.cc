#include "kvgate/events/hash_check.h"

#include <algorithm>

namespace kvgate::events {

std::string_view hash_scheme_name(HashScheme s) {
  switch (s) {
    case HashScheme::kOff:
      return "off";
    case HashScheme::kAuto:
      return "auto";
    case HashScheme::kVllmSha256Cbor:
      return "vllm-sha256-cbor";
    case HashScheme::kSglang:
      return "sglang";
  }
  return "unknown";
}

Result<HashScheme> parse_hash_scheme(std::string_view s) {
  for (HashScheme h :
       {HashScheme::kOff, HashScheme::kAuto, HashScheme::kVllmSha256Cbor, HashScheme::kSglang}) {
    if (hash_scheme_name(h) == s) return h;
  }
  return absl::InvalidArgumentError(
      "unknown engine hash scheme (want off, auto, vllm-sha256-cbor or sglang)");
}

EngineHashChecker::EngineHashChecker(HashCheckOptions options)
    : options_(std::move(options)), vllm_(options_.vllm_seed), active_(options_.scheme) {}

void EngineHashChecker::reset() {
  digests_.clear();
  order_.clear();
}

void EngineHashChecker::remember(EngineHash h, const Digest& d) {
  if (options_.max_digests == 0) return;
  auto [it, inserted] = digests_.insert_or_assign(h, d);
  if (!inserted) return;
  order_.push_back(h);
  while (order_.size() > options_.max_digests) {
    digests_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<Digest> EngineHashChecker::root(HashScheme scheme, const DecodedEvent& e) const {
  if (scheme == HashScheme::kVllmSha256Cbor) return vllm_.none_hash();
  if (e.cache_salt) return SglangSha256::salted_root(*e.cache_salt);
  return std::nullopt;
}

std::optional<Digest> EngineHashChecker::digest(HashScheme scheme, const DecodedBatch& b,
                                                const DecodedEvent& e, size_t i,
                                                const Digest* parent) const {
  const auto tokens = b.tokens_of(e).subspan(i * e.block_size, e.block_size);
  if (scheme == HashScheme::kSglang) {
    if (e.pair_count > 0) {
      return SglangSha256::block(
          parent, b.pair_words_of(e).subspan(2 * i * e.block_size, 2 * e.block_size));
    }
    return SglangSha256::block(parent, tokens);
  }
  if (e.extra_opaque) return std::nullopt;
  if (e.has_extra_keys) return vllm_.block(*parent, tokens, b.extra_keys_of(e, i));
  if (e.lora_name || e.cache_salt) {
    return vllm_.block(
        *parent, tokens,
        VllmSha256Cbor::extra_keys_cbor(e.lora_name, e.cache_salt, i + (e.has_parent ? 1 : 0)));
  }
  return vllm_.block(*parent, tokens);
}

void EngineHashChecker::check_event(const DecodedBatch& b, const DecodedEvent& e) {
  const auto hashes = b.hashes_of(e);
  if (e.hash_count == 0 || uint64_t{e.token_count} != uint64_t{e.hash_count} * e.block_size) {
    return;  // normalization drops these
  }
  std::optional<Digest> parent;
  if (e.has_parent) {
    auto it = digests_.find(e.parent);
    if (it == digests_.end() || active_ == HashScheme::kAuto) {
      counts_.unchecked += e.hash_count;
      return;
    }
    parent = it->second;
  } else if (active_ == HashScheme::kAuto) {
    for (HashScheme s : {HashScheme::kVllmSha256Cbor, HashScheme::kSglang}) {
      const auto r = root(s, e);
      const auto d = digest(s, b, e, 0, r ? &*r : nullptr);
      if (!d) continue;
      const EngineHash w =
          s == HashScheme::kSglang ? SglangSha256::wire_value(*d) : VllmSha256Cbor::wire_value(*d);
      if (w == hashes[0]) {
        active_ = s;
        break;
      }
    }
    if (active_ == HashScheme::kAuto) {
      ++counts_.mismatched;
      counts_.unchecked += e.hash_count - 1;
      return;
    }
    parent = root(active_, e);
  } else {
    parent = root(active_, e);
  }
  for (size_t i = 0; i < e.hash_count; ++i) {
    const auto d = digest(active_, b, e, i, parent ? &*parent : nullptr);
    if (!d) {
      counts_.unchecked += e.hash_count - i;
      return;
    }
    const EngineHash w = active_ == HashScheme::kSglang ? SglangSha256::wire_value(*d)
                                                        : VllmSha256Cbor::wire_value(*d);
    if (w != hashes[i]) {
      ++counts_.mismatched;
      counts_.unchecked += e.hash_count - i - 1;
      return;
    }
    ++counts_.matched;
    remember(w, *d);
    parent = *d;
  }
}

void EngineHashChecker::check(const DecodedBatch& batch) {
  if (active_ == HashScheme::kOff) return;
  for (const DecodedEvent& e : batch.events) {
    if (e.kind == index::EventKind::kStored) check_event(batch, e);
  }
}

HashQuarantine::Change HashQuarantine::update(const HashCheckCounts& counts, bool scheme_known) {
  const uint64_t matched = counts.matched - seen_.matched;
  const uint64_t mismatched = counts.mismatched - seen_.mismatched;
  seen_ = counts;
  if (options_.max_mismatch_ratio <= 0 || !scheme_known) {
    window_matched_ = window_mismatched_ = 0;
    return Change::kNone;
  }
  window_matched_ += matched;
  window_mismatched_ += mismatched;
  const uint64_t n = window_matched_ + window_mismatched_;
  if (n < std::max<uint32_t>(1, options_.window_blocks)) return Change::kNone;
  last_ratio_ = static_cast<double>(window_mismatched_) / static_cast<double>(n);
  window_matched_ = window_mismatched_ = 0;
  const bool agrees = last_ratio_ <= options_.max_mismatch_ratio;
  if (quarantined_ == !agrees) return Change::kNone;
  quarantined_ = !agrees;
  if (quarantined_) ++episodes_;
  return quarantined_ ? Change::kEntered : Change::kLeft;
}

}  // namespace kvgate::events
