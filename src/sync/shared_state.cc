#include "kvgate/sync/shared_state.h"

#include <simdjson.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "kvgate/core/json_writer.h"

namespace kvgate::sync {
namespace {

constexpr std::string_view kWorker = "worker";
constexpr std::string_view kTomb = "tomb";
constexpr std::string_view kLoad = "load";
constexpr std::string_view kHints = "hints";
constexpr std::string_view kPred = "pred";
constexpr std::string_view kLimits = "limits";

std::string_view kind_name(EntryKind k) {
  switch (k) {
    case EntryKind::kWorker:
      return kWorker;
    case EntryKind::kTombstone:
      return kTomb;
    case EntryKind::kLoad:
      return kLoad;
    case EntryKind::kHints:
      return kHints;
    case EntryKind::kPredictions:
      return kPred;
    case EntryKind::kLimits:
      return kLimits;
  }
  return "?";
}

using simdjson::dom::element;

bool get(element e, std::string_view field, std::string& out) {
  std::string_view v;
  if (e[field].get_string().get(v) != simdjson::SUCCESS) return false;
  out = std::string(v);
  return true;
}
template <class Int>
bool get(element e, std::string_view field, Int& out) {
  int64_t v = 0;
  if (e[field].get_int64().get(v) != simdjson::SUCCESS) return false;
  out = static_cast<Int>(v);
  return true;
}
bool get(element e, std::string_view field, bool& out) {
  return e[field].get_bool().get(out) == simdjson::SUCCESS;
}

bool decode_endpoints(element e, std::vector<workers::KvEndpoint>& out) {
  simdjson::dom::array list;
  if (e["kv_endpoints"].get_array().get(list) != simdjson::SUCCESS) return false;
  for (element item : list) {
    workers::KvEndpoint ep;
    if (!get(item, "rank", ep.rank) || !get(item, "publisher", ep.publisher) ||
        !get(item, "replay", ep.replay) || !get(item, "topic", ep.topic)) {
      return false;
    }
    out.push_back(std::move(ep));
  }
  return true;
}

// A record's role and bootstrap port; both optional (records of replicas before roles have
// neither), a role that is not a known one is the wrong shape.
bool decode_role(element doc, WorkerRecord& r) {
  std::string role;
  if (get(doc, "role", role)) {
    const std::optional<workers::WorkerRole> known = workers::parse_worker_role(role);
    if (!known) return false;
    r.role = *known;
  }
  int64_t port = 0;
  if (get(doc, "bootstrap_port", port)) {
    if (port < 0 || port > 65535) return false;
    r.bootstrap_port = static_cast<uint16_t>(port);
  }
  return true;
}

std::optional<BadValue> decode_limits(std::string_view id, element doc, SharedState& state) {
  ReplicaLimits l;
  simdjson::dom::array list;
  if (!get(doc, "replica", l.replica) || l.replica != id || !get(doc, "at_ms", l.at_ms) ||
      doc["keys"].get_array().get(list) != simdjson::SUCCESS) {
    return BadValue::kWrongShape;
  }
  for (element item : list) {
    LimitDemand d;
    if (!get(item, "id", d.id) ||
        item["requests"].get_double().get(d.requests) != simdjson::SUCCESS ||
        item["tokens"].get_double().get(d.tokens) != simdjson::SUCCESS || !(d.requests >= 0) ||
        !(d.tokens >= 0)) {
      return BadValue::kWrongShape;
    }
    l.keys.push_back(std::move(d));
  }
  state.limits.push_back(std::move(l));
  return std::nullopt;
}

std::optional<BadValue> decode_value(std::string_view kind, std::string_view id, element doc,
                                     SharedState& state) {
  int64_t version = 0;
  if (!get(doc, "v", version) || version != 1) return BadValue::kWrongShape;
  if (kind == kLimits) return decode_limits(id, doc, state);
  if (kind == kWorker) {
    WorkerRecord r;
    if (!get(doc, "url", r.url) || r.url != id || !get(doc, "added_by", r.added_by) ||
        !get(doc, "added_at_ms", r.added_at_ms) || !decode_endpoints(doc, r.kv_endpoints) ||
        !decode_role(doc, r)) {
      return BadValue::kWrongShape;
    }
    state.workers.push_back(std::move(r));
    return std::nullopt;
  }
  if (kind == kTomb) {
    Tombstone t;
    if (!get(doc, "url", t.url) || t.url != id || !get(doc, "removed_by", t.removed_by) ||
        !get(doc, "removed_at_ms", t.removed_at_ms)) {
      return BadValue::kWrongShape;
    }
    state.tombstones.push_back(std::move(t));
    return std::nullopt;
  }
  if (kind == kLoad) {
    ReplicaLoad l;
    simdjson::dom::array list;
    if (!get(doc, "replica", l.replica) || l.replica != id || !get(doc, "at_ms", l.at_ms) ||
        doc["workers"].get_array().get(list) != simdjson::SUCCESS) {
      return BadValue::kWrongShape;
    }
    for (element item : list) {
      WorkerInflight w;
      simdjson::dom::array ranks;
      if (!get(item, "url", w.url) || !get(item, "in_flight", w.in_flight) ||
          !get(item, "queued_prompt_tokens", w.queued_prompt_tokens) ||
          !get(item, "progress_ms", w.progress_ms) ||
          item["ranks"].get_array().get(ranks) != simdjson::SUCCESS || w.in_flight < 0) {
        return BadValue::kWrongShape;
      }
      for (element pair : ranks) {
        simdjson::dom::array two;
        int64_t rank = 0, n = 0;
        if (pair.get_array().get(two) != simdjson::SUCCESS || two.size() != 2 ||
            two.at(0).get_int64().get(rank) != simdjson::SUCCESS ||
            two.at(1).get_int64().get(n) != simdjson::SUCCESS || rank < 0 || n < 0) {
          return BadValue::kWrongShape;
        }
        w.ranks.emplace_back(static_cast<DpRank>(rank), static_cast<int32_t>(n));
      }
      l.workers.push_back(std::move(w));
    }
    state.loads.push_back(std::move(l));
    return std::nullopt;
  }
  if (kind == kPred) {
    PredictionJournal j;
    simdjson::dom::array list;
    if (!get(doc, "replica", j.replica) || !get(doc, "epoch_ms", j.epoch_ms) ||
        !get(doc, "seq", j.seq) || j.id() != id ||
        doc["workers"].get_array().get(list) != simdjson::SUCCESS) {
      return BadValue::kWrongShape;
    }
    for (element item : list) {
      std::pair<std::string, std::vector<SeqHash>> w;
      simdjson::dom::array blocks;
      if (!get(item, "url", w.first) || item["blocks"].get_array().get(blocks) != simdjson::SUCCESS)
        return BadValue::kWrongShape;
      w.second.reserve(blocks.size());
      for (element b : blocks) {
        uint64_t h = 0;
        if (b.get_uint64().get(h) != simdjson::SUCCESS) return BadValue::kWrongShape;
        w.second.push_back(h);
      }
      j.workers.push_back(std::move(w));
    }
    state.predictions.push_back(std::move(j));
    return std::nullopt;
  }
  ReplicaHints h;
  simdjson::dom::array list;
  if (!get(doc, "replica", h.replica) || h.replica != id || !get(doc, "at_ms", h.at_ms) ||
      doc["workers"].get_array().get(list) != simdjson::SUCCESS) {
    return BadValue::kWrongShape;
  }
  for (element item : list) {
    HealthHint hint;
    if (!get(item, "url", hint.url) || !get(item, "unhealthy", hint.unhealthy) ||
        !get(item, "breaker_open", hint.breaker_open)) {
      return BadValue::kWrongShape;
    }
    h.workers.push_back(std::move(hint));
  }
  state.hints.push_back(std::move(h));
  return std::nullopt;
}

}  // namespace

std::vector<const WorkerRecord*> live_workers(const SharedState& state) {
  // The newest tombstone per URL.
  absl::flat_hash_map<std::string_view, const Tombstone*> newest;
  for (const Tombstone& t : state.tombstones) {
    auto [it, fresh] = newest.emplace(t.url, &t);
    if (!fresh && t.removed_at_ms > it->second->removed_at_ms) it->second = &t;
  }
  std::vector<const WorkerRecord*> out;
  for (const WorkerRecord& r : state.workers) {
    auto it = newest.find(r.url);
    if (it == newest.end() || !removes(*it->second, r)) out.push_back(&r);
  }
  return out;
}

std::string key_prefix(std::string_view ns) { return "kvgate:{" + std::string(ns) + "}:"; }

std::string entry_key(std::string_view ns, EntryKind kind, std::string_view id) {
  std::string key = key_prefix(ns);
  key += kind_name(kind);
  key += ':';
  key += id;
  return key;
}

std::string encode(const WorkerRecord& r) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("v", 1).member("url", r.url).member("added_by", r.added_by);
  w.member("added_at_ms", r.added_at_ms).key("kv_endpoints").begin_array();
  for (const auto& ep : r.kv_endpoints) {
    w.begin_object().member("rank", ep.rank).member("publisher", ep.publisher);
    w.member("replay", ep.replay).member("topic", ep.topic).end_object();
  }
  w.end_array();
  if (r.role != workers::WorkerRole::kRegular) w.member("role", workers::worker_role_name(r.role));
  if (r.bootstrap_port != 0) w.member("bootstrap_port", r.bootstrap_port);
  w.end_object();
  return out;
}

