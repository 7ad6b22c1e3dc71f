#include "replay/fleet.h"

#include <charconv>

#include "kvgate/http/client.h"
#include "simdjson.h"

namespace kvgate::replay {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::string_view kScheme = "http://";

Result<std::string> get_body(std::string_view url, const std::string& target, unsigned* status) {
  auto ep = parse_http_url(url);
  if (!ep.ok()) return ep.status();
  http::SyncClient client(ep->host, ep->port,
                          http::ClientOptions{.connect_timeout = std::chrono::seconds(5),
                                              .request_timeout = std::chrono::seconds(30),
                                              .idle_timeout = std::chrono::seconds(30)});
  auto res = client.get(target);
  if (!res.ok()) {
    return absl::UnavailableError("GET " + std::string(url) + target + ": " +
                                  std::string(message_of(res.status())));
  }
  *status = res->status;
  return std::move(res->body);
}

std::string str(element e, const char* key) {
  std::string_view v;
  if (e[key].get(v) != simdjson::SUCCESS) return {};
  return std::string(v);
}

std::vector<KvStream> streams_of(element doc, const std::string& url) {
  std::vector<KvStream> out;
  array eps;
  if (doc["kv_events_endpoints"].get(eps) != simdjson::SUCCESS) return out;
  for (element e : eps) {
    KvStream s;
    s.worker_url = url;
    uint64_t rank = 0;
    if (e["dp_rank"].get(rank) == simdjson::SUCCESS) s.dp_rank = static_cast<uint32_t>(rank);
    s.endpoint = str(e, "endpoint");
    s.replay_endpoint = str(e, "replay_endpoint");
    s.topic = str(e, "topic");
    if (!s.endpoint.empty()) out.push_back(std::move(s));
  }
  return out;
}

uint32_t block_size_of(element doc) {
  uint64_t bs = 0;
  if (doc["block_size"].get(bs) == simdjson::SUCCESS) return static_cast<uint32_t>(bs);
  if (doc["page_size"].get(bs) == simdjson::SUCCESS) return static_cast<uint32_t>(bs);
  return 0;
}

}  // namespace

Result<Endpoint> parse_http_url(std::string_view url) {
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError("bad URL \"" + std::string(url) + "\": " + why +
                                      " (expected http://HOST:PORT)");
  };
  if (url.substr(0, kScheme.size()) != kScheme) return bad("not http://");
  std::string_view rest = url.substr(kScheme.size());
  rest = rest.substr(0, rest.find('/'));
  Endpoint ep;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed [");
    ep.host = std::string(rest.substr(1, close - 1));
    rest = rest.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return bad("no port");
    port = rest.substr(1);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    ep.host = std::string(rest.substr(0, colon));
    port = rest.substr(colon + 1);
  }
  if (ep.host.empty()) return bad("no host");
  unsigned p = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || ptr != port.data() + port.size() || p == 0 || p > 65535) {
    return bad("bad port");
  }
  ep.port = static_cast<uint16_t>(p);
  return ep;
}

std::string canonical_url(std::string_view url) {
  std::string u(url);
  const size_t path = u.find('/', u.find("://") == std::string::npos ? 0 : u.find("://") + 3);
  if (path != std::string::npos) u.resize(path);
  return u;
}

Result<FleetWorker> describe_worker(std::string_view url) {
  unsigned status = 0;
  auto body = get_body(url, "/server_info", &status);
  if (!body.ok()) return body.status();
  if (status != 200) {
    return absl::FailedPreconditionError("GET " + std::string(url) + "/server_info answered " +
                                         std::to_string(status));
  }
  simdjson::dom::parser parser;
  element doc;
  if (parser.parse(*body).get(doc) != simdjson::SUCCESS || !doc.is_object()) {
    return absl::InvalidArgumentError(std::string(url) + "/server_info is not a JSON object");
  }
  FleetWorker w;
  w.url = canonical_url(url);
  w.block_size = block_size_of(doc);
  w.streams = streams_of(doc, w.url);
  return w;
}

Result<Fleet> discover(std::string_view target_url) {
  unsigned status = 0;
  auto body = get_body(target_url, "/workers", &status);
  if (!body.ok()) return body.status();
  Fleet fleet;
  if (status == 404 || status == 405) {
    auto w = describe_worker(target_url);
    if (!w.ok()) return w.status();
    fleet.workers.push_back(std::move(*w));
    return fleet;
  }
  if (status != 200) {
    return absl::FailedPreconditionError("GET " + std::string(target_url) + "/workers answered " +
                                         std::to_string(status));
  }
  simdjson::dom::parser parser;
  element doc;
  array workers;
  if (parser.parse(*body).get(doc) != simdjson::SUCCESS ||
      doc["workers"].get(workers) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(std::string(target_url) +
                                      "/workers is not {\"workers\": [...]}");
  }
  fleet.through_gateway = true;
  for (element e : workers) {
    FleetWorker w;
    w.url = canonical_url(str(e, "url"));
    if (w.url.empty()) continue;
    w.block_size = block_size_of(e);
    w.role = str(e, "role");
    w.streams = streams_of(e, w.url);
    fleet.workers.push_back(std::move(w));
  }
  return fleet;
}

Result<std::vector<MockRecord>> fetch_records(std::string_view worker_url) {
  auto ep = parse_http_url(worker_url);
  if (!ep.ok()) return ep.status();
  http::SyncClient client(ep->host, ep->port,
                          http::ClientOptions{.connect_timeout = std::chrono::seconds(5),
                                              .request_timeout = std::chrono::seconds(30),
                                              .idle_timeout = std::chrono::seconds(30)});
  simdjson::dom::parser parser;
  std::vector<MockRecord> out;
  uint64_t since = 0;
  constexpr uint64_t kPage = 5000;
  for (;;) {
    auto res = client.get("/admin/requests?since=" + std::to_string(since) +
                          "&limit=" + std::to_string(kPage));
    if (!res.ok()) {
      return absl::UnavailableError("GET " + std::string(worker_url) +
                                    "/admin/requests: " + std::string(message_of(res.status())));
    }
    if (res->status != 200) {
      return absl::FailedPreconditionError("GET " + std::string(worker_url) +
                                           "/admin/requests answered " +
                                           std::to_string(res->status) + " (not a kvgate-mock?)");
    }
    element doc;
    array reqs;
    uint64_t last = 0;
    if (parser.parse(res->body).get(doc) != simdjson::SUCCESS ||
        doc["requests"].get(reqs) != simdjson::SUCCESS ||
        doc["last_seq"].get(last) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(std::string(worker_url) +
                                        "/admin/requests: not the mock's record shape");
    }
    size_t n = 0;
    for (element r : reqs) {
      ++n;
      MockRecord m;
      m.id = str(r, "id");
      m.request_id = str(r, "request_id");
      m.status = str(r, "status");
      uint64_t v = 0;
      if (r["prompt_tokens"].get(v) == simdjson::SUCCESS) m.prompt_tokens = v;
      if (r["cached_tokens"].get(v) == simdjson::SUCCESS) m.cached_tokens = v;
      if (r["output_tokens"].get(v) == simdjson::SUCCESS) m.output_tokens = v;
      if (r["oracle_tokens"].get(v) == simdjson::SUCCESS) m.oracle_tokens = v;
      out.push_back(std::move(m));
    }
    if (n < kPage || last <= since) break;
    since = last;
  }
  return out;
}

}  // namespace kvgate::replay
