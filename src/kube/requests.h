// The request targets the watcher sends, and the backoff between its attempts.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace kvgate::kube::detail {

// Percent-encodes everything but RFC 3986's unreserved characters (a query parameter's value).
std::string query_escape(std::string_view s);

// GET .../pods: /api/v1/namespaces/{ns}/pods, or /api/v1/pods for every namespace.
std::string pods_path(std::string_view namespace_name);
std::string list_target(std::string_view namespace_name, std::string_view selector);
std::string watch_target(std::string_view namespace_name, std::string_view selector,
                         std::string_view resource_version, std::chrono::seconds timeout);

// Exponential backoff with full jitter: the n-th wait after a failure is uniform in
// [0, min(max, min * 2^n)]; reset() after a success.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, uint64_t seed)
      : min_(std::max<int64_t>(min.count(), 1)), max_(std::max(max.count(), min_)), rng_(seed) {}

  std::chrono::milliseconds next() {
    const int64_t ceiling = std::min<int64_t>(max_, min_ << std::min<int>(failures_, 30));
    if (failures_ < 31) ++failures_;
    return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(0, ceiling)(rng_));
  }
  void reset() { failures_ = 0; }

 private:
  int64_t min_;
  int64_t max_;
  int failures_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace kvgate::kube::detail
