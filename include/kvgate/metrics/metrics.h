// Prometheus metrics. Each component builds its families once, at construction, into the
// process's registry and keeps references to its series (one stats table per component); nothing
// looks a series up by name per request. Names are `kvgate_*` with units in the name
// (`_seconds`, `_bytes`, `_total`) and a help string on every family.
//
// Threading: series updates are safe from any thread, but every thread shares them (a counter is
// one atomic double, a histogram takes a mutex): a series updated per request takes its updates
// through a sharded front (kvgate/metrics/sharded.h). Family registration and series creation
// (Add/Remove) take the family's lock: control path only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kvgate::metrics {

using Registry = prometheus::Registry;
using Counter = prometheus::Counter;
using Gauge = prometheus::Gauge;
using Histogram = prometheus::Histogram;
template <class T>
using Family = prometheus::Family<T>;
using Labels = std::map<std::string, std::string>;

// The Prometheus text exposition (format 0.0.4) of everything in `registry`.
std::string text_exposition(const Registry& registry);

// Histogram buckets for latencies from 1 µs to 60 s (roughly x2.5 per bucket).
const prometheus::Histogram::BucketBoundaries& latency_buckets_seconds();
// Histogram buckets for whole requests and their first tokens, 5 ms to 600 s (the default
// request timeout), so a slow answer lands in a bucket instead of +Inf.
const prometheus::Histogram::BucketBoundaries& request_buckets_seconds();
// Histogram buckets for sub-millisecond operations, 100 ns to 10 ms.
const prometheus::Histogram::BucketBoundaries& fast_op_buckets_seconds();

// Builders with the registry bound, for terse stats tables:
//   Family<Counter>& f = counter_family(reg, "kvgate_x_total", "Help.");
Family<Counter>& counter_family(Registry& reg, const std::string& name, const std::string& help);
Family<Gauge>& gauge_family(Registry& reg, const std::string& name, const std::string& help);
Family<Histogram>& histogram_family(Registry& reg, const std::string& name,
                                    const std::string& help);

// Brings `counter` up to `total`, a monotonic count another component keeps in its own stats
// table (mirrored at scrape time); never moves it back.
void advance(Counter& counter, uint64_t total);

}  // namespace kvgate::metrics