std::string encode(const Tombstone& t) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("v", 1).member("url", t.url).member("removed_by", t.removed_by);
  w.member("removed_at_ms", t.removed_at_ms).end_object();
  return out;
}

std::string encode(const ReplicaLoad& l) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("v", 1).member("replica", l.replica).member("at_ms", l.at_ms);
  w.key("workers").begin_array();
  for (const auto& wl : l.workers) {
    w.begin_object().member("url", wl.url).member("in_flight", wl.in_flight);
    w.member("queued_prompt_tokens", wl.queued_prompt_tokens);
    w.member("progress_ms", wl.progress_ms).key("ranks").begin_array();
    for (const auto& [rank, n] : wl.ranks) w.begin_array().value(rank).value(n).end_array();
    w.end_array().end_object();
  }
  w.end_array().end_object();
  return out;
}

std::string encode(const ReplicaHints& h) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("v", 1).member("replica", h.replica).member("at_ms", h.at_ms);
  w.key("workers").begin_array();
  for (const auto& hint : h.workers) {
    w.begin_object().member("url", hint.url).member("unhealthy", hint.unhealthy);
    w.member("breaker_open", hint.breaker_open).end_object();
  }
  w.end_array().end_object();
  return out;
}

std::string PredictionJournal::id() const {
  return replica + "/" + std::to_string(epoch_ms) + "/" + std::to_string(seq);
}

