#include "kvgate/workers/registry.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

namespace kvgate::workers {

bool FleetSnapshot::knows_model(std::string_view model) const {
  if (models.empty()) return true;
  return std::binary_search(models.begin(), models.end(), model);
}

const std::vector<uint64_t>* FleetSnapshot::servers_of(std::string_view model) const {
  if (model.empty()) return nullptr;
  const auto it = std::lower_bound(models.begin(), models.end(), model);
  if (it == models.end() || *it != model) return &servers_of_any_model;
  return &servers_of_model[static_cast<size_t>(it - models.begin())];
}

const Worker* FleetSnapshot::find(std::string_view url) const {
  for (const auto& w : workers) {
    if (w->url() == url) return w.get();
  }
  return nullptr;
}

WorkerRegistry::WorkerRegistry(WorkerOptions options, const Clock& clock)
    : options_(options), clock_(clock), snapshot_(std::make_shared<const FleetSnapshot>()) {}

namespace {

std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out.push_back(kAlphabet[(v >> k) & 63]);
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

}  // namespace

std::string redact_url(std::string_view url) {
  const size_t scheme = url.find("://");
  const size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  const size_t at = url.find('@', start);
  const size_t slash = url.find('/', start);
  if (at == std::string_view::npos || (slash != std::string_view::npos && slash < at)) {
    return std::string(url);
  }
  return std::string(url.substr(0, start)) + "***" + std::string(url.substr(at));
}

Result<WorkerAddress> parse_worker_url(std::string_view url) {
  std::string s(url);
  while (!s.empty() && s.back() == '/') s.pop_back();
  const auto starts_with = [&s](std::string_view scheme) {
    return s.size() >= scheme.size() &&
           std::equal(scheme.begin(), scheme.end(), s.begin(), [](char a, char b) {
             return a == std::tolower(static_cast<unsigned char>(b));
           });
  };
  WorkerAddress out;
  out.tls = starts_with("https://");
  if (!out.tls && !starts_with("http://")) {
    return absl::InvalidArgumentError("worker URL must start with http:// or https:// : '" +
                                      redact_url(url) + "'");
  }
  const std::string_view scheme = out.tls ? "https://" : "http://";
  std::string_view rest = std::string_view(s).substr(scheme.size());
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    if (userinfo.find('/') == std::string_view::npos) {
      out.authorization = "Basic " + base64(userinfo);
      rest.remove_prefix(at + 1);
    }
  }
  const auto colon = rest.rfind(':');
  if (rest.empty() || rest.find('/') != std::string_view::npos || colon == std::string_view::npos ||
      colon == 0) {
    return absl::InvalidArgumentError("worker URL must be " + std::string(scheme) +
                                      "host:port : '" + redact_url(url) + "'");
  }
  int port = 0;
  const auto port_s = rest.substr(colon + 1);
  const auto r = std::from_chars(port_s.data(), port_s.data() + port_s.size(), port);
  if (r.ec != std::errc() || r.ptr != port_s.data() + port_s.size() || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError("worker URL has a bad port: '" + redact_url(url) + "'");
  }
  out.host = std::string(rest.substr(0, colon));
  std::transform(out.host.begin(), out.host.end(), out.host.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  out.port = static_cast<uint16_t>(port);
  out.url = std::string(scheme) + out.host + ":" + std::to_string(port);
  return out;
}

Result<std::string> WorkerRegistry::normalize_url(std::string_view url) {
  auto a = parse_worker_url(url);
  if (!a.ok()) return a.status();
  return std::move(a->url);
}

Result<std::shared_ptr<Worker>> WorkerRegistry::add(std::string_view url, WorkerInfo info,
                                                    std::string authorization) {
  auto address = parse_worker_url(url);
  if (!address.ok()) return address.status();
  MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (w->url() == address->url)
      return absl::AlreadyExistsError("worker already registered: " + address->url);
  }
  if (authorization.empty()) authorization = std::move(address->authorization);
  auto worker = std::make_shared<Worker>(WorkerId(next_id_++), address->url, options_, clock_,
                                         std::move(authorization));
  worker->set_info(std::make_shared<const WorkerInfo>(std::move(info)));
  workers_.push_back(worker);
  publish_locked();
  return worker;
}

std::shared_ptr<Worker> WorkerRegistry::remove(std::string_view url) {
  auto normalized = normalize_url(url);
  if (!normalized.ok()) return nullptr;
  MutexLock lock(&mu_);
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [&](const auto& w) { return w->url() == *normalized; });
  if (it == workers_.end()) return nullptr;
  auto worker = *it;
  workers_.erase(it);
  publish_locked();
  return worker;
}

