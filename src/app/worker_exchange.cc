#include "app/worker_exchange.h"

#include <simdjson.h>

#include <algorithm>

#include "kvgate/core/json_writer.h"

namespace kvgate::app {
namespace {

constexpr size_t kMaxHops = 8;

}  // namespace

bool is_loop(std::string_view hops, std::string_view self) {
  if (hops.empty()) return false;
  size_t n = 0;
  for (size_t start = 0; start <= hops.size(); ++n) {
    size_t comma = hops.find(',', start);
    if (comma == std::string_view::npos) comma = hops.size();
    std::string_view id = hops.substr(start, comma - start);
    while (!id.empty() && id.front() == ' ') id.remove_prefix(1);
    if (id == self) return true;
    start = comma + 1;
  }
  return n >= kMaxHops;
}

http::ClientRequest upstream_request(const http::Request& req, std::string_view self,
                                     std::string_view request_id,
                                     std::span<const std::string> forward) {
  http::ClientRequest c;
  c.method = http::Verb::post;
  c.target = std::string(req.target());
  c.body_view = req.body();
  // The body parsed as JSON, whatever the client called it: engines refuse anything else (curl -d
  // sends application/x-www-form-urlencoded).
  c.content_type = "application/json";
  c.headers.reserve(4 + forward.size());                   // at most those below: one allocation
  c.headers.emplace_back("authorization", std::string());  // set per attempt
  c.headers.emplace_back(std::string(kRankHeader), std::string());  // set per attempt
  c.headers.emplace_back(std::string(kRequestIdHeader), std::string(request_id));
  for (const std::string& h : forward) {
    const std::string_view v = req.header(h);
    if (!v.empty()) c.headers.emplace_back(h, std::string(v));
  }
  const std::string_view hops = req.header(kHopsHeader);
  c.headers.emplace_back(
      std::string(kHopsHeader),
      hops.empty() ? std::string(self) : std::string(hops) + "," + std::string(self));
  return c;
}

std::string authorization_for(const http::Request& req, const workers::Worker& w,
                              const GatewayConfig& config) {
  if (!w.authorization().empty()) return w.authorization();
  if (config.forwards_client_authorization()) return std::string(req.header("authorization"));
  return {};
}

http::Response forwarded(unsigned status, const http::ClientResponse& head, std::string body,
                         const std::string& worker, std::optional<DpRank> rank) {
  http::Response r;
  r.status = status;
  // Assigned, not replaced: the default's room takes the usual "application/json".
  const std::string_view ct = head.header("content-type");
  if (!ct.empty()) r.content_type.assign(ct);
  r.body = std::move(body);
  r.headers.reserve(5);  // these three, and the request id and decision the reply adds
  if (status >= 400) r.headers.emplace_back(std::string(kErrorSourceHeader), "worker");
  if (!worker.empty()) r.headers.emplace_back(std::string(kWorkerHeader), worker);
  if (rank) r.headers.emplace_back(std::string(kRankAnswerHeader), std::to_string(*rank));
  return r;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// `members` put first in `body`, nothing dropped: no parse.
std::optional<std::string> prepend_members(std::string_view body, std::string_view members) {
  size_t open = 0;
  while (open < body.size() && is_space(body[open])) ++open;
  if (open >= body.size() || body[open] != '{') return std::nullopt;
  size_t next = open + 1;
  while (next < body.size() && is_space(body[next])) ++next;
  const bool empty_object = next < body.size() && body[next] == '}';
  std::string out;
  out.reserve(body.size() + members.size() + 1);
  out.append(body.substr(0, open + 1)).append(members);
  if (!empty_object) out.push_back(',');
  out.append(body.substr(open + 1));
  return out;
}

// The bytes of value `v` as they stand in the document (trailing blanks trimmed).
std::optional<std::string_view> raw_value(simdjson::ondemand::value v) {
  namespace od = simdjson::ondemand;
  od::json_type type;
  if (v.type().get(type) != simdjson::SUCCESS) return std::nullopt;
  std::string_view raw;
  if (type == od::json_type::object) {
    od::object o;
    if (v.get_object().get(o) != simdjson::SUCCESS || o.raw_json().get(raw) != simdjson::SUCCESS)
      return std::nullopt;
  } else if (type == od::json_type::array) {
    od::array a;
    if (v.get_array().get(a) != simdjson::SUCCESS || a.raw_json().get(raw) != simdjson::SUCCESS)
      return std::nullopt;
  } else {
    raw = v.raw_json_token();
  }
  while (!raw.empty() && is_space(raw.back())) raw.remove_suffix(1);
  return raw;
}

}  // namespace

std::optional<std::string> with_members(std::string_view body, std::string_view members,
                                        std::span<const std::string_view> drop) {
  if (drop.empty()) return prepend_members(body, members);
  namespace od = simdjson::ondemand;
  const simdjson::padded_string padded(body);
  od::parser parser;
  od::document doc;
  od::object obj;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(obj) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  std::string out = "{";
  out.append(members);
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(v) != simdjson::SUCCESS) {
      return std::nullopt;
    }
    const bool dropped = std::find(drop.begin(), drop.end(), key) != drop.end();
    const std::string name(key);  // (the next read reuses the key's buffer)
    const std::optional<std::string_view> raw = raw_value(v);
    if (!raw) return std::nullopt;
    if (dropped) continue;
    if (out.size() > 1) out.push_back(',');
    JsonWriter(&out).value(name);
    out.push_back(':');
    out.append(*raw);
  }
  out.push_back('}');
  return out;
}

}  // namespace kvgate::app
