// One attempt of a generation on one worker: what it holds while it runs and how it ended.
//
// - Dispatch: the request's place in the worker's figures (load, queued prompt tokens, liveness
//   pile), its breaker and the policy's accounting, entered on construction and left exactly once
//   on destruction, whichever way the attempt ends.
// - VetoWatch: the attempt's entry in the worker's in-flight list, so a veto of the worker can
//   cut it short.
// - Attempt: how it ended, for the retry loop (generation/dispatch.cc).
//
// Threading: both live in one attempt's coroutine, on its executor. A veto arrives on the control
// thread under the in-flight list's lock; VetoWatch only posts it to the attempt's executor,
// where the upstream connection is closed.
#pragma once

#include <memory>
#include <optional>

#include "boost/asio/any_io_executor.hpp"
#include "kvgate/core/ids.h"
#include "kvgate/core/result.h"
#include "kvgate/http/client.h"
#include "kvgate/http/message.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/inflight.h"
#include "kvgate/workers/worker.h"

namespace kvgate::app {

// The request's end reaches the worker's load counter, its breaker, its liveness pile and the
// policy exactly once (the default outcome, if nobody says otherwise, is a cancellation).
class Dispatch {
 public:
  // `queued_tokens`: the prompt's tokens the worker is expected to prefill, what its queue
  // counts until the first token (the chosen worker's cache, blocks in flight there included,
  // taken off). `unconfirmed_tokens`: the same without the blocks in flight, which the liveness
  // rule waits for before it takes silence for a wedge (a prefix another request is still
  // computing there delays this one's first token).
  Dispatch(workers::Worker& w, policy::Policy& p, const policy::RouteRequest& rr, bool streamed,
           std::optional<DpRank> rank, uint64_t queued_tokens, uint64_t unconfirmed_tokens);
  ~Dispatch();
  Dispatch(const Dispatch&) = delete;
  Dispatch& operator=(const Dispatch&) = delete;

  void set(workers::Outcome o) { outcome_ = o; }
  // The first token (or the whole answer) is back: the prompt no longer waits in the queue. A
  // stream's first token teaches the worker its prefill rate (workers/prefill_rate.h).
  void prefilled();

 private:
  void release_queue();

  workers::Worker& w_;
  policy::Policy& p_;
  const bool streamed_;
  const std::optional<DpRank> rank_;
  const uint32_t queued_tokens_;
  uint64_t queued_ahead_ = 0;  // the prompt tokens queued there before this one, at dispatch
  MonoTime dispatched_{};
  bool prefilled_ = false;
  uint64_t ticket_ = 0;  // the policy's, for the dispatch's end
  workers::Outcome outcome_ = workers::Outcome::kCancelled;
};

// A veto of the worker closes the attempt's upstream connection, which wakes its pending read
// with an error: an attempt that has sent nothing to its client then goes to another worker at
// once, and a stream underway on a wedged worker ends with an error event. A stream underway on
// a worker vetoed for another reason (unreachable, unhealthy) is left alone: it either makes
// progress or fails by itself. The gateway's own shutdown veto (its drain deadline passed) ends
// every attempt, started or not.
class VetoWatch {
 public:
  VetoWatch(workers::Worker& w, boost::asio::any_io_executor executor);
  ~VetoWatch();
  VetoWatch(const VetoWatch&) = delete;
  VetoWatch& operator=(const VetoWatch&) = delete;

  // The connection a veto closes (null: none). On the attempt's executor.
  void watch(http::Connection* conn) { state_->conn = conn; }
  // Bytes reached the client: from now on only a wedge (or shutdown) veto cuts the attempt.
  void client_started() { state_->client_started = true; }
  // The veto that cut this attempt short, if one did.
  std::optional<workers::VetoKind> fired() const { return state_->fired; }

 private:
  // Shared with the handler a veto posts, which may run after the attempt ended.
  struct State {
    explicit State(boost::asio::any_io_executor e) : executor(std::move(e)) {}
    boost::asio::any_io_executor executor;
    http::Connection* conn = nullptr;
    bool client_started = false;
    std::optional<workers::VetoKind> fired;
  };
  // Under the in-flight list's lock, on the control thread: only hands the news over.
  static void on_veto(void* context, workers::VetoKind kind);

  workers::Worker& worker_;
  std::shared_ptr<State> state_;
  workers::InflightRequests::Entry entry_;
};

// How one attempt on one worker ended.
struct Attempt {
  bool done = false;                     // the client got its answer (or is gone): stop
  std::optional<http::Response> answer;  // a retryable error answer, forwarded if retries run out
  Status failure;                        // a transport failure (no answer)
  bool retry = false;
  bool vetoed = false;  // cut short by a veto of the worker: retry elsewhere without backoff
};

// Which answers are worth another worker: a timeout, too many requests, a server error.
bool retryable_status(unsigned status);
// What an answer's status, or a transport failure, tells the worker's breaker.
workers::Outcome outcome_of_status(unsigned status);
workers::Outcome outcome_of_failure(const Status& s);

}  // namespace kvgate::app
