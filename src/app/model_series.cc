#include "app/model_series.h"

#include <algorithm>

namespace kvgate::app {

ModelSeries::ModelSeries(metrics::Family<metrics::Counter>& requests,
                         metrics::Family<metrics::Counter>& completion_tokens, size_t limit)
    : requests_(requests),
      completion_tokens_(completion_tokens),
      limit_(limit),
      slots_(std::make_unique<Slot[]>(limit + 1)) {
  fill(slots_[kOther], "other");
}

void ModelSeries::fill(Slot& slot, const std::string& model) {
  static constexpr const char* kClasses[kStatusClasses] = {"2xx", "4xx", "5xx"};
  for (size_t r = 0; r < kApiRouteCount; ++r) {
    const char* route = api_route_name(static_cast<ApiRoute>(r));
    for (size_t c = 0; c < kStatusClasses; ++c) {
      slot.requests[r][c] = std::make_unique<metrics::ShardedCounter>(
          requests_.Add({{"model", model}, {"route", route}, {"status", kClasses[c]}}));
    }
  }
  slot.completion_tokens =
      std::make_unique<metrics::ShardedCounter>(completion_tokens_.Add({{"model", model}}));
}

size_t ModelSeries::slot_of(std::string_view model, const workers::FleetSnapshot* fleet) {
  if (fleet == nullptr) return kOther;
  if (model.empty()) {
    if (fleet->models.size() != 1) return kOther;
    model = fleet->models.front();
  }
  const Names& names = names_.get();
  // (absl's own string_view: Debian's abseil does not take std::string_view as a lookup key.)
  if (const auto it = names.find(absl::string_view(model.data(), model.size()));
      it != names.end()) {
    return it->second;
  }
  if (!std::binary_search(fleet->models.begin(), fleet->models.end(), model)) return kOther;
  return add_model(model);
}

size_t ModelSeries::add_model(std::string_view model) {
  MutexLock lock(&mu_);
  const Names& names = names_.get();
  if (const auto it = names.find(absl::string_view(model.data(), model.size()));
      it != names.end()) {
    return it->second;
  }
  const size_t slot = used_.load(std::memory_order_relaxed);
  if (slot > limit_) return kOther;
  fill(slots_[slot], std::string(model));
  used_.store(slot + 1, std::memory_order_release);
  Names next = names;
  next.emplace(std::string(model), slot);
  names_.publish(std::move(next));
  return slot;
}

void ModelSeries::publish() {
  const size_t used = used_.load(std::memory_order_acquire);
  for (size_t s = 0; s < used; ++s) {
    for (auto& by_class : slots_[s].requests) {
      for (auto& c : by_class) c->publish();
    }
    slots_[s].completion_tokens->publish();
  }
}

}  // namespace kvgate::app
