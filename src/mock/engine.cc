#include "kvgate/mock/engine.h"

#include <algorithm>
#include <cassert>

#include "mock/detail/block_pool.h"
#include "mock/detail/host_tier.h"

namespace kvgate::mock {
namespace detail {

struct SimRequest {
  RequestId id = 0;
  std::vector<TokenId> tokens;  // prompt, then the outputs sampled so far
  uint32_t prompt_len = 0;
  uint32_t max_tokens = 0;
  uint32_t outputs = 0;
  uint32_t num_computed = 0;       // tokens whose KV is computed
  std::vector<uint32_t> blocks;    // physical blocks, in sequence order
  uint32_t num_cached_blocks = 0;  // leading blocks already cached (hit or stored)
  // Per full block of `tokens`, computed as blocks fill.
  std::vector<events::Digest> digests;
  std::vector<events::EngineHash> hashes;
  std::vector<LocalHash> local;
  std::vector<SeqHash> seq;
  int64_t cached_tokens = -1;  // set at first admission
  uint32_t preemptions = 0;
  uint64_t token_seed = 0;
  bool running = false;
  bool aborted = false;  // drop when the step in flight finishes
  MonoTime arrival{};
};

}  // namespace detail

using detail::SimRequest;

Duration TimingModel::step(uint64_t prefill_tokens, uint64_t decode_seqs,
                           uint64_t decode_context_tokens, uint64_t loaded_tokens) const {
  double ns = std::chrono::duration<double, std::nano>(step_overhead).count();
  if (prefill_tokens_per_s > 0) {
    ns += 1e9 * (double(prefill_tokens) + double(loaded_tokens) * host_load_cost) /
          prefill_tokens_per_s;
  }
  ns += double(decode_seqs) * std::chrono::duration<double, std::nano>(decode_per_seq).count();
  ns += double(decode_context_tokens) *
        std::chrono::duration<double, std::nano>(decode_per_context_token).count();
  if (speedup > 0) ns /= speedup;
  return Duration(static_cast<int64_t>(ns < 1 ? 1 : ns));
}

HashScheme hash_scheme_for(events::WireFormat wire) {
  return wire == events::WireFormat::kSglangArray || wire == events::WireFormat::kSglangMap
             ? HashScheme::kSglangSha256
             : HashScheme::kVllmSha256Cbor;
}

std::string_view hash_scheme_name(HashScheme s) {
  return s == HashScheme::kSglangSha256 ? "sglang_sha256" : "vllm_sha256_cbor";
}

Engine::Engine(EngineConfig config)
    : config_(std::move(config)),
      pool_(std::make_unique<detail::BlockPool>(config_.num_blocks)),
      host_(std::make_unique<detail::HostTier>(config_.host_blocks)),
      vllm_hash_(config_.vllm_hash_seed),
      router_hasher_(config_.router_hash_seed) {}

Engine::~Engine() = default;

Result<RequestId> Engine::add(std::vector<TokenId> prompt, uint32_t max_tokens, MonoTime now) {
  if (prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  if (max_tokens == 0) max_tokens = 1;
  const uint64_t total = prompt.size() + uint64_t{max_tokens};
  if (total > config_.max_model_len) {
    return absl::InvalidArgumentError("prompt (" + std::to_string(prompt.size()) +
                                      " tokens) plus max_tokens (" + std::to_string(max_tokens) +
                                      ") exceeds max_model_len " +
                                      std::to_string(config_.max_model_len));
  }
  const uint64_t bs = config_.block_size;
  if ((total + bs - 1) / bs > config_.num_blocks) {
    return absl::InvalidArgumentError("request needs more KV blocks than the pool has");
  }
  auto r = std::make_unique<SimRequest>();
  r->id = next_id_++;
  r->prompt_len = static_cast<uint32_t>(prompt.size());
  r->max_tokens = max_tokens;
  r->token_seed = router_hasher_.local(prompt);
  r->tokens = std::move(prompt);
  r->tokens.reserve(total);
  r->arrival = now;
  SimRequest* raw = r.get();
  requests_.emplace(raw->id, std::move(r));
  waiting_.push_back(raw);
  return raw->id;
}

SimRequest* Engine::find(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

void Engine::abort(RequestId id) {
  SimRequest* r = find(id);
  if (r == nullptr) return;
  if (in_flight_) {
    for (const Scheduled& s : scheduled_) {
      if (s.req == r) {
        r->aborted = true;
        return;
      }
    }
  }
  ++counters_.aborted_requests;
  erase(r);
}

void Engine::erase(SimRequest* r) {
  free_blocks(*r);
  if (r->running) {
    running_.erase(std::find(running_.begin(), running_.end(), r));
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), r);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  requests_.erase(r->id);
}

void Engine::hash_blocks(SimRequest& r) {
  const uint32_t bs = config_.block_size;
  const size_t full = r.tokens.size() / bs;
  for (size_t i = r.hashes.size(); i < full; ++i) {
    std::span<const TokenId> block(r.tokens.data() + i * bs, bs);
    events::Digest d;
    events::EngineHash wire;
    if (config_.hash_scheme == HashScheme::kSglangSha256) {
      d = events::SglangSha256::block(i == 0 ? nullptr : &r.digests[i - 1], block);
      wire = events::SglangSha256::wire_value(d);
    } else {
      d = vllm_hash_.block(i == 0 ? vllm_hash_.none_hash() : r.digests[i - 1], block);
      wire = events::VllmSha256Cbor::wire_value(d);
    }
    r.digests.push_back(d);
    r.hashes.push_back(wire);
    LocalHash local = router_hasher_.local(block);
    r.local.push_back(local);
    r.seq.push_back(i == 0 ? local : router_hasher_.chain(r.seq[i - 1], local));
  }
}

bool Engine::allocate(SimRequest& r, uint32_t total_tokens) {
  const uint32_t bs = config_.block_size;
  const size_t need = (size_t{total_tokens} + bs - 1) / bs;
  if (need <= r.blocks.size()) return true;
  if (need - r.blocks.size() > pool_->num_free()) return false;
  while (r.blocks.size() < need) {
    std::optional<events::EngineHash> evicted;
    r.blocks.push_back(pool_->allocate(&evicted));
    if (evicted) announce_evicted(*evicted);
  }
  return true;
}

void Engine::announce_evicted(events::EngineHash hash) {
  // One event per evicted block, as vLLM announces them.
  ++counters_.evicted_blocks;
  events::BlockRemoved e;
  e.block_hashes.push_back(hash);
  e.medium = device_medium();
  events_.push_back(std::move(e));
}

std::optional<std::string> Engine::device_medium() const {
  if (config_.hash_scheme == HashScheme::kVllmSha256Cbor) return "GPU";
  return std::nullopt;
}

bool Engine::try_admit(SimRequest& r, uint32_t budget, uint32_t* scheduled_tokens,
                       uint32_t* loaded_tokens) {
  const uint32_t bs = config_.block_size;
  const uint32_t n = static_cast<uint32_t>(r.tokens.size());
  uint32_t hits = 0;         // leading blocks cached on the device or the host tier
  uint32_t device_hits = 0;  // of those, on the device
  uint32_t free_hits = 0;    // device hits sitting in the free queue (they need no allocation)
  if (config_.enable_prefix_caching) {
    hash_blocks(r);
    const uint32_t max_hits = (n - 1) / bs;  // at least one token is always computed
    while (hits < max_hits) {
      const int32_t b = pool_->lookup(r.hashes[hits]);
      if (b != detail::BlockPool::kNone) {
        ++device_hits;
        if (pool_->is_free(static_cast<uint32_t>(b))) ++free_hits;
      } else if (!host_->holds(r.hashes[hits])) {
        break;
      }
      ++hits;
    }
  }
  const uint32_t need_blocks = (n + bs - 1) / bs - device_hits;
  if (need_blocks > pool_->num_free() - free_hits) return false;

  hold_prefix(r, hits);
  const uint32_t loaded = (hits - device_hits) * bs;
  r.num_computed = hits * bs;
  counters_.prefix_cache_queries += n;
  counters_.prefix_cache_hits += uint64_t{device_hits} * bs;
  counters_.host_hit_tokens += loaded;
  if (r.cached_tokens < 0) {
    r.cached_tokens = int64_t{hits} * bs;
    counters_.prompt_tokens += r.prompt_len;
  }
  uint32_t tokens = std::min(n - r.num_computed, budget);
  bool ok = allocate(r, r.num_computed + tokens);
  assert(ok);
  (void)ok;
  *scheduled_tokens = tokens;
  *loaded_tokens = loaded;
  return true;
}

detail::BlockMeta Engine::meta_of(const SimRequest& r, uint32_t i) const {
  detail::BlockMeta meta;
  meta.hash = r.hashes[i];
  if (i > 0) meta.parent = r.hashes[i - 1];
  meta.local = r.local[i];
  meta.seq = r.seq[i];
  return meta;
}

void Engine::hold_prefix(SimRequest& r, uint32_t hits) {
  // The device's copies are held first, so that the blocks the host tier's copies load into
  // cannot evict them.
  r.blocks.resize(hits);
  std::vector<uint32_t> from_host;
  for (uint32_t i = 0; i < hits; ++i) {
    const int32_t b = pool_->lookup(r.hashes[i]);
    if (b == detail::BlockPool::kNone) {
      from_host.push_back(i);
      continue;
    }
    pool_->touch(static_cast<uint32_t>(b));
    r.blocks[i] = static_cast<uint32_t>(b);
  }
  for (uint32_t i : from_host) {
    std::optional<events::EngineHash> evicted;
    r.blocks[i] = pool_->allocate(&evicted);
    if (evicted) announce_evicted(*evicted);
    pool_->cache(r.blocks[i], meta_of(r, i));
    host_->touch(r.hashes[i]);
  }
  // The loaded blocks are cached on the device again: one BlockStored per run of them.
  for (size_t k = 0; k < from_host.size();) {
    size_t end = k + 1;
    while (end < from_host.size() && from_host[end] == from_host[end - 1] + 1) ++end;
    announce_stored(r, from_host[k], from_host[end - 1] + 1, /*on_host=*/false);
    k = end;
  }
  r.num_cached_blocks = hits;
}

void Engine::free_blocks(SimRequest& r) {
  // Tail first: the free queue then evicts a request's tail before the head others share.
  for (auto it = r.blocks.rbegin(); it != r.blocks.rend(); ++it) pool_->release(*it);
  r.blocks.clear();
  r.num_cached_blocks = 0;
}

void Engine::preempt(SimRequest& r) {
  free_blocks(r);
  r.num_computed = 0;
  r.running = false;
  ++r.preemptions;
  ++counters_.preemptions;
  waiting_.push_front(&r);
}

std::optional<Duration> Engine::begin_step(MonoTime now) {
  assert(!in_flight_);
  scheduled_.clear();
  out_.tokens.clear();
  out_.prefill_tokens = out_.decode_seqs = out_.scheduled = out_.preempted = 0;
  uint32_t budget = config_.max_num_batched_tokens;
  uint64_t prefill = 0, decodes = 0, decode_ctx = 0, loaded = 0;
  auto account = [&](SimRequest& r, uint32_t tokens) {
    scheduled_.push_back({&r, tokens});
    budget -= tokens;
    const bool decode = r.outputs > 0 && r.num_computed + 1 == r.tokens.size();
    if (decode) {
      ++decodes;
      decode_ctx += r.num_computed + 1;
    } else {
      prefill += tokens;
    }
  };

  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    SimRequest& r = *running_[i];
    uint32_t tokens =
        std::min<uint32_t>(static_cast<uint32_t>(r.tokens.size()) - r.num_computed, budget);
    bool self_preempted = false;
    while (!allocate(r, r.num_computed + tokens)) {
      SimRequest* victim = running_.back();
      running_.pop_back();
      preempt(*victim);
      ++out_.preempted;
      if (victim == &r) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    account(r, tokens);
  }

  if (out_.preempted == 0) {
    while (!waiting_.empty() && budget > 0 && running_.size() < config_.max_num_seqs) {
      SimRequest& r = *waiting_.front();
      uint32_t tokens = 0;
      uint32_t loaded_tokens = 0;
      if (!try_admit(r, budget, &tokens, &loaded_tokens)) break;
      loaded += loaded_tokens;
      waiting_.pop_front();
      r.running = true;
      running_.push_back(&r);
      account(r, tokens);
    }
  }

  if (scheduled_.empty()) return std::nullopt;
  in_flight_ = true;
  out_.start = now;
  out_.prefill_tokens = static_cast<uint32_t>(prefill);
  out_.decode_seqs = static_cast<uint32_t>(decodes);
  out_.scheduled = static_cast<uint32_t>(scheduled_.size());
  return config_.timing.step(prefill, decodes, decode_ctx, loaded);
}

void Engine::cache_full_blocks(SimRequest& r) {
  if (!config_.enable_prefix_caching) return;
  const uint32_t full = r.num_computed / config_.block_size;
  if (full <= r.num_cached_blocks) return;
  hash_blocks(r);
  const uint32_t first = r.num_cached_blocks;
  for (uint32_t i = first; i < full; ++i) pool_->cache(r.blocks[i], meta_of(r, i));
  announce_stored(r, first, full, /*on_host=*/false);
  r.num_cached_blocks = full;
  copy_to_host(r, first, full);
}

void Engine::announce_stored(const SimRequest& r, uint32_t first, uint32_t end, bool on_host) {
  const uint32_t bs = config_.block_size;
  events::BlockStored e;
  e.block_size = bs;
  if (first > 0) e.parent = r.hashes[first - 1];
  e.medium = on_host ? std::optional<std::string>("CPU") : device_medium();
  e.token_ids.assign(r.tokens.begin() + size_t{first} * bs, r.tokens.begin() + size_t{end} * bs);
  e.block_hashes.assign(r.hashes.begin() + first, r.hashes.begin() + end);
  (on_host ? counters_.offloaded_blocks : counters_.stored_blocks) += end - first;
  events_.push_back(std::move(e));
}

void Engine::copy_to_host(const SimRequest& r, uint32_t first, uint32_t end) {
  if (!host_->enabled()) return;
  // Write-through: one BlockStored (medium CPU) per run of blocks new to the host tier, then
  // what it evicted for room.
  for (uint32_t i = first; i < end;) {
    if (!host_->copy_in(meta_of(r, i))) {
      ++i;
      continue;
    }
    uint32_t run_end = i + 1;
    while (run_end < end && host_->copy_in(meta_of(r, run_end))) ++run_end;
    announce_stored(r, i, run_end, /*on_host=*/true);
    i = run_end;
  }
  events::BlockRemoved removed;
  host_->trim(&removed.block_hashes);
  if (removed.block_hashes.empty()) return;
  counters_.host_evicted_blocks += removed.block_hashes.size();
  removed.medium = "CPU";
  events_.push_back(std::move(removed));
}

TokenId Engine::next_token(const SimRequest& r) const {
  uint64_t x = r.token_seed + 0x9E3779B97F4A7C15ull * (r.tokens.size() + 1);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  const uint32_t span = config_.vocab > 512 ? config_.vocab - 256 : 256;
  return static_cast<TokenId>(256 + x % span);
}

const StepOutput& Engine::finish_step(MonoTime now) {
  assert(in_flight_);
  in_flight_ = false;
  out_.end = now;
  ++counters_.steps;
  counters_.computed_prefill_tokens += out_.prefill_tokens;
  std::vector<SimRequest*> done;
  for (const Scheduled& s : scheduled_) {
    SimRequest& r = *s.req;
    if (r.aborted) {
      done.push_back(&r);
      continue;
    }
    r.num_computed += s.tokens;
    cache_full_blocks(r);
    if (r.num_computed < r.tokens.size()) continue;  // a prefill chunk: nothing sampled yet
    TokenOutput t;
    t.id = r.id;
    t.token = next_token(r);
    r.tokens.push_back(t.token);
    ++r.outputs;
    ++counters_.generation_tokens;
    t.first = r.outputs == 1;
    t.finished = r.outputs >= r.max_tokens;
    t.cached_tokens = static_cast<uint32_t>(std::max<int64_t>(r.cached_tokens, 0));
    t.preemptions = r.preemptions;
    out_.tokens.push_back(t);
    if (t.finished) done.push_back(&r);
  }
  for (SimRequest* r : done) {
    if (r->aborted) {
      ++counters_.aborted_requests;
    } else {
      ++counters_.finished_requests;
    }
    erase(r);
  }
  scheduled_.clear();
  return out_;
}

void Engine::take_events(std::vector<events::WireEvent>* out) {
  for (auto& e : events_) out->push_back(std::move(e));
  events_.clear();
}

Status Engine::clear_cache(bool announce) {
  if (in_flight_) return absl::FailedPreconditionError("a step is in flight");
  while (!running_.empty()) {
    SimRequest* r = running_.back();
    running_.pop_back();
    preempt(*r);
  }
  pool_->uncache_all();
  host_->clear();
  for (auto& [id, r] : requests_) r->num_cached_blocks = 0;
  if (announce) events_.push_back(events::AllBlocksCleared{});
  return Status();
}

uint32_t Engine::cached_prefix_blocks(std::span<const TokenId> prompt, uint32_t max_blocks) {
  if (!config_.enable_prefix_caching) return 0;
  const size_t blocks = std::min<size_t>(max_blocks, prompt.size() / config_.block_size);
  SimRequest r;
  r.tokens.assign(prompt.begin(), prompt.begin() + blocks * config_.block_size);
  hash_blocks(r);
  uint32_t held = 0;
  while (held < r.hashes.size() && pool_->lookup(r.hashes[held]) != detail::BlockPool::kNone) {
    ++held;
  }
  return held;
}

Result<uint32_t> Engine::import_prefix(std::span<const TokenId> prompt, uint32_t blocks) {
  if (!config_.enable_prefix_caching) return 0u;
  const uint32_t bs = config_.block_size;
  blocks = static_cast<uint32_t>(std::min<size_t>(blocks, prompt.size() / bs));
  // A request that exists only for this call: it holds the blocks while they are filled, then
  // frees them (tail first, as a finished request does).
  SimRequest r;
  r.tokens.assign(prompt.begin(), prompt.begin() + size_t{blocks} * bs);
  r.prompt_len = blocks * bs;
  hash_blocks(r);
  uint32_t hits = 0;
  uint32_t free_hits = 0;
  while (hits < blocks) {
    const int32_t b = pool_->lookup(r.hashes[hits]);
    if (b == detail::BlockPool::kNone) break;
    if (pool_->is_free(static_cast<uint32_t>(b))) ++free_hits;
    ++hits;
  }
  if (blocks - hits > pool_->num_free() - free_hits) {
    return absl::ResourceExhaustedError("too few free KV blocks to receive the transfer");
  }
  for (uint32_t i = 0; i < hits; ++i) {
    const auto b = static_cast<uint32_t>(pool_->lookup(r.hashes[i]));
    pool_->touch(b);  // held, so allocating the rest cannot evict the prefix
    r.blocks.push_back(b);
  }
  r.num_cached_blocks = hits;
  const bool ok = allocate(r, blocks * bs);
  assert(ok);
  (void)ok;
  r.num_computed = blocks * bs;
  cache_full_blocks(r);
  free_blocks(r);
  return blocks - hits;
}

std::optional<RequestInfo> Engine::info(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return std::nullopt;
  const SimRequest& r = *it->second;
  RequestInfo i;
  i.id = r.id;
  i.prompt_tokens = r.prompt_len;
  i.cached_tokens = static_cast<uint32_t>(std::max<int64_t>(r.cached_tokens, 0));
  i.output_tokens = r.outputs;
  i.preemptions = r.preemptions;
  i.admitted = r.cached_tokens >= 0;
  return i;
}

EngineLoad Engine::load() const {
  EngineLoad l;
  l.running = static_cast<uint32_t>(running_.size());
  l.waiting = static_cast<uint32_t>(waiting_.size());
  l.num_blocks = pool_->num_blocks();
  l.used_blocks = pool_->num_blocks() - pool_->num_free();
  l.cached_blocks = pool_->num_cached();
  for (const SimRequest* r : waiting_) l.queued_prefill_tokens += r->tokens.size();
  for (const SimRequest* r : running_) {
    uint64_t left = r->tokens.size() - r->num_computed;
    if (!(r->outputs > 0 && left == 1)) l.queued_prefill_tokens += left;
  }
  return l;
}

std::vector<ResidentBlock> Engine::truth() const {
  std::vector<ResidentBlock> out;
  out.reserve(pool_->num_cached());
  pool_->for_each_cached([&](const detail::BlockMeta& m, uint32_t copies, uint32_t refs) {
    ResidentBlock b;
    b.engine_hash = m.hash;
    b.parent = m.parent;
    b.local_hash = m.local;
    b.seq_hash = m.seq;
    b.copies = copies;
    b.refs = refs;
    b.on_host = host_->holds(m.hash);
    out.push_back(b);
  });
  host_->for_each([&](const detail::BlockMeta& m) {
    if (pool_->lookup(m.hash) != detail::BlockPool::kNone) return;
    out.push_back({.engine_hash = m.hash,
                   .parent = m.parent,
                   .local_hash = m.local,
                   .seq_hash = m.seq,
                   .on_host = true});
  });
  std::sort(out.begin(), out.end(), [](const ResidentBlock& a, const ResidentBlock& b) {
    return a.engine_hash < b.engine_hash;
  });
  return out;
}

}  // namespace kvgate::mock
