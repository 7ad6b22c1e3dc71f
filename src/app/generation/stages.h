// The generation path as stages: admit -> parse -> route -> dispatch -> relay -> account.
//
// One request's state (Generation) goes from stage to stage; each stage is a function of its own
// file that reads the gateway only through GenerationParts, the narrow view of what a generation
// uses (the fleet, the router, the upstreams, the observers). A stage that answers the request
// itself (a refusal, an error) returns false and the pipeline goes straight to account; a
// request that goes on reaches dispatch, which makes attempts on workers (retries, resends on a
// connection the engine had closed, vetoes), and each attempt relays the engine's answer (whole,
// or as a stream piece by piece).
//
//   admit.cc     draining, request loops, --max-concurrent-requests
//   parse.cc     the body (or a typed request) into a ParsedRequest (large ones on the parse
//                thread); the model known
//   route.cc     the block chain, the routing request and the upstream request; each decision
//   dispatch.cc  attempts on workers until one answers, retries with backoff
//   attempt.cc   one worker: a connection, the request, a veto and the client watched
//   pd.cc        a prefill/decode pair: the decode's attempt beside the prefill's exchange
//   relay.cc     an attempt's answer to the client: whole, or streamed within its bounds
//   account.cc   answers sent with the request's id and decision; metrics and the access log
//
// Threading: a Generation belongs to one request's coroutine; GenerationParts' members are the
// gateway's, each thread-safe as its own header says.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/access.h"
#include "app/access_log.h"
#include "app/admission_gate.h"
#include "app/answer_memory.h"
#include "app/attempt.h"
#include "app/decision_report.h"
#include "app/gateway_metrics.h"
#include "app/request_model.h"
#include "app/routing_input.h"
#include "app/upstream_pool.h"
#include "boost/asio/awaitable.hpp"
#include "boost/asio/io_context.hpp"
#include "kvgate/app/config.h"
#include "kvgate/core/clock.h"
#include "kvgate/http/client.h"
#include "kvgate/http/server.h"
#include "kvgate/index/indexer.h"
#include "kvgate/policy/policy.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {

// What the generation path uses of the gateway, and nothing else.
struct GenerationParts {
  const GatewayConfig& config;
  const Clock& clock;
  std::string_view instance_id;  // this process, in the hop header of forwarded requests
  // The fleet, the router and the upstreams.
  workers::WorkerRegistry& workers;
  policy::Policy& policy;  // with --pd-disaggregation, the prefill side's
  // --pd-disaggregation: the decode side's policy (null: the fleet is not disaggregated).
  policy::Policy* decode_policy = nullptr;
  UpstreamPool& upstream;
  const RoutingInput& routing;
  const index::Indexer* index = nullptr;  // the KV index routing reads (the decider asks it)
  const PromptTokenizers& tokenizers;
  boost::asio::io_context& parse_context;  // large bodies are parsed there, one at a time
  AdmissionGate& admission;                // --max-concurrent-requests
  const AccessGuard& access;               // who a key is: tenant, class, models, limits
  // The observers.
  GatewayMetrics& metrics;
  const AccessLog& access_log;
  DecisionHeaders decision_headers;
  AnswerMemory* answers;  // null: chat answers are not encoded ahead of the next turn
  // The gateway's drain: draining refuses new requests; shutting_down cuts what still runs.
  const std::atomic<bool>& draining;
  const std::atomic<bool>& shutting_down;
  std::atomic<int64_t>& active;  // generations running now
};

// One request on its way through the stages.
struct Generation {
  Generation(ApiRoute route, const http::Request& req, http::Responder& res, MonoTime start)
      : route(route), req(req), res(res), start(start) {}
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  const ApiRoute route;
  // The request: its fields (request id, routing key, credentials) and the body sent to the
  // engine. A typed request (the gRPC API's) is read from `typed`, its body never parsed.
  const http::Request& req;
  const TypedRequest* typed = nullptr;
  http::Responder& res;
  const MonoTime start;
  // The client's request id, or one made here: sent to the worker, returned on every answer.
  std::string request_id;
  std::string client;        // the peer's address ("" for a request not from a socket)
  bool explain = false;      // the decision is told (x-kvgate-decision, the access log)
  bool name_worker = false;  // the answer names its worker (GatewayConfig::expose_worker_header)
  std::string decision;      // the last decision's text, when told
  unsigned status = 0;       // what the client was answered (0: nothing yet)
  std::optional<MonoTime> first_token_at;  // a stream's first piece from its worker
  AdmissionGate::Ticket* ticket =
      nullptr;             // the admission slot (its prefill ends at first_token_at)
  AccessRecord record;     // its views point into this Generation and the request
  std::string worker_url;  // the last worker tried (record.worker views it)
  // The last attempt's prefill worker when it was a prefill/decode pair, else empty: named on the
  // answer (x-kvgate-prefill-worker) and in the access log.
  std::string prefill_url;

