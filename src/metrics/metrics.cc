#include "kvgate/metrics/metrics.h"

#include <sstream>

#include "prometheus/text_serializer.h"

namespace kvgate::metrics {

std::string text_exposition(const Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

const prometheus::Histogram::BucketBoundaries& latency_buckets_seconds() {
  static const prometheus::Histogram::BucketBoundaries b = {
      1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
      0.01, 0.025,  0.05, 0.1,  0.25,   0.5,  1.0,  2.5,    5.0,  10.0, 30.0,   60.0};
  return b;
}

const prometheus::Histogram::BucketBoundaries& request_buckets_seconds() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.005, 0.01, 0.025, 0.05, 0.1,  0.25, 0.5,  1.0,  2.5, 5.0,
      10.0,  20.0, 30.0,  60.0, 120., 180., 300., 450., 600.};
  return b;
}

const prometheus::Histogram::BucketBoundaries& fast_op_buckets_seconds() {
  static const prometheus::Histogram::BucketBoundaries b = {1e-7, 2e-7, 5e-7, 1e-6, 2e-6, 5e-6,
                                                            1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4,
                                                            1e-3, 2e-3, 5e-3, 1e-2};
  return b;
}

void advance(Counter& counter, uint64_t total) {
  const double t = static_cast<double>(total);
  if (t > counter.Value()) counter.Increment(t - counter.Value());
}

Family<Counter>& counter_family(Registry& reg, const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(reg);
}
Family<Gauge>& gauge_family(Registry& reg, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(reg);
}
Family<Histogram>& histogram_family(Registry& reg, const std::string& name,
                                    const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(reg);
}

}  // namespace kvgate::metrics
