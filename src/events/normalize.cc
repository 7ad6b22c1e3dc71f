#include "kvgate/events/normalize.h"

#include "kvgate/core/log.h"

namespace kvgate::events {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// A group is full-attention unless its kind names something else or it has a window.
bool is_full_attention(const DecodedEvent& e) {
  if (e.sliding_window) return false;
  if (!e.spec_kind || e.spec_kind->empty()) return true;
  return contains(*e.spec_kind, "full") || contains(*e.spec_kind, "Full");
}

}  // namespace

std::string routing_salt(std::optional<std::string_view> lora_name,
                         std::optional<std::string_view> cache_salt) {
  std::string out;
  if (lora_name && !lora_name->empty()) {
    out.append("lora=");
    out.append(*lora_name);
  }
  if (cache_salt && !cache_salt->empty()) {
    if (!out.empty()) out.push_back('\x1f');
    out.append("salt=");
    out.append(*cache_salt);
  }
  return out;
}

index::Tier tier_of_medium(std::optional<std::string_view> medium, bool* known) {
  if (known) *known = true;
  if (!medium || *medium == "GPU") return index::Tier::kDevice;
  if (*medium == "CPU" || *medium == "CPU_PINNED") return index::Tier::kHost;
  if (*medium == "DISK") return index::Tier::kDisk;
  if (*medium == "EXTERNAL") return index::Tier::kExternal;
  if (known) *known = false;
  return index::Tier::kExternal;
}

void NormalizedBatch::clear() {
  events.clear();
  engine_hashes.clear();
  local_hashes.clear();
  stored_blocks = 0;
  dropped.fill(0);
  clear_first = false;
  clear_only = false;
  replayed = false;
  ts = 0;
  seq = 0;
}

void Normalizer::reset_chains() {
  salt_of_.clear();
  salt_order_.clear();
  salt_ids_.clear();
  salts_.clear();
}

bool Normalizer::group_allowed(const DecodedEvent& e) const {
  if (!e.group_idx || !full_group_seen_) return true;
  auto it = groups_.find(*e.group_idx);
  // A removal from a group no store has described: only full-attention groups remain in use.
  return it != groups_.end() && it->second;
}

void Normalizer::normalize(const DecodedBatch& in, NormalizedBatch* out) {
  out->events.clear();
  out->engine_hashes.clear();
  out->local_hashes.clear();
  out->stored_blocks = 0;
  out->dropped = in.dropped;
  ranges_.clear();
  static const auto logger = log::get("events");

  auto drop = [&](DropReason r) { ++out->dropped[static_cast<size_t>(r)]; };
  // Learn the batch's groups first, so that a window group listed before the full-attention
  // group in the same batch is already judged by it.
  const bool full_seen_before = full_group_seen_;
  for (const DecodedEvent& e : in.events) {
    if (e.kind != index::EventKind::kStored || !e.group_idx) continue;
    const bool full = is_full_attention(e);
    groups_[*e.group_idx] = full;
    full_group_seen_ |= full;
  }
  for (const DecodedEvent& e : in.events) {
    if (e.kind == index::EventKind::kCleared) {
      out->events.push_back(index::Event{});
      ranges_.emplace_back(0, 0);
      window_applied_ = false;
      reset_chains();
      continue;
    }
    if (e.hash_count == 0) {
      drop(DropReason::kEmptyEvent);
      continue;
    }
    if (!group_allowed(e)) {
      drop(DropReason::kSlidingWindowGroup);
      continue;
    }
    if (e.group_idx && !full_group_seen_) window_applied_ = true;
    index::Event ev;
    ev.kind = e.kind;
    bool known = true;
    ev.tier = tier_of_medium(e.medium, &known);
    if (!known) {
      ++stats_.unknown_mediums;
      KVGATE_LOG_EVERY_MS(logger, spdlog::level::warn, 10000,
                          "unknown KV-event medium '{}' treated as external", *e.medium);
    }
    const auto hashes = in.hashes_of(e);
    if (e.kind == index::EventKind::kStored) {
      if (uint64_t{e.token_count} != uint64_t{e.hash_count} * e.block_size) {
        drop(DropReason::kTokenCountMismatch);
        continue;
      }
      if (block_size_ != e.block_size) {
        if (block_size_ != 0) {
          ++stats_.block_size_changes;
          KVGATE_LOG_EVERY_MS(logger, spdlog::level::warn, 10000,
                              "KV-event block size changed from {} to {}", block_size_,
                              e.block_size);
        }
        block_size_ = e.block_size;
      }
      ev.has_parent = e.has_parent;
      ev.parent = e.parent;
      std::optional<std::string_view> cache_salt = e.cache_salt;
      if (!cache_salt && e.has_parent && !salt_of_.empty()) {
        if (auto it = salt_of_.find(e.parent); it != salt_of_.end()) {
          cache_salt = salts_[it->second];
        }
      }
      if (cache_salt && !cache_salt->empty() && max_salted_blocks_ > 0) {
        auto [id_it, added] =
            salt_ids_.try_emplace(std::string(*cache_salt), static_cast<uint32_t>(salts_.size()));
        if (added) salts_.push_back(id_it->first);
        for (EngineHash h : hashes) {
          if (salt_of_.insert_or_assign(h, id_it->second).second) salt_order_.push_back(h);
        }
        while (salt_order_.size() > max_salted_blocks_) {
          salt_of_.erase(salt_order_.front());
          salt_order_.pop_front();
        }
      }
      const std::string salt = routing_salt(e.lora_name, cache_salt);
      if (!salted_valid_ || salt != salt_) {
        salted_ = hasher_.salted(salt);
        salt_ = salt;
        salted_valid_ = true;
      }
      const auto tokens = in.tokens_of(e);
      for (uint32_t i = 0; i < e.hash_count; ++i) {
        out->local_hashes.push_back(
            salted_.local(tokens.subspan(size_t{i} * e.block_size, e.block_size)));
      }
      out->stored_blocks += e.hash_count;
    }
    ranges_.emplace_back(static_cast<uint32_t>(out->engine_hashes.size()), e.hash_count);
    out->engine_hashes.insert(out->engine_hashes.end(), hashes.begin(), hashes.end());
    out->events.push_back(ev);
  }
  if (full_group_seen_ && !full_seen_before && window_applied_) {
    // Window-group blocks applied before a full-attention group showed up are never removed
    // once that group's events are dropped: start over from this batch.
    ++stats_.group_policy_clears;
    window_applied_ = false;
    out->events.insert(out->events.begin(), index::Event{});
    ranges_.insert(ranges_.begin(), {0, 0});
  }
  // Spans last: the buffers no longer move.
  size_t local = 0;
  for (size_t i = 0; i < out->events.size(); ++i) {
    index::Event& ev = out->events[i];
    if (ev.kind == index::EventKind::kCleared) continue;
    ev.engine_hashes = std::span<const EngineHash>(out->engine_hashes.data() + ranges_[i].first,
                                                   ranges_[i].second);
    if (ev.kind == index::EventKind::kStored) {
      ev.local_hashes =
          std::span<const LocalHash>(out->local_hashes.data() + local, ranges_[i].second);
      local += ranges_[i].second;
    }
  }
}

}  // namespace kvgate::events
