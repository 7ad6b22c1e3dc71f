#include "app/decision_report.h"

#include <cstdio>

namespace kvgate::app {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string_view url_of(const workers::FleetSnapshot& fleet, int32_t index) {
  return index >= 0 && static_cast<size_t>(index) < fleet.workers.size()
             ? std::string_view(fleet.workers[static_cast<size_t>(index)]->url())
             : std::string_view("-");
}

}  // namespace

Result<DecisionHeaders> parse_decision_headers(std::string_view s) {
  if (s == "off") return DecisionHeaders::kOff;
  if (s == "request") return DecisionHeaders::kRequest;
  if (s == "always") return DecisionHeaders::kAlways;
  return absl::InvalidArgumentError("--decision-headers must be off, request or always, not '" +
                                    std::string(s) + "'");
}

bool wants_decision(DecisionHeaders mode, std::string_view explain_header) {
  switch (mode) {
    case DecisionHeaders::kOff:
      return false;
    case DecisionHeaders::kAlways:
      return true;
    case DecisionHeaders::kRequest:
      return explain_header == "1" || explain_header == "true";
  }
  return false;
}

std::string decision_text(std::string_view policy, const policy::Explanation& e,
                          const workers::FleetSnapshot& fleet) {
  const policy::Decision& d = e.decision;
  std::string out;
  out.append("policy=").append(policy);
  out.append("; branch=").append(policy::branch_name(d.branch));
  out.append("; worker=").append(url_of(fleet, d.worker));
  out.append("; rank=").append(d.rank >= 0 ? std::to_string(d.rank) : "-");
  out.append("; matched=").append(std::to_string(d.matched_blocks));
  out.append("/").append(std::to_string(e.chain_blocks));
  if (d.pending_blocks > 0) out.append("; pending=").append(std::to_string(d.pending_blocks));
  out.append("; candidates=").append(std::to_string(e.candidates));
  out.append("; overloaded=").append(std::to_string(e.overloaded));
  out.append("; unroutable=").append(std::to_string(e.unroutable));
  out.append("; vetoed=").append(std::to_string(e.vetoed));
  out.append("; excluded=").append(std::to_string(e.excluded));
  out.append("; top=");
  for (size_t i = 0; i < e.top.size(); ++i) {
    const policy::CandidateReport& c = e.top[i];
    if (i > 0) out.append(", ");
    out.append(url_of(fleet, c.index));
    if (c.rank >= 0) out.append("#").append(std::to_string(c.rank));
    out.append(" matched=").append(std::to_string(c.matched_blocks));
    if (c.expected_wait_us >= 0) out.append(" wait_us=").append(number(c.expected_wait_us));
    out.append(" load=").append(number(c.load));
    if (c.overloaded) out.append(" overloaded");
    if (c.predicted) out.append(" predicted");
    if (c.pending_blocks > 0) out.append(" pending=").append(std::to_string(c.pending_blocks));
    if (c.offloaded_blocks > 0) {
      out.append(" offloaded=").append(std::to_string(c.offloaded_blocks));
    }
  }
  return out;
}

void write_decision_json(JsonWriter& w, std::string_view policy, const policy::Explanation& e,
                         const workers::FleetSnapshot& fleet) {
  const policy::Decision& d = e.decision;
  w.begin_object().member("policy", policy).member("branch", policy::branch_name(d.branch));
  if (d.worker >= 0) {
    w.member("worker", url_of(fleet, d.worker));
  } else {
    w.key("worker").null();
  }
  if (d.rank >= 0) {
    w.member("rank", d.rank);
  } else {
    w.key("rank").null();
  }
  w.member("matched_blocks", d.matched_blocks).member("pending_blocks", d.pending_blocks);
  w.member("chain_blocks", e.chain_blocks);
  w.member("candidates", static_cast<uint64_t>(e.candidates));
  w.key("gates").begin_object();
  w.member("overloaded", static_cast<uint64_t>(e.overloaded));
  w.member("unroutable", static_cast<uint64_t>(e.unroutable));
  w.member("vetoed", static_cast<uint64_t>(e.vetoed));
  w.member("excluded", static_cast<uint64_t>(e.excluded)).end_object();
  w.key("top").begin_array();
  for (const policy::CandidateReport& c : e.top) {
    w.begin_object().member("worker", url_of(fleet, c.index));
    if (c.rank >= 0) w.member("rank", c.rank);
    w.member("matched_blocks", c.matched_blocks).member("load", c.load);
    w.member("queued_tokens", c.queued_tokens);
    if (c.expected_wait_us >= 0) w.member("expected_wait_us", c.expected_wait_us);
    w.member("overloaded", c.overloaded).member("predicted", c.predicted);
    w.member("pending_blocks", c.pending_blocks).member("offloaded_blocks", c.offloaded_blocks);
    w.member("chosen", c.chosen).end_object();
  }
  w.end_array().end_object();
}

}  // namespace kvgate::app
