#include "harness/exactness.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/corpus_generator.h"
#include "index/reference_indexer.h"

namespace kvgate::index::harness {
namespace {

std::string to_string(const ApplyResult& r) {
  std::ostringstream o;
  o << "{stored " << r.stored_blocks << ", removed " << r.removed_blocks << ", orphan events "
    << r.orphan_events << ", orphan blocks " << r.orphan_blocks << ", unknown removals "
    << r.unknown_removals << ", moved " << r.moved_blocks << ", malformed " << r.malformed_events
    << ", clears " << r.clears << "}";
  return o.str();
}

std::string to_string(const std::vector<HolderMatch>& v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size() && i < 16; ++i) {
    o << (i ? ", " : "") << "h" << v[i].holder.value() << ":" << v[i].device_depth << "/"
      << v[i].any_depth;
  }
  if (v.size() > 16) o << ", ... " << v.size() << " holders";
  return o.str() + "]";
}

std::string to_string(const Membership& m) {
  std::ostringstream o;
  o << "(h" << m.holder.value() << ", seq " << std::hex << m.seq << std::dec << ", tiers 0x"
    << std::hex << int{m.tier_mask} << ")";
  return o.str();
}

// The first difference between two membership lists, or "" when equal.
std::string diff(const std::vector<Membership>& got, const std::vector<Membership>& want) {
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i) {
    if (!(got[i] == want[i])) {
      return "at " + std::to_string(i) + " the index has " + to_string(got[i]) +
             ", the reference " + to_string(want[i]);
    }
  }
  if (got.size() == want.size()) return "";
  return "the index has " + std::to_string(got.size()) + " memberships, the reference " +
         std::to_string(want.size()) + "; first extra " +
         to_string(got.size() > n ? got[n] : want[n]);
}

// The state of one run: the two indexers and the scratch buffers every comparison reuses.
class Run {
 public:
  Run(std::unique_ptr<Indexer> index, const HarnessOptions& o)
      : o_(o),
        index_(std::move(index)),
        ref_(o.index_options),
        gen_({.seed = o.seed,
              .holders = o.holders,
              .holder_capacity = o.holder_capacity,
              .hash_seed = o.index_options.hash_seed}) {}

  Result<HarnessReport> sequential();
  Result<HarnessReport> concurrent();

 private:
  Status fail(const Step& step, const std::string& what) const {
    std::ostringstream o;
    o << index_->name() << " disagrees with the reference: seed " << o_.seed << ", step " << steps_
      << " (holder " << step.holder.value() << ": " << step.describe() << "): " << what;
    return absl::InternalError(o.str());
  }
  Status check_result(const Step& step, const ApplyResult& got, const ApplyResult& want) const {
    if (got == want) return absl::OkStatus();
    return fail(step, "apply returned " + to_string(got) + ", the reference " + to_string(want));
  }
  Status check_stats(const Step& step) {
    const IndexStats got = index_->stats();
    const IndexStats want = ref_.stats();
    report_.peak_memberships = std::max(report_.peak_memberships, want.memberships);
    if (got.holders == want.holders && got.resident_blocks == want.resident_blocks &&
        got.memberships == want.memberships) {
      return absl::OkStatus();
    }
    std::ostringstream o;
    o << "stats (holders, resident blocks, memberships) are (" << got.holders << ", "
      << got.resident_blocks << ", " << got.memberships << "), the reference's (" << want.holders
      << ", " << want.resident_blocks << ", " << want.memberships << ")";
    return fail(step, o.str());
  }
  Status check_holder(const Step& step) {
    ++report_.content_checks;
    if (Status s = index_->holder_memberships(step.holder, got_m_); !s.ok()) return s;
    if (Status s = ref_.holder_memberships(step.holder, want_m_); !s.ok()) return s;
    const std::string d = diff(got_m_, want_m_);
    return d.empty() ? absl::OkStatus() : fail(step, "holder content: " + d);
  }
  Status check_all(const Step& step) {
    ++report_.full_checks;
    if (Status s = index_->memberships(got_m_); !s.ok()) return s;
    if (Status s = ref_.memberships(want_m_); !s.ok()) return s;
    const std::string d = diff(got_m_, want_m_);
    return d.empty() ? absl::OkStatus() : fail(step, "content: " + d);
  }
  Status check_lookups(const Step& step) {
    for (size_t i = 0; i < step.lookups.size(); ++i) {
      const auto& chain = step.lookups[i];
      index_->lookup(chain, got_l_);
      ref_.lookup(chain, want_l_);
      ++report_.lookups;
      report_.lookup_blocks += chain.size();
      for (const HolderMatch& m : want_l_) report_.matched_blocks += m.any_depth;
      if (got_l_ != want_l_) {
        return fail(step, "lookup " + std::to_string(i) + " of " + std::to_string(chain.size()) +
                              " blocks answered " + to_string(got_l_) + ", the reference " +
                              to_string(want_l_));
      }
    }
    return absl::OkStatus();
  }
  void count(const Step& step, const ApplyResult& want) {
    ++steps_;
    report_.events += step.events.size();
    if (step.kind == Step::Kind::kRemoveHolder) {
      ++report_.holder_removals;
    } else {
      ++report_.batches;
      report_.totals += want;
    }
  }

