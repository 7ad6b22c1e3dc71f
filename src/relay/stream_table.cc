#include "kvgate/relay/stream_table.h"

namespace kvgate::relay {

Result<std::vector<RankStream*>> StreamTable::add(const WorkerSpec& spec) {
  MutexLock lock(&mu_);
  if (workers_.contains(spec.name)) {
    return absl::AlreadyExistsError("relay: worker " + spec.name + " is already served");
  }
  Worker& w = workers_[spec.name];
  w.spec = spec;
  std::vector<RankStream*> out;
  for (uint32_t r = 0; r < std::max<uint32_t>(1, spec.ranks); ++r) {
    w.ranks.push_back(std::make_unique<RankStream>(limits_, hash_seed_));
    out.push_back(w.ranks.back().get());
  }
  return out;
}

RankStream* StreamTable::find(std::string_view worker, uint32_t rank) const {
  MutexLock lock(&mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end() || rank >= it->second.ranks.size()) return nullptr;
  return it->second.ranks[rank].get();
}

bool StreamTable::has_worker(std::string_view worker) const {
  MutexLock lock(&mu_);
  return workers_.contains(worker);
}

void StreamTable::set_state(std::string_view worker, std::string state) {
  MutexLock lock(&mu_);
  if (auto it = workers_.find(worker); it != workers_.end()) it->second.state = std::move(state);
}

void StreamTable::list(v1::ListWorkersResponse* out) const {
  MutexLock lock(&mu_);
  for (const auto& [name, w] : workers_) {
    v1::WorkerInfo* info = out->add_workers();
    info->set_name(name);
    info->set_engine_url(w.spec.engine_url);
    info->set_kv_endpoint(w.spec.kv_endpoint);
    info->set_block_size(w.spec.block_size);
    info->set_state(w.state);
    for (size_t r = 0; r < w.ranks.size(); ++r) {
      v1::RankInfo* ri = info->add_ranks();
      w.ranks[r]->describe(ri);
      ri->set_rank(static_cast<uint32_t>(r));
    }
  }
}

}  // namespace kvgate::relay
