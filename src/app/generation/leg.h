// An attempt's hold on its worker, shared by the attempt (attempt.cc) and the relay of its answer
// (relay.cc).
//
// Threading: one attempt's coroutine.
#pragma once

#include <optional>
#include <string>

#include "app/generation/stages.h"

namespace kvgate::app {

// One attempt's hold on its worker: its place in the worker's figures (whose
// outcome the relay sets), its veto watch, its lease and the client's disconnect watch.
struct Leg {
  workers::Worker& worker;
  std::optional<DpRank> rank;
  uint64_t predicted_cached;  // the prompt tokens the index predicts the worker holds (its
                              // confirmed blocks: not those in flight, which are a guess)
  Dispatch& dispatch;
  VetoWatch& veto;
  Lease& lease;
  const http::DisconnectWatch& watch;
  Attempt& a;
  http::Connection& conn() { return *lease.conn; }
};

// Why a veto ended an attempt, for the client and the log.
std::string veto_message(const workers::Worker& w, workers::VetoKind kind);
// The attempt was cut short by a veto of its worker: retried elsewhere at once, never held
// against the worker.
void vetoed(const GenerationParts& parts, Dispatch& dispatch, VetoWatch& veto,
            workers::Worker& worker, Attempt& a);
// The client went away: the attempt ends, answered by nobody (499 in the metrics).
void client_abort(const GenerationParts& parts, Generation& g, Leg& leg);

// relay.cc: the worker's answer (its head read) to the client.
boost::asio::awaitable<void> relay(const GenerationParts& parts, Generation& g, Leg& leg,
                                   http::ClientResponse& head);

}  // namespace kvgate::app
