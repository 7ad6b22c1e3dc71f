// Why a decision went where it did, for operators: the candidates the policy compared, best first,
// with the figures it compared them by, and the gates that left workers out or steered around
// them. The gateway returns it as the x-kvgate-decision header, from GET /debug/route, and in its
// access log (docs/life-of-a-request.md).
//
// Built after select(), from the Scratch that decision left, and only when someone asked: it
// allocates and visits the fleet again, which routing itself never does twice. The request must
// have had RouteRequest::explain set, so that the decision left every candidate there.
//
// Threading: a pure function of its arguments; call it on the thread that made the decision,
// before that thread's Scratch serves another one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvgate/policy/policy.h"

namespace kvgate::policy {

struct CandidateReport {
  int32_t index = 0;  // into FleetSnapshot::workers
  int32_t rank = -1;  // the data-parallel rank, or -1: the whole worker
  uint32_t matched_blocks = 0;
  double load = 0;
  uint64_t queued_tokens = 0;
  // cache_aware's expected wait before the first token, in µs; -1 for a policy that compares none.
  double expected_wait_us = -1;
  bool overloaded = false;
  bool predicted = false;       // matched_blocks is the approximate mode's guess (no KV events)
  uint32_t pending_blocks = 0;  // of matched_blocks, those only blocks in flight predict
  // cache_aware: of matched_blocks, those past the device's depth (on a tier they load from).
  uint32_t offloaded_blocks = 0;
  bool chosen = false;
};

struct Explanation {
  Decision decision;
  uint32_t chain_blocks = 0;  // blocks in the request's chain
  // Candidates compared, of which over the overload thresholds.
  size_t candidates = 0;
  size_t overloaded = 0;
  // Workers serving the model that were not candidates, by why: taken out of routing (health,
  // breaker, draining), vetoed by the liveness tracker, or already tried by this request.
  size_t unroutable = 0;
  size_t vetoed = 0;
  size_t excluded = 0;
  // The chosen candidate first, then the others by depth (deepest first) and expected wait (or
  // load), at most `top` of them.
  std::vector<CandidateReport> top;
};

// The explanation of `d`, which select(req, fleet, scratch) just returned. `cost` is the
// cache_aware configuration (expected waits), or null for the other policies.
Explanation explain(const RouteRequest& req, const Decision& d, const workers::FleetSnapshot& fleet,
                    const Scratch& scratch, const CacheAwareConfig* cost, size_t top);

}  // namespace kvgate::policy
