// What crosses between the gateway and a worker on a client's behalf: the request as the worker
// gets it (its credential, the data-parallel rank, the request id, trace context and the hop
// list), and the worker's answer as the client gets it (its status, content type, body, and the
// worker and rank that produced it).
//
// Threading: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvgate/app/config.h"
#include "kvgate/core/ids.h"
#include "kvgate/http/client.h"
#include "kvgate/http/message.h"
#include "kvgate/workers/worker.h"

namespace kvgate::app {

// Names the worker that answered, on every answer a worker produced.
inline constexpr std::string_view kWorkerHeader = "x-kvgate-worker";
// On every error answer: "gateway" when kvgate made it (a model no worker serves, no worker, a
// refusal), "worker" when it forwards a worker's own. The two can read alike (a 404 for a model,
// a 503), and only one of them is the fleet's to fix.
inline constexpr std::string_view kErrorSourceHeader = "x-kvgate-error-source";
// Tells the client which data-parallel rank served it.
inline constexpr std::string_view kRankAnswerHeader = "x-kvgate-dp-rank";
// On an answer of a prefill/decode pair (the decode's): the prefill worker that computed the
// prompt.
inline constexpr std::string_view kPrefillWorkerHeader = "x-kvgate-prefill-worker";
// The request's id: the client's when it sent a usable one, else made here; on every answer.
inline constexpr std::string_view kRequestIdHeader = "x-request-id";
// The data-parallel rank a request is pinned to: vLLM's OpenAI server and SGLang both honour it.
inline constexpr std::string_view kRankHeader = "x-data-parallel-rank";
// Every gateway a request passed names itself here; a gateway that finds its own name (a worker
// URL that leads back to it, two gateways pointed at each other) refuses the request instead of
// sending it round until the file handles run out.
inline constexpr std::string_view kHopsHeader = "x-kvgate-hops";

// Whether `hops` (a comma-separated list of gateway ids) names `self` or is already too long.
bool is_loop(std::string_view hops, std::string_view self);

// The request as the worker gets it. Its body is the client's own bytes (not copied: `req` must
// outlive every attempt). Header 0 is the authorization slot (authorization_for), header 1 the
// data-parallel rank's, both set per attempt (empty headers are not sent). The client's
// headers named in `forward` (lower case) go along as they came.
http::ClientRequest upstream_request(const http::Request& req, std::string_view self,
                                     std::string_view request_id,
                                     std::span<const std::string> forward);

// What a request to worker `w` carries as its authorization: the worker's own credentials
// (worker_control.h's engine_authorization), else the client's header when `config` forwards it,
// else none.
std::string authorization_for(const http::Request& req, const workers::Worker& w,
                              const GatewayConfig& config);

// `body`, a JSON object, with `members` (`"key":value,...`, no braces) as its first members and
// its own top-level members named in `drop` left out, so that `members` replace them (an engine
// would take a repeated key's last value: the client's). The members kept are copied byte for
// byte. nullopt when `body` is not a JSON object.
std::optional<std::string> with_members(std::string_view body, std::string_view members,
                                        std::span<const std::string_view> drop = {});

// A worker's answer as the client gets it: its status, content type (JSON when it named none)
// and body, and the worker (and rank) that produced it (an empty `worker`: not named).
http::Response forwarded(unsigned status, const http::ClientResponse& head, std::string body,
                         const std::string& worker, std::optional<DpRank> rank);

}  // namespace kvgate::app
