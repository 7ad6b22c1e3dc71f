#include "app/attempt.h"

#include "boost/asio/post.hpp"

namespace kvgate::app {

Dispatch::Dispatch(workers::Worker& w, policy::Policy& p, const policy::RouteRequest& rr,
                   bool streamed, std::optional<DpRank> rank, uint64_t uncached_tokens)
    : w_(w), p_(p), streamed_(streamed), rank_(rank), prompt_tokens_(rr.prompt_tokens) {
  w_.begin_request(rank_, prompt_tokens_);
  w_.count_dispatch();
  if (streamed_) w_.liveness().note_stream_started(uncached_tokens);
  p_.on_dispatch(w_, rr);
}

Dispatch::~Dispatch() {
  prefilled();
  w_.end_request(rank_);
  if (streamed_) w_.liveness().note_stream_ended();
  w_.breaker().record(outcome_);
  p_.on_request_end(w_, outcome_);
}

void Dispatch::prefilled() {
  if (prompt_tokens_ == 0) return;
  w_.prefilled(prompt_tokens_);
  prompt_tokens_ = 0;
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
