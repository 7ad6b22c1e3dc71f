// A routing decision told to an operator (policy/explain.h has what it holds):
//
//   x-kvgate-decision: policy=cache_aware; branch=affinity; worker=http://w1:8000; rank=-;
//     matched=5/6; candidates=4; overloaded=1; unroutable=0; vetoed=0; excluded=0;
//     top=http://w1:8000 matched=5 wait_us=1600 load=2, http://w2:8000#1 matched=2
//     wait_us=8000 load=0 overloaded
//
// Fields are "; "-separated; `top` lists candidates best first, ", "-separated, each its URL
// (with "#rank" for a data-parallel rank) then space-separated figures and flags (overloaded;
// predicted: a depth the approximate mode guessed for a worker without KV events). wait_us is
// absent for policies without a cost model. The same text goes to the access log; GET
// /debug/route answers the same in JSON.
//
// Threading: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "kvgate/core/json_writer.h"
#include "kvgate/core/result.h"
#include "kvgate/policy/explain.h"
#include "kvgate/workers/registry.h"

namespace kvgate::app {

// The answer header's name, and the request header that asks for it (value "1" or "true").
inline constexpr std::string_view kDecisionHeader = "x-kvgate-decision";
inline constexpr std::string_view kExplainRequestHeader = "x-kvgate-explain";

// --decision-headers: never, when the request asks (x-kvgate-explain: 1), or on every answer.
enum class DecisionHeaders { kOff, kRequest, kAlways };
Result<DecisionHeaders> parse_decision_headers(std::string_view s);
// Whether an answer to a request with `explain_header` (x-kvgate-explain's value) carries the
// decision.
bool wants_decision(DecisionHeaders mode, std::string_view explain_header);

// How many candidates the header and the access log name; /debug/route names up to kDebugTop.
inline constexpr size_t kHeaderTop = 4;
inline constexpr size_t kDebugTop = 16;

// The header's value for `e` (its indices are into `fleet`).
std::string decision_text(std::string_view policy, const policy::Explanation& e,
                          const workers::FleetSnapshot& fleet);
// `e` as one JSON object (the members /debug/route answers with).
void write_decision_json(JsonWriter& w, std::string_view policy, const policy::Explanation& e,
                         const workers::FleetSnapshot& fleet);

}  // namespace kvgate::app
