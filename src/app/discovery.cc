#include "kvgate/app/discovery.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>

namespace kvgate::app {
namespace {

// "tcp://*:5557" -> "tcp://<worker host>:5557": engines advertise their bind address.
std::string reachable(std::string endpoint, const std::string& worker_host) {
  for (std::string_view wildcard : {"tcp://*:", "tcp://0.0.0.0:", "tcp://[::]:"}) {
    if (endpoint.rfind(wildcard, 0) == 0) {
      return "tcp://" + worker_host + ":" + endpoint.substr(wildcard.size());
    }
  }
  return endpoint;
}

// "tcp://host:5557" + rank r -> "tcp://host:(5557 + r)": rank r publishes on the base port + r.
std::string offset_port(const std::string& endpoint, uint32_t rank) {
  const auto colon = endpoint.rfind(':');
  if (rank == 0 || colon == std::string::npos) return endpoint;
  int port = 0;
  const char* b = endpoint.data() + colon + 1;
  if (std::from_chars(b, endpoint.data() + endpoint.size(), port).ec != std::errc() || port < 0 ||
      port > 65535 - static_cast<int>(rank)) {
    return endpoint;  // no port to offset (the subscription then fails, naming the endpoint)
  }
  return endpoint.substr(0, colon + 1) + std::to_string(port + static_cast<int>(rank));
}

// What the engine says of prefill/decode disaggregation (ServerInfo's pd_* fields). An engine
// that says both protocols (kvgate-mock serves both) is left to the fleet's flag.
void read_disaggregation(simdjson::dom::element doc, std::string_view body, ServerInfo* out) {
  std::string_view mode;
  bool sglang = false;
  if (doc["disaggregation_mode"].get_string().get(mode) == simdjson::SUCCESS &&
      (mode == "prefill" || mode == "decode")) {
    sglang = true;
    out->pd_role = *workers::parse_worker_role(mode);
    uint64_t port = 0;
    if (out->pd_role == workers::WorkerRole::kPrefill &&
        doc["disaggregation_bootstrap_port"].get_uint64().get(port) == simdjson::SUCCESS &&
        port > 0 && port <= 65535) {
      out->bootstrap_port = static_cast<uint16_t>(port);
    }
  }
  // vLLM's /server_info holds its whole configuration: as JSON ("kv_connector": "NixlConnector")
  // or in its text form (kv_connector='NixlConnector').
  bool vllm = false;
  for (std::string_view said :
       {R"("kv_connector":"NixlConnector")", R"("kv_connector": "NixlConnector")",
        "kv_connector='NixlConnector'"}) {
    vllm |= body.find(said) != std::string_view::npos;
  }
  if (sglang != vllm) out->pd_wire = sglang ? workers::PdWire::kSglang : workers::PdWire::kVllm;
}

}  // namespace

ModelList parse_models(std::string_view body) {
  ModelList out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array data;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS ||
      doc["data"].get_array().get(data) != simdjson::SUCCESS) {
    return out;
  }
  out.valid = true;
  for (auto m : data) {
    std::string_view id, parent;
    if (m["id"].get_string().get(id) != simdjson::SUCCESS) continue;
    out.models.emplace_back(id);
    uint64_t len = 0;  // vLLM's and SGLang's model cards say max_model_len
    if (m["max_model_len"].get_uint64().get(len) == simdjson::SUCCESS && len < (1u << 31)) {
      out.max_model_len = std::max(out.max_model_len, static_cast<uint32_t>(len));
    }
    if (m["parent"].get_string().get(parent) == simdjson::SUCCESS && !parent.empty() &&
        parent != id) {
      out.lora_adapters.emplace_back(id);
    }
  }
  return out;
}

ServerInfo parse_server_info(std::string_view body, const std::string& host) {
  ServerInfo out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) return out;
  read_disaggregation(doc, body, &out);
  uint64_t bs = 0;
  if (doc["block_size"].get_uint64().get(bs) == simdjson::SUCCESS ||
      doc["page_size"].get_uint64().get(bs) == simdjson::SUCCESS) {
    out.block_size = static_cast<uint32_t>(bs);
  }
  // vLLM's cache config says num_gpu_blocks; SGLang says max_total_num_tokens (its page size in
  // tokens is the block size).
  uint64_t blocks = 0, tokens = 0;
  if (doc["num_gpu_blocks"].get_uint64().get(blocks) != simdjson::SUCCESS &&
      doc["max_total_num_tokens"].get_uint64().get(tokens) == simdjson::SUCCESS && bs > 0) {
    blocks = tokens / bs;
  }
  out.kv_blocks = blocks;
  // A data-parallel size (or rank) past this is taken for garbage: each rank is a candidate in
  // every routing decision.
  constexpr uint64_t kMostRanks = 1024;
  uint64_t dp = 1;
  if (doc["dp_size"].get_uint64().get(dp) == simdjson::SUCCESS && dp >= 1 && dp <= kMostRanks) {
    out.dp_size = static_cast<uint32_t>(dp);
  }
  simdjson::dom::array eps;
  if (doc["kv_events_endpoints"].get_array().get(eps) == simdjson::SUCCESS) {
    for (auto ep : eps) {
      workers::KvEndpoint k;
      uint64_t rank = 0;
      std::string_view s;
      if (ep["dp_rank"].get_uint64().get(rank) == simdjson::SUCCESS) {
        if (rank >= kMostRanks) continue;
        k.rank = static_cast<DpRank>(rank);
      }
      if (ep["endpoint"].get_string().get(s) != simdjson::SUCCESS) continue;
      k.publisher = reachable(std::string(s), host);
      if (ep["replay_endpoint"].get_string().get(s) == simdjson::SUCCESS)
        k.replay = reachable(std::string(s), host);
      if (ep["topic"].get_string().get(s) == simdjson::SUCCESS) k.topic = std::string(s);
      out.endpoints.push_back(std::move(k));
    }
    return out;
  }
  // SGLang: kv_events_config is a JSON string; rank r adds r to both ports.
  std::string_view config;
  if (doc["kv_events_config"].get_string().get(config) != simdjson::SUCCESS) return out;
  simdjson::dom::parser inner;
  simdjson::dom::element cfg;
  if (inner.parse(std::string(config)).get(cfg) != simdjson::SUCCESS) return out;
  std::string_view endpoint, replay, topic;
  if (cfg["endpoint"].get_string().get(endpoint) != simdjson::SUCCESS) return out;
  if (cfg["replay_endpoint"].get_string().get(replay) != simdjson::SUCCESS) replay = {};
  if (cfg["topic"].get_string().get(topic) != simdjson::SUCCESS) topic = {};
  for (uint32_t r = 0; r < out.dp_size; ++r) {
    workers::KvEndpoint k;
    k.rank = r;
    k.publisher = offset_port(reachable(std::string(endpoint), host), r);
    if (!replay.empty()) k.replay = offset_port(reachable(std::string(replay), host), r);
    k.topic = std::string(topic);
    out.endpoints.push_back(std::move(k));
  }
  return out;
}