bool WorkerRegistry::update_info(WorkerId id, const std::function<void(WorkerInfo&)>& edit) {
  MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (w->id() != id) continue;
    WorkerInfo copy = *w->info();
    edit(copy);
    w->set_info(std::make_shared<const WorkerInfo>(std::move(copy)));
    publish_locked();
    return true;
  }
  return false;
}

std::shared_ptr<Worker> WorkerRegistry::find(std::string_view url) const {
  auto normalized = normalize_url(url);
  if (!normalized.ok()) return nullptr;
  MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (w->url() == *normalized) return w;
  }
  return nullptr;
}

std::shared_ptr<Worker> WorkerRegistry::find(WorkerId id) const {
  MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (w->id() == id) return w;
  }
  return nullptr;
}

void WorkerRegistry::publish_locked() {
  auto snap = std::make_shared<FleetSnapshot>();
  snap->version = ++version_;
  snap->workers = workers_;
  std::map<uint32_t, size_t> block_sizes;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const auto info = workers_[i]->info();
    snap->infos.push_back(info);
    for (size_t k = 0; k < info->holders.size(); ++k) {
      const HolderId h = info->holders[k];
      if (!h.valid()) continue;
      if (snap->worker_of_holder.size() <= h.value()) {
        snap->worker_of_holder.resize(h.value() + 1, -1);
        snap->rank_of_holder.resize(h.value() + 1, 0);
      }
      snap->worker_of_holder[h.value()] = static_cast<int32_t>(i);
      snap->rank_of_holder[h.value()] =
          k < info->holder_ranks.size() ? info->holder_ranks[k] : static_cast<DpRank>(k);
    }
    snap->models.insert(snap->models.end(), info->models.begin(), info->models.end());
    snap->lora_adapters.insert(snap->lora_adapters.end(), info->lora_adapters.begin(),
                               info->lora_adapters.end());
    if (info->block_size > 0) ++block_sizes[info->block_size];
    snap->max_model_len = std::max(snap->max_model_len, info->max_model_len);
  }
  for (const auto& [size, n] : block_sizes) {
    if (snap->block_size == 0 || n > block_sizes[snap->block_size]) snap->block_size = size;
  }
  std::sort(snap->lora_adapters.begin(), snap->lora_adapters.end());
  snap->lora_adapters.erase(std::unique(snap->lora_adapters.begin(), snap->lora_adapters.end()),
                            snap->lora_adapters.end());
  std::sort(snap->models.begin(), snap->models.end());
  snap->models.erase(std::unique(snap->models.begin(), snap->models.end()), snap->models.end());
  const size_t words = (workers_.size() + 63) / 64;
  snap->servers_of_any_model.assign(words, 0);
  snap->servers_of_model.assign(snap->models.size(), std::vector<uint64_t>(words, 0));
  snap->routes.resize(workers_.size());
  for (auto& bits : snap->workers_of_role) bits.assign(words, 0);
  for (size_t i = 0; i < workers_.size(); ++i) {
    const WorkerInfo& info = *snap->infos[i];
    snap->workers_of_role[static_cast<size_t>(info.role)][i >> 6] |= uint64_t{1} << (i & 63);
    snap->has_roles |= info.role != WorkerRole::kRegular;
    snap->max_candidates += std::max<uint32_t>(info.dp_size, 1);
    if (info.holders.empty()) ++snap->workers_without_events;
    snap->routes[i] = {.dp_size = info.dp_size,
                       .has_events = !info.holders.empty(),
                       .only_holder = info.holders.size() == 1 ? info.holders[0] : HolderId(),
                       .kv_tokens = info.kv_blocks * info.block_size};
    const uint64_t bit = uint64_t{1} << (i & 63);
    if (info.models.empty()) {
      snap->servers_of_any_model[i >> 6] |= bit;
      for (auto& bits : snap->servers_of_model) bits[i >> 6] |= bit;
      continue;
    }
    for (const std::string& m : info.models) {
      const auto it = std::lower_bound(snap->models.begin(), snap->models.end(), m);
      snap->servers_of_model[static_cast<size_t>(it - snap->models.begin())][i >> 6] |= bit;
    }
  }
  snapshot_.store(std::move(snap));
}

}  // namespace kvgate::workers
