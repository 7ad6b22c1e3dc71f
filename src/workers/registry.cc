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

const Worker* FleetSnapshot::find(std::string_view url) const {
  for (const auto& w : workers) {
    if (w->url() == url) return w.get();
  }
  return nullptr;
}

WorkerRegistry::WorkerRegistry(WorkerOptions options, const Clock& clock)
    : options_(options), clock_(clock), snapshot_(std::make_shared<const FleetSnapshot>()) {}

Result<std::string> WorkerRegistry::normalize_url(std::string_view url) {
  std::string s(url);
  while (!s.empty() && s.back() == '/') s.pop_back();
  const std::string_view scheme = "http://";
  std::string lower = s;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower.rfind(scheme, 0) != 0) {
    return absl::InvalidArgumentError("worker URL must start with http:// : '" + std::string(url) +
                                      "'");
  }
  const std::string_view rest = std::string_view(lower).substr(scheme.size());
  const auto colon = rest.rfind(':');
  if (rest.empty() || rest.find('/') != std::string_view::npos || colon == std::string_view::npos ||
      colon == 0) {
    return absl::InvalidArgumentError("worker URL must be http://host:port : '" + std::string(url) +
                                      "'");
  }
  int port = 0;
  const auto port_s = rest.substr(colon + 1);
  const auto r = std::from_chars(port_s.data(), port_s.data() + port_s.size(), port);
  if (r.ec != std::errc() || r.ptr != port_s.data() + port_s.size() || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError("worker URL has a bad port: '" + std::string(url) + "'");
  }
  return lower;
}

Result<std::shared_ptr<Worker>> WorkerRegistry::add(std::string_view url, WorkerInfo info) {
  auto normalized = normalize_url(url);
  if (!normalized.ok()) return normalized.status();
  MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (w->url() == *normalized)
      return absl::AlreadyExistsError("worker already registered: " + *normalized);
  }
  auto worker = std::make_shared<Worker>(WorkerId(next_id_++), *normalized, options_, clock_);
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
    for (HolderId h : info->holders) {
      if (!h.valid()) continue;
      if (snap->worker_of_holder.size() <= h.value())
        snap->worker_of_holder.resize(h.value() + 1, -1);
      snap->worker_of_holder[h.value()] = static_cast<int32_t>(i);
    }
    snap->models.insert(snap->models.end(), info->models.begin(), info->models.end());
    snap->lora_adapters.insert(snap->lora_adapters.end(), info->lora_adapters.begin(),
                               info->lora_adapters.end());
    if (info->block_size > 0) ++block_sizes[info->block_size];
  }
  for (const auto& [size, n] : block_sizes) {
    if (snap->block_size == 0 || n > block_sizes[snap->block_size]) snap->block_size = size;
  }
  std::sort(snap->lora_adapters.begin(), snap->lora_adapters.end());
  snap->lora_adapters.erase(std::unique(snap->lora_adapters.begin(), snap->lora_adapters.end()),
                            snap->lora_adapters.end());
  std::sort(snap->models.begin(), snap->models.end());
  snap->models.erase(std::unique(snap->models.begin(), snap->models.end()), snap->models.end());
  snapshot_.store(std::move(snap));
}

}  // namespace kvgate::workers