  const HarnessOptions& o_;
  std::unique_ptr<Indexer> index_;
  ReferenceIndexer ref_;
  CorpusGenerator gen_;
  HarnessReport report_;
  uint64_t steps_ = 0;
  std::vector<Membership> got_m_, want_m_;
  std::vector<HolderMatch> got_l_, want_l_;
};

Result<HarnessReport> Run::sequential() {
  Step step;
  while (report_.events < o_.events) {
    gen_.next(step);
    ApplyResult want;
    if (step.kind == Step::Kind::kRemoveHolder) {
      index_->remove_holder(step.holder);
      ref_.remove_holder(step.holder);
    } else {
      const ApplyResult got = index_->apply(step.holder, step.events);
      want = ref_.apply(step.holder, step.events);
      if (Status s = check_result(step, got, want); !s.ok()) return s;
    }
    count(step, want);
    if (Status s = check_stats(step); !s.ok()) return s;
    if (Status s = check_holder(step); !s.ok()) return s;
    if (Status s = check_lookups(step); !s.ok()) return s;
    if (o_.full_compare_every > 0 && steps_ % o_.full_compare_every == 0) {
      if (Status s = check_all(step); !s.ok()) return s;
    }
  }
  if (Status s = check_all(step); !s.ok()) return s;
  return report_;
}

