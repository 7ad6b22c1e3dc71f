// LivenessTracker: notices a worker that is alive on paper and useless in fact.
//
// Health checks and the circuit breaker see a worker that refuses connections or answers errors.
// They do not see an engine frozen by SIGSTOP or paused while its port still accepts connections:
// requests sent there wait for tokens that never come. The tracker vetoes such a worker from what
// the request path reports, without waiting for a probe to time out:
//
// - wedged: the worker holds streamed generations (its pile) and none of them produced a byte for
//   `wedge` (measured from the latest of the worker's last progress, the moment the pile formed
//   and the end of the prefill its streams' prompts are expected to take). Only streamed
//   generations form the pile, since only they report progress as it happens; a non-streamed
//   request never wedges a worker, though its answer counts as progress. A prompt whose uncached
//   tokens take longer than `wedge` at `prefill_tokens_per_second` excuses the silence until its
//   prefill could have ended (measured from its dispatch): a worker busy with a long prompt,
//   which sends nothing until its first token, does not look wedged.
//   The veto ends when the worker makes progress again: a byte of any generation, including the
//   one-token probe the gateway sends a wedged worker (WorkerControl), or its restart (a refused
//   connection makes it unreachable instead). With replicas sharing state, the progress a peer
//   saw counts too (note_peer_progress).
// - unreachable: connection attempts to the worker failed and it stayed silent (no response
//   bytes, no KV event, no load record, no probe answer) for `stall` since. The veto ends on first
//   contact.
//
// A veto steers and never refuses: routing prefers workers without one, and when every candidate
// is vetoed it still picks among them (policy/candidates.cc). Health stays the health checker's:
// contact ends an unreachable veto but never makes an unhealthy worker healthy.
//
// Threading: the note*() calls from any thread (relaxed atomics; a report may be a moment late);
// evaluate() from one thread at a time (the control path's liveness timer); state() from any
// thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "kvgate/core/clock.h"

namespace kvgate::workers {

struct LivenessConfig {
  Duration wedge = std::chrono::seconds(3);  // 0 disables the wedge rule
  // The slowest prefill the wedge rule allows for (tokens per second; 0: none allowed for).
  double prefill_tokens_per_second = 4000;
  Duration stall = std::chrono::seconds(2);  // 0 disables the stall rule
};

enum class Liveness : uint8_t { kLive = 0, kUnreachable = 1, kWedged = 2 };
const char* liveness_name(Liveness l);

// Why a veto began or ended (kvgate_worker_liveness_transitions_total{to, reason}).
enum class LivenessReason : uint8_t {
  kNoProgress,     // -> wedged
  kStalled,        // -> unreachable
  kProgress,       // wedged -> live
  kContact,        // unreachable -> live
  kConnectFailed,  // wedged -> unreachable (the engine went away for good)
  kCount,
};
const char* liveness_reason_name(LivenessReason r);

struct LivenessTransition {
  Liveness from = Liveness::kLive;
  Liveness to = Liveness::kLive;
  LivenessReason reason = LivenessReason::kProgress;
};

class LivenessTracker {
 public:
  // `state`: where to keep the state instead of inside (a Worker keeps its trackers' states
  // beside its load figures, where routing decisions read them). It must outlive the tracker; only
  // the tracker writes it (release), anyone may read it (acquire).
  LivenessTracker(LivenessConfig config, const Clock& clock, std::atomic<uint8_t>* state = nullptr)
      : state_(state != nullptr ? *state : own_state_), config_(config), clock_(clock) {}

  // --- Reports from the request path and the control path ----------------------------------
  // A streamed generation was sent to the worker with `prefill_tokens` of its prompt uncached:
  // it joins the pile, and silence is expected until its prefill could have ended.
  void note_stream_started(uint64_t prefill_tokens = 0);
  // A streamed generation left the pile (any way it ended).
  void note_stream_ended();
  // Bytes of a generation's answer arrived (a streamed piece, or a non-streamed answer whole).
  void note_progress();
  // A peer gateway replica saw the worker's generations make progress at `at` (state sync): a
  // replica holds only its own streams, and an engine busy with a peer's must not look wedged.
  // Never moves the last progress back.
  void note_peer_progress(MonoTime at);
  // When this replica last saw progress (nullopt: never).
  std::optional<MonoTime> last_progress() const;
  // Any sign of life: a response of any route, a KV event batch, a load record.
  void note_contact();
  // A connection attempt to the worker failed (refused, reset, timed out).
  void note_connect_failed();

  // --- The evaluator ---------------------------------------------------------------------
  // Applies the rules at the current time; returns the transition when the state changed.
  std::optional<LivenessTransition> evaluate();

  Liveness state() const { return static_cast<Liveness>(state_.load(std::memory_order_acquire)); }
  bool vetoed() const { return state() != Liveness::kLive; }
  int32_t pile() const { return pile_.load(std::memory_order_relaxed); }
  const LivenessConfig& config() const { return config_; }

 private:
  int64_t now_ns() const { return clock_.now().time_since_epoch().count(); }

  // The state: `state` given to the constructor, else own_state_ (see there).
  std::atomic<uint8_t> own_state_{0};
  std::atomic<uint8_t>& state_;
  const LivenessConfig config_;
  const Clock& clock_;
  std::atomic<int32_t> pile_{0};
  std::atomic<int64_t> pile_since_ns_{0};         // when the pile last went from empty to not
  std::atomic<int64_t> prefill_until_ns_{0};      // when the pile's expected prefill ends
  std::atomic<int64_t> last_progress_ns_{0};      // 0: never
  std::atomic<int64_t> last_contact_ns_{0};       // 0: never
  std::atomic<int64_t> last_connect_fail_ns_{0};  // 0: never
  int64_t vetoed_at_ns_ = 0;                      // evaluator only
};

}  // namespace kvgate::workers
