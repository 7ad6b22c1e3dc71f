// Encoder -> decoder for every layout with random batches: what a layout can carry comes back.
#include <gtest/gtest.h>

#include <random>

#include "kvgate/events/decode.h"
#include "kvgate/events/encode.h"
#include "kvgate/events/engine_hash.h"

namespace kvgate::events {
namespace {

std::optional<std::string> maybe_str(std::mt19937_64& rng, std::initializer_list<const char*> v) {
  if (rng() % 2) return std::nullopt;
  auto it = v.begin();
  std::advance(it, rng() % v.size());
  return std::string(*it);
}

WireBatch random_batch(std::mt19937_64& rng) {
  WireBatch b;
  b.ts = static_cast<double>(rng() % 2000000000) / 7.0;
  if (rng() % 2) b.dp_rank = static_cast<int64_t>(rng() % 8);
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    switch (rng() % 3) {
      case 0: {
        BlockStored s;
        s.block_size = 1 + static_cast<uint32_t>(rng() % 4);
        const size_t blocks = 1 + rng() % 3;
        for (size_t k = 0; k < blocks; ++k) s.block_hashes.push_back(rng());
        if (rng() % 2) s.parent = rng();
        const bool pairs = rng() % 5 == 0;
        for (size_t k = 0; k < blocks * s.block_size; ++k) {
          const TokenId a = static_cast<TokenId>(rng()), c = static_cast<TokenId>(rng());
          if (pairs) {
            s.pair_words.push_back(a);
            s.pair_words.push_back(c);
            s.token_ids.push_back(pair_token(a, c));
          } else {
            s.token_ids.push_back(a % 200000);
          }
        }
        if (rng() % 2) s.lora_id = static_cast<int64_t>(rng() % 5);
        s.medium = maybe_str(rng, {"GPU", "CPU", "CPU_PINNED", "DISK", "EXTERNAL"});
        s.lora_name = maybe_str(rng, {"ad", "sql-lora"});
        s.cache_salt = maybe_str(rng, {"tenant-a", "b", ""});
        s.session_id = maybe_str(rng, {"s1"});
        if (rng() % 2) s.group_idx = static_cast<int64_t>(rng() % 3);
        s.kv_cache_spec_kind = maybe_str(rng, {"full_attention", "sliding_window"});
        if (rng() % 3 == 0) s.kv_cache_spec_sliding_window = 4096;
        b.events.push_back(std::move(s));
        break;
      }
      case 1: {
        BlockRemoved r;
        const size_t blocks = rng() % 3;
        for (size_t k = 0; k < blocks; ++k) r.block_hashes.push_back(rng());
        r.medium = maybe_str(rng, {"GPU", "CPU"});
        if (rng() % 2) r.group_idx = static_cast<int64_t>(rng() % 3);
        b.events.push_back(std::move(r));
        break;
      }
      default:
        b.events.push_back(AllBlocksCleared{});
    }
  }
  return b;
}

// What `f` can carry of `b`, as the decoder will read it back.
WireBatch representable(WireBatch b, WireFormat f) {
  const bool vllm = f == WireFormat::kVllmArray || f == WireFormat::kVllmMap;
  for (WireEvent& ev : b.events) {
    if (auto* s = std::get_if<BlockStored>(&ev)) {
      if (vllm) {
        s->session_id.reset();
        const bool salt = s->cache_salt && !s->cache_salt->empty();
        if (s->lora_name || salt) {
          s->extra_keys_cbor.emplace();
          for (size_t i = 0; i < s->block_hashes.size(); ++i) {
            s->extra_keys_cbor->push_back(VllmSha256Cbor::extra_keys_cbor(
                s->lora_name, s->cache_salt, i + (s->parent ? 1 : 0)));
          }
        }
        // vLLM carries the salt only in the extra keys of a request's block 0.
        if (!salt || s->parent) s->cache_salt.reset();
      } else {
        s->group_idx.reset();
        s->kv_cache_spec_kind.reset();
        s->kv_cache_spec_sliding_window.reset();
        if (f == WireFormat::kSglangArray) s->lora_name.reset();
      }
    } else if (auto* r = std::get_if<BlockRemoved>(&ev)) {
      if (!vllm) r->group_idx.reset();
    }
  }
  return b;
}

TEST(RoundTrip, EveryLayoutCarriesWhatItCan) {
  std::mt19937_64 rng(7);
  BatchDecoder d;
  DecodedBatch out;
  for (int iter = 0; iter < 2000; ++iter) {
    const WireBatch b = random_batch(rng);
    for (WireFormat f : kAllWireFormats) {
      SCOPED_TRACE(wire_format_name(f));
      std::string bytes;
      encode_batch(b, f, &bytes);
      ASSERT_TRUE(d.decode(bytes, &out));
      EXPECT_EQ(out.dropped_total(), 0u);
      ASSERT_EQ(to_wire(out), representable(b, f)) << "iteration " << iter;
      if (!b.events.empty() && out.hints.guess().has_value()) {
        // A store with a salt or session, or a negative hash, tells SGLang from vLLM; a plain
        // batch may look like either, but never like the other form (array vs map).
        const auto g = *out.hints.guess();
        const bool map = f == WireFormat::kVllmMap || f == WireFormat::kSglangMap;
        EXPECT_EQ(g == WireFormat::kVllmMap || g == WireFormat::kSglangMap, map);
      }
    }
  }
}

}  // namespace
}  // namespace kvgate::events