Result<HarnessReport> Run::concurrent() {
  const uint32_t lanes = std::max<uint32_t>(1, o_.lanes);
  std::vector<Step> phase(o_.sync_every);
  std::vector<ApplyResult> results(o_.sync_every);
  std::atomic<uint64_t> racing{0};
  std::atomic<uint64_t> malformed_answers{0};
  while (report_.events < o_.events) {
    size_t n = 0;
    for (uint64_t events = report_.events; n < phase.size() && events < o_.events; ++n) {
      gen_.next(phase[n]);
      events += phase[n].events.size();
    }
    std::atomic<bool> writing{true};
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < o_.readers; ++r) {
      threads.emplace_back([&, r] {
        std::vector<HolderMatch> out;
        for (size_t i = r; writing.load(std::memory_order_relaxed); i += o_.readers) {
          const Step& s = phase[i % n];
          if (s.lookups.empty()) continue;
          const auto& chain = s.lookups[i % s.lookups.size()];
          index_->lookup(chain, out);
          racing.fetch_add(1, std::memory_order_relaxed);
          for (size_t k = 0; k < out.size(); ++k) {
            const bool sorted = k == 0 || out[k - 1].holder < out[k].holder;
            if (!sorted || out[k].device_depth > out[k].any_depth || out[k].any_depth == 0 ||
                out[k].any_depth > chain.size()) {
              malformed_answers.fetch_add(1, std::memory_order_relaxed);
            }
          }
        }
      });
    }
    std::vector<std::thread> writers;
    for (uint32_t lane = 0; lane < lanes; ++lane) {
      writers.emplace_back([&, lane] {
        for (size_t i = 0; i < n; ++i) {
          const Step& s = phase[i];
          if (s.holder.value() % lanes != lane) continue;
          if (s.kind == Step::Kind::kRemoveHolder) {
            index_->remove_holder(s.holder);
          } else {
            results[i] = index_->apply(s.holder, s.events);
          }
        }
      });
    }
    for (auto& t : writers) t.join();
    writing.store(false);
    for (auto& t : threads) t.join();
    if (malformed_answers.load() > 0) {
      return fail(phase[0], std::to_string(malformed_answers.load()) +
                                " racing lookup answers were unsorted or out of range");
    }
    for (size_t i = 0; i < n; ++i) {
      const Step& s = phase[i];
      ApplyResult want;
      if (s.kind == Step::Kind::kRemoveHolder) {
        ref_.remove_holder(s.holder);
      } else {
        want = ref_.apply(s.holder, s.events);
        if (Status st = check_result(s, results[i], want); !st.ok()) return st;
      }
      count(s, want);
    }
    const Step& last = phase[n - 1];
    if (Status s = check_stats(last); !s.ok()) return s;
    if (Status s = check_all(last); !s.ok()) return s;
    for (size_t i = 0; i < n; ++i) {
      if (Status s = check_lookups(phase[i]); !s.ok()) return s;
    }
  }
  report_.racing_lookups = racing.load();
  return report_;
}

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

bool long_mode() { return env_u64("KVGATE_EXACTNESS_LONG", 0) != 0; }

}  // namespace

std::string HarnessReport::summary() const {
  std::ostringstream o;
  o << events << " events in " << batches << " batches and " << holder_removals
    << " holder removals; " << lookups << " lookups of " << lookup_blocks << " blocks ("
    << matched_blocks << " matched); " << content_checks << " holder and " << full_checks
    << " full content checks; peak " << peak_memberships << " memberships; " << racing_lookups
    << " racing lookups; totals " << to_string(totals);
  return o.str();
}

Result<HarnessReport> run_exactness(const IndexerFactory& make, const HarnessOptions& options) {
  std::unique_ptr<Indexer> index = make();
  if (index == nullptr) return absl::InvalidArgumentError("the indexer factory returned null");
  Run run(std::move(index), options);
  if (options.lanes > 1 || options.readers > 0) return run.concurrent();
  return run.sequential();
}

HarnessOptions options_from_env(HarnessOptions base) {
  base.events = env_u64("KVGATE_EXACTNESS_EVENTS", long_mode() ? 3'000'000 : base.events);
  // Sanitizer builds run every harness at a fraction of its size (the build sets it): the
  // interleavings they check come from lanes and readers racing, not from the run's length.
  if (const char* scale = std::getenv("KVGATE_EXACTNESS_SCALE"); scale != nullptr) {
    const double f = std::strtod(scale, nullptr);
    if (f > 0 && f < 1) {
      base.events = std::max<uint64_t>(2'000, static_cast<uint64_t>(f * double(base.events)));
    }
  }
  return base;
}

std::vector<uint64_t> seeds_from_env(std::vector<uint64_t> defaults) {
  const char* v = std::getenv("KVGATE_EXACTNESS_SEEDS");
  if (v == nullptr || *v == '\0') {
    if (long_mode()) return {1, 2, 3, 4, 5, 6, 7, 8};
    return defaults;
  }
  std::vector<uint64_t> seeds;
  std::string s(v);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    if (comma > pos)
      seeds.push_back(std::strtoull(s.substr(pos, comma - pos).c_str(), nullptr, 10));
    pos = comma + 1;
  }
  return seeds.empty() ? defaults : seeds;
}

}  // namespace kvgate::index::harness
