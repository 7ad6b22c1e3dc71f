// The request path's metric updates: prometheus-cpp's shared series against the per-thread
// sharded ones (kvgate/metrics/sharded.h), on one thread and on several updating at once (the
// gateway's executor threads). One iteration is what a proxied request does: five counter adds
// and three histogram observations.
// Run: build/release/bin/kvgate-bench-metrics --benchmark_repetitions=5
// --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <memory>

#include "kvgate/metrics/metrics.h"
#include "kvgate/metrics/sharded.h"

namespace kvgate::metrics {
namespace {

constexpr double kValue = 3e-5;

struct Shared {
  Registry reg;
  Family<Counter>& counters = counter_family(reg, "kvgate_bench_total", "Bench.");
  Family<Histogram>& histograms = histogram_family(reg, "kvgate_bench_seconds", "Bench.");
  Counter* c[5];
  Histogram* h[3];
  Shared() {
    for (int i = 0; i < 5; ++i) c[i] = &counters.Add({{"i", std::to_string(i)}});
    for (int i = 0; i < 3; ++i)
      h[i] = &histograms.Add({{"i", std::to_string(i)}}, latency_buckets_seconds());
  }
};

struct Sharded {
  Shared series;
  std::unique_ptr<ShardedCounter> c[5];
  std::unique_ptr<ShardedHistogram> h[3];
  Sharded() {
    for (int i = 0; i < 5; ++i) c[i] = std::make_unique<ShardedCounter>(*series.c[i]);
    for (int i = 0; i < 3; ++i) {
      h[i] = std::make_unique<ShardedHistogram>(*series.h[i], latency_buckets_seconds());
    }
  }
};

void BM_PrometheusSeries(benchmark::State& state) {
  static Shared m;  // one set of series for every thread and run (thread-safe static init)
  for (auto _ : state) {
    for (Counter* c : m.c) c->Increment();
    for (Histogram* h : m.h) h->Observe(kValue);
  }
}
BENCHMARK(BM_PrometheusSeries)->Threads(1)->Threads(2)->UseRealTime();

void BM_ShardedSeries(benchmark::State& state) {
  static Sharded m;
  for (auto _ : state) {
    for (auto& c : m.c) c->add();
    for (auto& h : m.h) h->observe(kValue);
  }
  if (state.thread_index() == 0) {
    for (auto& c : m.c) c->publish();
    for (auto& h : m.h) h->publish();
  }
}
BENCHMARK(BM_ShardedSeries)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace kvgate::metrics

BENCHMARK_MAIN();
