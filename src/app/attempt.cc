#include "app/attempt.h"

#include <algorithm>

#include "boost/asio/post.hpp"

namespace kvgate::app {

Dispatch::Dispatch(workers::Worker& w, policy::Policy& p, const policy::RouteRequest& rr,
                   bool streamed, std::optional<DpRank> rank, uint64_t queued_tokens,
                   uint64_t unconfirmed_tokens)
    : w_(w),
      p_(p),
      streamed_(streamed),
      rank_(rank),
      queued_tokens_(static_cast<uint32_t>(std::min<uint64_t>(queued_tokens, UINT32_MAX))) {
  // (What prefilled() samples. A dispatch with no prompt to compute there, a pair's decode,
  // teaches no rate.)
  if (streamed_ && queued_tokens_ > 0 && w_.prefill_meter().learning()) {
    const workers::Worker::RoutingFigures f =
        rank_ ? w_.routing_figures(*rank_) : w_.routing_figures();
    queued_ahead_ = f.queued_ahead();
    dispatched_ = w_.clock().now();
  }
  w_.begin_request(rank_, queued_tokens_);
  w_.count_dispatch();
  if (streamed_) w_.liveness().note_stream_started(unconfirmed_tokens);
  ticket_ = p_.on_dispatch(w_, rr, rank_ ? static_cast<int32_t>(*rank_) : -1);
}

Dispatch::~Dispatch() {
  release_queue();
  w_.end_request(rank_);
  if (streamed_) w_.liveness().note_stream_ended();
  w_.breaker().record(outcome_);
  p_.on_request_end(w_, outcome_, ticket_);
}

void Dispatch::prefilled() {
  if (prefilled_) return;
  // (A whole answer's time is its decode's too: only a stream's first token times the prefill.)
  if (streamed_ && queued_tokens_ > 0)
    w_.note_prefill(queued_ahead_ + queued_tokens_, w_.clock().now() - dispatched_);
  release_queue();
}

void Dispatch::release_queue() {
  if (prefilled_) return;
  prefilled_ = true;
  w_.prefilled(queued_tokens_);
  p_.on_prefilled(ticket_);
}

VetoWatch::VetoWatch(workers::Worker& w, boost::asio::any_io_executor executor)
    : worker_(w),
      state_(std::make_shared<State>(std::move(executor))),
      entry_(&VetoWatch::on_veto, this) {
  worker_.inflight().add(&entry_);
}

VetoWatch::~VetoWatch() { worker_.inflight().remove(&entry_); }

void VetoWatch::on_veto(void* context, workers::VetoKind kind) {
  std::shared_ptr<State> state = static_cast<VetoWatch*>(context)->state_;
  boost::asio::post(state->executor, [state, kind] {
    if (state->fired) return;
    if (state->client_started && kind != workers::VetoKind::kWedged &&
        kind != workers::VetoKind::kShutdown) {
      return;
    }
    state->fired = kind;
    if (state->conn != nullptr) state->conn->close();
  });
}

bool retryable_status(unsigned status) { return status == 408 || status == 429 || status >= 500; }

workers::Outcome outcome_of_status(unsigned status) {
  if (status < 400) return workers::Outcome::kSuccess;
  return retryable_status(status) ? workers::Outcome::kServerError : workers::Outcome::kClientError;
}

workers::Outcome outcome_of_failure(const Status& s) {
  return absl::IsDeadlineExceeded(s) ? workers::Outcome::kTimeout
                                     : workers::Outcome::kConnectFailed;
}

}  // namespace kvgate::app