std::string encode(const PredictionJournal& j) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("v", 1).member("replica", j.replica).member("epoch_ms", j.epoch_ms);
  w.member("seq", j.seq).key("workers").begin_array();
  for (const auto& [url, blocks] : j.workers) {
    w.begin_object().member("url", url).key("blocks").begin_array();
    for (SeqHash h : blocks) w.value(static_cast<uint64_t>(h));
    w.end_array().end_object();
  }
  w.end_array().end_object();
  return out;
}

std::string encode(const ReplicaLimits& l) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("v", 1).member("replica", l.replica).member("at_ms", l.at_ms);
  w.key("keys").begin_array();
  for (const LimitDemand& d : l.keys) {
    w.begin_object().member("id", d.id).member("requests", d.requests);
    w.member("tokens", d.tokens).end_object();
  }
  w.end_array().end_object();
  return out;
}

const char* bad_value_name(BadValue b) {
  switch (b) {
    case BadValue::kTooLarge:
      return "too_large";
    case BadValue::kUnknownKey:
      return "unknown_key";
    case BadValue::kNotJson:
      return "not_json";
    case BadValue::kWrongShape:
      return "wrong_shape";
    case BadValue::kCount:
      break;
  }
  return "?";
}

std::optional<BadValue> decode_entry(std::string_view ns, std::string_view key,
                                     std::string_view value, size_t max_value_bytes,
                                     SharedState& state) {
  const std::string prefix = key_prefix(ns);
  if (key.rfind(prefix, 0) != 0) return BadValue::kUnknownKey;
  const std::string_view rest = key.substr(prefix.size());
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return BadValue::kUnknownKey;
  const std::string_view kind = rest.substr(0, colon);
  const std::string_view id = rest.substr(colon + 1);
  if ((kind != kWorker && kind != kTomb && kind != kLoad && kind != kHints && kind != kPred &&
       kind != kLimits) ||
      id.empty())
    return BadValue::kUnknownKey;
  if (value.size() > max_value_bytes) return BadValue::kTooLarge;
  // One parser per thread: pulls run on the state-sync thread, tests on theirs.
  thread_local simdjson::dom::parser parser;
  element doc;
  if (parser.parse(value.data(), value.size()).get(doc) != simdjson::SUCCESS)
    return BadValue::kNotJson;
  if (!doc.is_object()) return BadValue::kWrongShape;
  return decode_value(kind, id, doc, state);
}

}  // namespace kvgate::sync