namespace {

workers::EngineLoad load_of(simdjson::dom::element o) {
  workers::EngineLoad l;
  uint64_t u = 0;
  double d = 0;
  if (o["running"].get_uint64().get(u) == simdjson::SUCCESS) l.running = static_cast<uint32_t>(u);
  if (o["waiting"].get_uint64().get(u) == simdjson::SUCCESS) l.waiting = static_cast<uint32_t>(u);
  if (o["kv_usage"].get_double().get(d) == simdjson::SUCCESS) l.kv_usage = d;
  if (o["queued_prefill_tokens"].get_uint64().get(u) == simdjson::SUCCESS)
    l.queued_prefill_tokens = u;
  return l;
}

// The value of label `name` in a Prometheus series' label block, or "".
std::string_view label(std::string_view labels, std::string_view name) {
  const std::string key = std::string(name) + "=\"";
  size_t at = labels.find(key);
  while (at != std::string_view::npos && at > 0 && labels[at - 1] != '{' && labels[at - 1] != ',')
    at = labels.find(key, at + 1);
  if (at == std::string_view::npos) return {};
  const size_t start = at + key.size();
  const size_t end = labels.find('"', start);
  return end == std::string_view::npos ? std::string_view() : labels.substr(start, end - start);
}

}  // namespace

LoadReport parse_load_report(std::string_view body) {
  LoadReport out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) return out;
  if (doc.type() != simdjson::dom::element_type::OBJECT) return out;
  out.found = true;
  out.total = load_of(doc);
  simdjson::dom::array ranks;
  if (doc["ranks"].get_array().get(ranks) == simdjson::SUCCESS) {
    for (auto r : ranks) {
      uint64_t rank = 0;
      if (r["dp_rank"].get_uint64().get(rank) != simdjson::SUCCESS || rank > 0xFFFF) continue;
      out.ranks.emplace_back(static_cast<DpRank>(rank), load_of(r));
    }
  }
  return out;
}

LoadReport parse_vllm_metrics(std::string_view text) {
  LoadReport out;
  std::map<DpRank, workers::EngineLoad> ranks;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    // name{labels} value [timestamp]
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, name_end);
    std::string_view labels;
    size_t value_at = name_end;
    if (line[name_end] == '{') {
      const size_t close = line.find('}', name_end);
      if (close == std::string_view::npos) continue;
      labels = line.substr(name_end, close - name_end + 1);
      value_at = close + 1;
    }
    while (value_at < line.size() && line[value_at] == ' ') ++value_at;
    const size_t value_end = line.find(' ', value_at);
    double v = 0;
    try {
      v = std::stod(std::string(line.substr(value_at, value_end - value_at)));
    } catch (...) {
      continue;
    }
    // These gauges are counts and a fraction: a value that is none (NaN, infinite, negative) is
    // the engine's mistake and says nothing.
    if (!std::isfinite(v) || v < 0) continue;
    const bool running = name == "vllm:num_requests_running";
    const bool waiting = name == "vllm:num_requests_waiting";
    const bool usage = name == "vllm:kv_cache_usage_perc" || name == "vllm:gpu_cache_usage_perc";
    if (!running && !waiting && !usage) continue;
    out.found = true;
    workers::EngineLoad* per_rank = nullptr;
    const std::string_view engine = label(labels, "engine");
    uint32_t rank = 0;
    if (!engine.empty() &&
        std::from_chars(engine.data(), engine.data() + engine.size(), rank).ec == std::errc()) {
      per_rank = &ranks[static_cast<DpRank>(rank)];
    }
    // (Counts saturate at the type's top rather than wrap: a huge one still reads as busy.)
    const auto add = [v](uint32_t& sum) {
      const double total = static_cast<double>(sum) + v;
      sum = total >= static_cast<double>(UINT32_MAX) ? UINT32_MAX : static_cast<uint32_t>(total);
    };
    for (workers::EngineLoad* l : {&out.total, per_rank}) {
      if (l == nullptr) continue;
      if (running) add(l->running);
      if (waiting) add(l->waiting);
      if (usage) l->kv_usage = std::max(l->kv_usage, v);
    }
  }
  if (ranks.size() > 1) out.ranks.assign(ranks.begin(), ranks.end());
  return out;
}

}  // namespace kvgate::app
