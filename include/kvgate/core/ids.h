// Identifiers shared by every module.
//
// A worker is one engine process behind one URL. A data-parallel engine runs several ranks, each
// with its own KV cache and its own event stream; one (worker, rank) KV cache is a *holder*. The
// index speaks only in dense HolderIds (small integers, reused after release) so that it can keep
// per-holder state in bitsets and flat arrays.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace kvgate {

// A typed integer: ids of different kinds do not convert into each other by accident.
template <class Tag, class Rep = uint32_t>
class StrongId {
 public:
  using rep_type = Rep;
  static constexpr Rep kInvalid = std::numeric_limits<Rep>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}

  constexpr Rep value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalid; }
  friend constexpr auto operator<=>(StrongId, StrongId) = default;

  template <class H>
  friend H AbslHashValue(H h, StrongId id) {
    return H::combine(std::move(h), id.value_);
  }

 private:
  Rep value_ = kInvalid;
};

using WorkerId = StrongId<struct WorkerIdTag>;
using HolderId = StrongId<struct HolderIdTag>;
using DpRank = uint32_t;

// The identity of one KV cache in the fleet.
struct HolderKey {
  WorkerId worker;
  DpRank rank = 0;
  friend constexpr auto operator<=>(const HolderKey&, const HolderKey&) = default;
  template <class H>
  friend H AbslHashValue(H h, const HolderKey& k) {
    return H::combine(std::move(h), k.worker, k.rank);
  }
};

}  // namespace kvgate

template <class Tag, class Rep>
struct std::hash<kvgate::StrongId<Tag, Rep>> {
  size_t operator()(kvgate::StrongId<Tag, Rep> id) const noexcept {
    return std::hash<Rep>{}(id.value());
  }
};
