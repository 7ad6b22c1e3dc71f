#include "app/tenants.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "app/access.h"
#include "yaml-cpp/yaml.h"

namespace kvgate::app {

const char* priority_name(Priority p) {
  switch (p) {
    case Priority::kCritical:
      return "critical";
    case Priority::kStandard:
      return "standard";
    case Priority::kSheddable:
      return "sheddable";
  }
  return "standard";
}

std::optional<Priority> parse_priority(std::string_view s) {
  if (s == "critical" || s == "0") return Priority::kCritical;
  if (s == "standard" || s == "1") return Priority::kStandard;
  if (s == "sheddable" || s == "2") return Priority::kSheddable;
  return std::nullopt;
}

// ---- TokenBucket -------------------------------------------------------------------------------

void TokenBucket::refill(std::chrono::steady_clock::time_point now) {
  if (at_ == std::chrono::steady_clock::time_point{}) at_ = now;
  const double seconds = std::chrono::duration<double>(now - at_).count();
  if (seconds > 0) {
    level_ = std::min(capacity(), level_ + seconds * capacity() / 60.0);
    at_ = now;
  }
}

TokenBucket::Take TokenBucket::take(uint64_t n, std::chrono::steady_clock::time_point now) {
  MutexLock lock(&mu_);
  refill(now);
  const double want = static_cast<double>(n);
  demand_ += want;
  const double rate = capacity() / 60'000.0;  // per millisecond
  const auto ms = [&](double missing) {
    return rate <= 0 ? std::chrono::milliseconds(60'000)
                     : std::chrono::milliseconds(
                           static_cast<int64_t>(std::ceil(std::max(0.0, missing) / rate)));
  };
  const double share = share_;
  const auto of_limit = [&](double left) {
    return share > 0 ? std::min(static_cast<double>(per_minute_), left / share) : left;
  };
  if (level_ < want) {
    const double left = std::max(0.0, level_);
    return {.ok = false,
            .remaining = left,
            .wait = ms(want - level_),
            .limit_remaining = of_limit(left)};
  }
  level_ -= want;
  return {.ok = true,
          .remaining = level_,
          .wait = ms(capacity() - level_),
          .limit_remaining = of_limit(level_)};
}

void TokenBucket::charge(int64_t n, std::chrono::steady_clock::time_point now) {
  MutexLock lock(&mu_);
  refill(now);
  if (n > 0) demand_ += static_cast<double>(n);
  level_ = std::min(capacity(), level_ - static_cast<double>(n));
}

void TokenBucket::set_share(double share, std::chrono::steady_clock::time_point now) {
  MutexLock lock(&mu_);
  refill(now);
  share_ = std::clamp(share, 0.0, 1.0);
  level_ = std::min(level_, capacity());
}

double TokenBucket::share() const {
  MutexLock lock(&mu_);
  return share_;
}

double TokenBucket::take_demand() {
  MutexLock lock(&mu_);
  return std::exchange(demand_, 0.0);
}

// ---- TenantMetrics ------------------------------------------------------------------------------

TenantMetrics::TenantMetrics(metrics::Registry& registry, size_t max_tenants)
    : requests_(metrics::counter_family(
          registry, "kvgate_tenant_requests_total",
          "Generation requests by tenant (--api-keys-file; past --tenant-series-limit tenants, "
          "\"other\") and class, counted when they end.")),
      tokens_(metrics::counter_family(registry, "kvgate_tenant_tokens_total",
                                      "Prompt and output tokens by tenant, as the engines' usage "
                                      "says (prompt: as routed).")),
      refused_(metrics::counter_family(registry, "kvgate_tenant_refusals_total",
                                       "Requests refused by their key's limits, by tenant.")),
      max_tenants_(max_tenants) {}

std::shared_ptr<const TenantSeries> TenantMetrics::series_of(const std::string& tenant) {
  MutexLock lock(&mu_);
  const auto it = by_tenant_.find(tenant);
  if (it != by_tenant_.end()) return it->second;
  const std::string label = by_tenant_.size() < max_tenants_ ? tenant : std::string("other");
  if (const auto other = by_tenant_.find(label); other != by_tenant_.end()) {
    by_tenant_.emplace(tenant, other->second);
    return other->second;
  }
  auto s = std::make_shared<TenantSeries>();
  s->tenant = label;
  for (size_t c = 0; c < s->requests.size(); ++c) {
    s->requests[c] =
        &requests_.Add({{"tenant", label}, {"class", priority_name(static_cast<Priority>(c))}});
  }
  s->prompt_tokens = &tokens_.Add({{"tenant", label}, {"kind", "prompt"}});
  s->output_tokens = &tokens_.Add({{"tenant", label}, {"kind", "output"}});
  s->rate_limited = &refused_.Add({{"tenant", label}, {"reason", "rate_limited"}});
  by_tenant_.emplace(label, s);
  if (label != tenant) by_tenant_.emplace(tenant, s);
  return s;
}

std::vector<TenantMetrics::Totals> TenantMetrics::totals() const {
  std::vector<Totals> out;
  {
    MutexLock lock(&mu_);
    for (const auto& [name, s] : by_tenant_) {
      if (name != s->tenant) continue;  // a tenant counted in "other"
      Totals t{.tenant = s->tenant,
               .prompt_tokens = s->prompt_tokens->Value(),
               .output_tokens = s->output_tokens->Value(),
               .rate_limited = s->rate_limited->Value()};
      for (size_t c = 0; c < t.requests.size(); ++c) t.requests[c] = s->requests[c]->Value();
      out.push_back(std::move(t));
    }
  }
  const auto total = [](const Totals& t) { return t.requests[0] + t.requests[1] + t.requests[2]; };
  std::sort(out.begin(), out.end(), [&](const Totals& a, const Totals& b) {
    return total(a) != total(b) ? total(a) > total(b) : a.tenant < b.tenant;
  });
  return out;
}

// ---- KeyTable ----------------------------------------------------------------------------------

std::array<uint8_t, 32> sha256_of(std::string_view bytes) {
  std::array<uint8_t, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d.data());
  return d;
}

std::string limit_id(const KeyEntry& key) {
  static constexpr std::string_view kSalt = "kvgate rate limit";
  std::string material(kSalt);
  material.append(reinterpret_cast<const char*>(key.key_sha256.data()), key.key_sha256.size());
  const std::array<uint8_t, 32> h = sha256_of(material);
  char hex[17];
  for (size_t i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", h[i]);
  return std::string(hex, 16);
}

bool KeyEntry::may_use(std::string_view model) const {
  return models.empty() || std::find(models.begin(), models.end(), model) != models.end();
}

namespace {

std::optional<std::array<uint8_t, 32>> hex_digest(const std::string& hex) {
  if (hex.size() != 64) return std::nullopt;
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1 ||
        !std::isxdigit(static_cast<unsigned char>(hex[2 * i])) ||
        !std::isxdigit(static_cast<unsigned char>(hex[2 * i + 1]))) {
      return std::nullopt;
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return out;
}

// One entry of the file's `keys` list; an error says what is wrong with it.
Result<std::unique_ptr<KeyEntry>> entry_of(const YAML::Node& n) {
  if (!n.IsMap()) return absl::InvalidArgumentError("not a mapping");
  auto e = std::make_unique<KeyEntry>();
  const std::string key = n["key"] ? n["key"].as<std::string>("") : "";
  const std::string hashed = n["key_sha256"] ? n["key_sha256"].as<std::string>("") : "";
  if (key.empty() == hashed.empty()) {
    return absl::InvalidArgumentError("give one of key and key_sha256");
  }
  if (!key.empty()) {
    e->key_sha256 = sha256_of(key);
  } else if (const auto d = hex_digest(hashed)) {
    e->key_sha256 = *d;
  } else {
    return absl::InvalidArgumentError("key_sha256 is not 64 hex digits");
  }
  e->tenant = n["tenant"] ? n["tenant"].as<std::string>("") : "";
  if (e->tenant.empty()) return absl::InvalidArgumentError("no tenant");
  if (n["priority"]) {
    const std::optional<Priority> p = parse_priority(n["priority"].as<std::string>(""));
    if (!p) return absl::InvalidArgumentError("priority is not critical, standard or sheddable");
    e->priority = *p;
  }
  for (const char* limit : {"rpm", "tpm"}) {
    if (!n[limit]) continue;
    const int64_t v = n[limit].as<int64_t>(-1);
    if (v <= 0) return absl::InvalidArgumentError(std::string(limit) + " is not a positive count");
    (std::string_view(limit) == "rpm" ? e->requests : e->tokens) =
        std::make_shared<TokenBucket>(static_cast<uint64_t>(v));
  }
  if (n["models"]) {
    if (!n["models"].IsSequence()) return absl::InvalidArgumentError("models is not a list");
    for (const YAML::Node& m : n["models"]) e->models.push_back(m.as<std::string>(""));
  }
  return e;
}

}  // namespace

namespace {
// `e`'s buckets taken from `old` (the same key before a reload) where the limit is the same.
void keep_buckets(KeyEntry& e, const KeyEntry& old) {
  const auto keep = [](std::shared_ptr<TokenBucket>& now, const std::shared_ptr<TokenBucket>& was) {
    if (now && was && now->per_minute() == was->per_minute()) now = was;
  };
  keep(e.requests, old.requests);
  keep(e.tokens, old.tokens);
}
}  // namespace

Result<std::shared_ptr<const KeyTable>> KeyTable::load(const std::string& path,
                                                       const KeyTable* previous,
                                                       TenantMetrics* metrics) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError("--api-keys-file " + path + ": cannot read it");
  std::stringstream text;
  text << in.rdbuf();
  auto table = std::make_shared<KeyTable>();
  try {
    const YAML::Node root = YAML::Load(text.str());
    if (!root.IsMap() || !root["keys"] || !root["keys"].IsSequence()) {
      return absl::InvalidArgumentError("--api-keys-file " + path + ": no `keys:` list");
    }
    size_t i = 0;
    for (const YAML::Node& n : root["keys"]) {
      Result<std::unique_ptr<KeyEntry>> e = entry_of(n);
      const std::string where = "--api-keys-file " + path + ": keys[" + std::to_string(i++) + "]";
      if (!e.ok())
        return absl::InvalidArgumentError(where + ": " + std::string(message_of(e.status())));
      const std::array<uint8_t, 32>& hash = (*e)->key_sha256;
      if (!table->by_hash_.emplace(hash, e->get()).second) {
        return absl::InvalidArgumentError(where + " (tenant " + (*e)->tenant +
                                          "): the same key again");
      }
      if (previous != nullptr) {
        const auto was = previous->by_hash_.find(hash);
        if (was != previous->by_hash_.end()) keep_buckets(**e, *was->second);
      }
      if (metrics != nullptr) (*e)->series = metrics->series_of((*e)->tenant);
      (*e)->limit_id = limit_id(**e);
      table->entries_.push_back(std::move(*e));
    }
  } catch (const YAML::Exception& ex) {
    return absl::InvalidArgumentError("--api-keys-file " + path + ": not YAML: " + ex.what());
  }
  return std::shared_ptr<const KeyTable>(std::move(table));
}

const KeyEntry* KeyTable::find(std::string_view key) const {
  const std::array<uint8_t, 32> d = sha256_of(key);
  const auto it = by_hash_.find(d);
  if (it == by_hash_.end()) return nullptr;
  const std::array<uint8_t, 32>& want = it->second->key_sha256;
  const bool same = constant_time_equals(
      std::string_view(reinterpret_cast<const char*>(d.data()), d.size()),
      std::string_view(reinterpret_cast<const char*>(want.data()), want.size()));
  return same ? it->second : nullptr;
}

}  // namespace kvgate::app
