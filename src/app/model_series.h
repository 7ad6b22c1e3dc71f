// kvgate_requests_total{model, route, status} and kvgate_completion_tokens_total{model}: the
// request series by the model a request was for.
//
// A model gets series of its own at its first request if some worker serves it (the fleet's
// /v1/models lists), up to --model-series-limit models; the rest, and requests whose model no
// worker lists, share model="other". So a client cannot add series by naming models, and a fleet
// of a handful of models shows each. A request that names no model is its fleet's one model when
// the fleet serves exactly one.
//
// Threading: slot_of(), request_done() and completion_tokens() from any thread; slot_of() is
// lock-free for a model already seen (one acquire load and a hash lookup), and takes a mutex only
// to give a new model its series. publish() from any thread (scrapes).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "app/request_model.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/core/versioned.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/metrics/sharded.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {

class ModelSeries {
 public:
  static constexpr size_t kStatusClasses = 3;  // 2xx, 4xx, 5xx
  static constexpr size_t kOther = 0;          // the slot of model="other"

  ModelSeries(metrics::Family<metrics::Counter>& requests,
              metrics::Family<metrics::Counter>& completion_tokens, size_t limit);

  // The series slot of a request for `model` on `fleet`.
  size_t slot_of(std::string_view model, const workers::FleetSnapshot* fleet);
  void request_done(size_t slot, ApiRoute route, size_t status_class) {
    slots_[slot].requests[static_cast<size_t>(route)][status_class]->add();
  }
  void completion_tokens(size_t slot, uint64_t n) { slots_[slot].completion_tokens->add(n); }
  // Folds the request path's shards into the series (first at every scrape).
  void publish();

 private:
  struct Slot {
    std::array<std::array<std::unique_ptr<metrics::ShardedCounter>, kStatusClasses>, kApiRouteCount>
        requests;
    std::unique_ptr<metrics::ShardedCounter> completion_tokens;
  };
  using Names = absl::flat_hash_map<std::string, size_t>;

  void fill(Slot& slot, const std::string& model);
  size_t add_model(std::string_view model) KVGATE_EXCLUDES(mu_);

  metrics::Family<metrics::Counter>& requests_;
  metrics::Family<metrics::Counter>& completion_tokens_;
  const size_t limit_;
  // limit_ + 1 slots made up front; a slot is filled before its name is published, so a reader
  // that found the name finds its series.
  std::unique_ptr<Slot[]> slots_;
  std::atomic<size_t> used_{1};
  Versioned<Names> names_{Names{}};
  Mutex mu_;  // serializes add_model()
};

}  // namespace kvgate::app
