// Drill: one worker's KV-event publisher floods the gateway while the other workers serve
// ordinary traffic. The flood (drills/flood_publisher.h, real ZMQ sockets): valid stores with
// hashes never seen before at 10,000 messages a second for 10 s, a 100 MB frame every 2 s, and
// for its last 5 s a sequence number that jumps ahead or goes back every 10 ms. Pass rules:
//   - kvgate's RSS grows by less than 64 MB over the flood, and is back within 16 MB of where it
//     started at most 10 s after it;
//   - the flooded holder's index never holds more than its limit (its engine's pool times the
//     margin);
//   - the other workers' prefix-cache hit ratio (their engines' own count) stays within 2 points
//     of a run without the flood;
//   - the flooded holder's engine is asked for no more than 10 replays in any second.
// The run without the flood is the same fleet and traffic with the publisher silent. The
// warm-up rule is off in both runs: without the flood the flooded worker's index is empty and the
// rule would send it requests, a difference that is not the flood's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "drills/flood_publisher.h"
#include "drills/harness.h"

namespace kvgate::drills {
namespace {

using namespace std::chrono_literals;

constexpr double kWarmupS = 4;
constexpr double kMeasureS = 10;  // the flood's length; the run without it measures as long
constexpr double kRecoveryS = 10;
constexpr double kNearMb = 16;  // "back near where it started"

double mb(double bytes) { return bytes / (1 << 20); }

// An engine's own prefix-cache count (vllm:prefix_cache_*_total, in tokens).
struct CacheCount {
  double hits = 0, queries = 0;
};
CacheCount cache_count(const MockFleet& fleet, size_t worker) {
  const std::string text = fleet.admin_get(worker, "/metrics").value_or("");
  return {metric_sum(text, "vllm:prefix_cache_hits_total").value_or(0),
          metric_sum(text, "vllm:prefix_cache_queries_total").value_or(0)};
}

// Samples kvgate's RSS every 100 ms and the flooded holder's index every 250 ms until stopped.
class Sampler {
 public:
  Sampler(GatewayProcess& gw, std::string holder_label) : gw_(gw), label_(std::move(holder_label)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Sampler() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  struct Sample {
    double at = 0;
    double rss = 0;
  };
  std::vector<Sample> rss() const {
    std::lock_guard<std::mutex> l(mu_);
    return rss_;
  }
  double max_holder_blocks() const { return max_blocks_.load(); }
  // The mean RSS over [from, to).
  double mean_rss(double from, double to) const {
    double sum = 0;
    int n = 0;
    for (const Sample& s : rss())
      if (s.at >= from && s.at < to) sum += s.rss, ++n;
    return n > 0 ? sum / n : 0;
  }
  double max_rss(double from) const {
    double m = 0;
    for (const Sample& s : rss())
      if (s.at >= from) m = std::max(m, s.rss);
    return m;
  }

 private:
  void run() {
    for (int i = 0; !stop_; ++i) {
      {
        std::lock_guard<std::mutex> l(mu_);
        rss_.push_back({now_s(), static_cast<double>(gw_.process().rss_bytes())});
      }
      if (i % 5 == 0) {
        const double blocks = gw_.metric_sum("kvgate_events_holder_blocks", label_).value_or(0);
        max_blocks_ = std::max(max_blocks_.load(), blocks);
      }
      sleep_s(0.1);
    }
  }
  GatewayProcess& gw_;
  const std::string label_;
  mutable std::mutex mu_;
  std::vector<Sample> rss_;
  std::atomic<double> max_blocks_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct RunResult {
  bool ready = false;
  double hit_ratio = 0;             // workers 1 and 2 together, over the measured window
  std::vector<double> worker_hits;  // each of them
  // The flood's run only.
  double rss_growth_mb = 0;
  double back_after_s = -1;  // -1: not back near the start within kRecoveryS
  double limit = 0, max_blocks = 0;
  int max_replays_in_a_second = 0;
  size_t replay_requests = 0;
  FloodPublisher::Stats flood;
  double disconnects = 0, evicted = 0, lag_ignored = 0;
};

int max_in_a_second(const std::vector<std::chrono::steady_clock::time_point>& times) {
  int most = 0;
  for (const auto& from : times) {
    most = std::max(most, static_cast<int>(std::count_if(times.begin(), times.end(), [&](auto t) {
                      return t >= from && t < from + 1s;
                    })));
  }
  return most;
}

RunResult run(bool flood) {
  RunResult r;
  FloodPublisher publisher({});
  if (flood) publisher.prepare();  // before the processes start: the hashing is not the flood
  MockFleet fleet(3, {});
  if (!fleet.ready()) return r;
  const std::string flooded = fleet.url(0);
  GatewayProcess gw(
      fleet.urls(),
      {"--log-level", "warn", "--warmup-thin-ratio", "0", "--kv-events-endpoint",
       flooded + "=" + publisher.endpoint() + ",replay=" + publisher.replay_endpoint()});
  if (!gw.ready() || !gw.wait_routable(3, 20) || !publisher.wait_subscriber(20s)) return r;
  r.ready = true;
  const std::string label = "worker=\"" + flooded + "\"";
  Sampler sampler(gw, label);
  Traffic traffic({.port = gw.port(), .max_tokens = 8, .prompt_words = 120});
  traffic.start_closed(12);
  sleep_s(kWarmupS);
  std::vector<CacheCount> before = {cache_count(fleet, 1), cache_count(fleet, 2)};
  const double t_flood = now_s();
  if (flood) {
    publisher.start();
    publisher.wait();
  } else {
    sleep_s(kMeasureS);
  }
  std::vector<CacheCount> after = {cache_count(fleet, 1), cache_count(fleet, 2)};
  const double t_end = now_s();
  traffic.stop(30);
  CacheCount total;
  for (size_t i = 0; i < 2; ++i) {
    const double hits = after[i].hits - before[i].hits,
                 queries = after[i].queries - before[i].queries;
    r.worker_hits.push_back(queries > 0 ? hits / queries : 0);
    total.hits += hits;
    total.queries += queries;
  }
  r.hit_ratio = total.queries > 0 ? total.hits / total.queries : 0;
  if (!flood) return r;
  const double base = sampler.mean_rss(t_flood - 1, t_flood);
  const double near = base + kNearMb * (1 << 20);
  while (now_s() < t_end + kRecoveryS) {  // the first moment it is back near the start
    if (static_cast<double>(gw.process().rss_bytes()) <= near) {
      r.back_after_s = now_s() - t_end;
      break;
    }
    sleep_s(0.1);
  }
  sampler.stop();
  r.rss_growth_mb = mb(sampler.max_rss(t_flood) - base);
  r.max_blocks = sampler.max_holder_blocks();
  r.limit = gw.metric_sum("kvgate_events_holder_block_limit", label).value_or(0);
  r.flood = publisher.stats();
  r.replay_requests = r.flood.replay_requests.size();
  r.max_replays_in_a_second = max_in_a_second(r.flood.replay_requests);
  r.disconnects = gw.metric_sum("kvgate_events_disconnects_total", label).value_or(0);
  r.evicted = gw.metric_sum("kvgate_events_limit_evicted_blocks_total", label).value_or(0);
  r.lag_ignored = gw.metric_sum("kvgate_events_lag_ignored_total", label).value_or(0);
  return r;
}

TEST(Drill, KvEventFloodFromOneWorker) {
  const RunResult calm = run(/*flood=*/false);
  ASSERT_TRUE(calm.ready);
  const RunResult flood = run(/*flood=*/true);
  ASSERT_TRUE(flood.ready);
  const double hit_points = 100 * std::abs(flood.hit_ratio - calm.hit_ratio);
  char back[48] = "never within 10 s";
  if (flood.back_after_s >= 0) std::snprintf(back, sizeof back, "%.1f s after", flood.back_after_s);
  char measured[600];
  std::snprintf(
      measured, sizeof measured,
      "%llu stores in %.1f s (%.0f/s), %llu x 100 MB frames, %llu chaos seqs; RSS +%.0f MB, back "
      "within %.0f MB %s; flooded holder at most %.0f blocks of its %.0f limit (%.0f evicted, %.0f "
      "reconnects); other workers' hit ratio %.1f%% vs %.1f%% without the flood (workers %.1f%%, "
      "%.1f%%); %zu replay requests, at most %d in a second; %.0f bogus timestamps left out of "
      "the lag",
      static_cast<unsigned long long>(flood.flood.messages), flood.flood.seconds,
      flood.flood.messages / std::max(flood.flood.seconds, 1e-9),
      static_cast<unsigned long long>(flood.flood.big_frames),
      static_cast<unsigned long long>(flood.flood.chaos), flood.rss_growth_mb, kNearMb, back,
      flood.max_blocks, flood.limit, flood.evicted, flood.disconnects, 100 * flood.hit_ratio,
      100 * calm.hit_ratio, 100 * flood.worker_hits[0], 100 * flood.worker_hits[1],
      flood.replay_requests, flood.max_replays_in_a_second, flood.lag_ignored);
  const bool passed = flood.rss_growth_mb < 64 && flood.back_after_s >= 0 && flood.limit > 0 &&
                      flood.max_blocks <= flood.limit && hit_points <= 2 &&
                      flood.max_replays_in_a_second <= 10;
  report("KV-event flood from one worker",
         "RSS grows < 64 MB and is back near the start <= 10 s after; the flooded holder's index "
         "<= its limit; other workers' hit ratio within 2 points of a run without the flood; "
         "<= 10 replay requests a second",
         measured, passed);
  EXPECT_LT(flood.rss_growth_mb, 64);
  EXPECT_GE(flood.back_after_s, 0) << "RSS not back near the start within 10 s";
  EXPECT_GT(flood.limit, 0);
  EXPECT_LE(flood.max_blocks, flood.limit);
  EXPECT_LE(hit_points, 2) << measured;
  EXPECT_LE(flood.max_replays_in_a_second, 10);
}

}  // namespace
}  // namespace kvgate::drills
