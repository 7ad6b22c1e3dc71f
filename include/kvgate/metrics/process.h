// The standard process_* series every Prometheus client exports (CPU seconds, resident and virtual
// memory, open and maximum file descriptors, start time), read from /proc at each scrape, and a
// `<prefix>_build_info` gauge (value 1) whose labels name the build.
//
// Threading: construct once; update() from any thread (a scrape); it reads /proc and sets gauges.
#pragma once

#include <string>

#include "kvgate/metrics/metrics.h"

namespace kvgate::metrics {

struct BuildInfo {
  std::string version;
  std::string compiler;
  std::string build_type;
};

class ProcessMetrics {
 public:
  ProcessMetrics(Registry& registry, const std::string& prefix, const BuildInfo& build);
  // Reads the process's figures into the gauges; call before rendering the registry.
  void update();

 private:
  Counter* cpu_seconds_;
  Gauge* resident_bytes_;
  Gauge* virtual_bytes_;
  Gauge* open_fds_;
  Gauge* max_fds_;
  Gauge* start_time_seconds_;
};

}  // namespace kvgate::metrics