  // limit: the caller's keys-file entry (null: none), its class, and what its buckets took
  AccessGuard::Caller caller;
  Priority priority = Priority::kStandard;
  uint64_t completion_tokens = 0;  // what the engine's usage said (0: not said)
  // parse
  ParsedRequest parsed;
  std::shared_ptr<const workers::FleetSnapshot> fleet;
  // route
  uint32_t block_size = 0;
  std::vector<SeqHash> chain;
  policy::RouteRequest route_request;
  http::ClientRequest upstream;  // its body views the client's unless it was rewritten
  bool strip_usage = false;      // the engine is asked for a stream's usage, kept from the client
  bool remember_answer = false;  // a chat answer encoded ahead of the next turn
  bool prompt_counted = false;
  // dispatch
  std::vector<WorkerId> tried;
  // The connection the running attempt holds (null between attempts): a prefill that fails cuts
  // its decode's exchange through it (pd.cc).
  http::Connection* live_upstream = nullptr;
  // The running attempt is an SGLang pair's decode, which waits for its prefill's room: a 504
  // from it (the room came too late) may be the prefill's doing, and neither breaker hears of it
  // (PairFault::kEither).
  bool decode_waits_for_room = false;
  std::optional<http::Response> last_answer;  // a retryable error answer, if retries run out
  Status last_failure;
};

// admit.cc: false when the request was refused (answered).
boost::asio::awaitable<bool> admit(const GenerationParts& parts, Generation& g,
                                   AdmissionGate::Ticket* ticket);
// parse.cc: false when the body or its model was refused (answered).
boost::asio::awaitable<bool> parse(const GenerationParts& parts, Generation& g);
// limit.cc: the caller by its key, and the request's class (before admission: the queue orders
// by them).
void identify(const GenerationParts& parts, Generation& g);
// limit.cc: the caller's models and rate limits; false when refused (answered).
boost::asio::awaitable<bool> limit(const GenerationParts& parts, Generation& g);
// limit.cc: a request that ends: its service charged to its tenant's fair share, its output
// tokens taken from its caller's token bucket.
void charge_output(const GenerationParts& parts, const Generation& g);
// route.cc: the chain, the routing request and the upstream request of a parsed request.
void prepare_route(const GenerationParts& parts, Generation& g);
// route.cc: the next decision among the workers of `role` by `policy` (tried workers excluded),
// counted and, when asked, told; `record`: the access log keeps this decision's figures.
policy::Decision decide(const GenerationParts& parts, Generation& g, policy::Policy& policy,
                        workers::WorkerRole role, bool record = true);
inline policy::Decision decide(const GenerationParts& parts, Generation& g) {
  return decide(parts, g, parts.policy, workers::WorkerRole::kRegular);
}
// dispatch.cc: attempts on the workers the policy picks, until one answers or none is left.
boost::asio::awaitable<void> dispatch(const GenerationParts& parts, Generation& g);

// attempt.cc: one attempt on `worker` (the policy's decision `d`), its answer relayed.
boost::asio::awaitable<Attempt> attempt(const GenerationParts& parts, Generation& g,
                                        workers::Worker& worker, const policy::Decision& d);

// Whose failure a failed pair was: the decode's, the prefill's (it failed, and cut its decode),
// or either's (the decode gave up while its prefill still ran, or timed out waiting for its room).
enum class PairFault { kDecode, kPrefill, kEither };
// pd.cc: one attempt of a prefill/decode pair: the decode's answer relayed, the prefill's
// checked; `fault` says whose failure a failed attempt was.
boost::asio::awaitable<Attempt> pd_attempt(const GenerationParts& parts, Generation& g,
                                           std::shared_ptr<workers::Worker> prefill,
                                           const policy::Decision& prefill_decision,
                                           workers::Worker& decode, const policy::Decision& d,
                                           PairFault* fault);

// pd.cc: the decider. Whether the decode worker `d` chose (its rank when pinned) serves the
// request alone, prefilling what it lacks itself, and why; nullopt when the pair should run
// (`prefill_d`: the prefill worker chosen for it).
struct LocalPrefill {
  enum class Reason {
    kHeld,    // it holds most of the prompt (--pd-local-prefill-tokens, --pd-local-prefill-share)
    kSooner,  // it would start sooner than the pair (--pd-local-prefill-wait-ratio)
  };
  Reason reason = Reason::kHeld;
  uint64_t held_tokens = 0;  // of the prompt, on the decode worker (from the KV index)
  // kSooner: the expected waits before the first token, alone and as a pair.
  double local_wait_ms = 0;
  double pair_wait_ms = 0;
};
std::optional<LocalPrefill> local_prefill(const GenerationParts& parts, const Generation& g,
                                          const policy::Decision& prefill_d,
                                          const policy::Decision& d);

// account.cc: `r` to the client, with the request's id (and decision when told).
boost::asio::awaitable<void> reply(Generation& g, http::Response r);
// account.cc: an error answer in OpenAI's shape, its reason counted (503 carries Retry-After).
http::Response error_answer(const GenerationParts& parts, ErrorReason reason, unsigned status,
                            std::string_view message);
// account.cc: the end of every request: its metrics and its access-log line.
void account(const GenerationParts& parts, Generation& g);

// The request id the client sent when it is usable (printable, at most 128 bytes), else 32 hex
// digits made here.
std::string request_id_of(const http::Request& req);

}  // namespace kvgate::app
