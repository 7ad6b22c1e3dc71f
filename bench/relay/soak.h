// The relay's memory under a long fan-out, measured in a process of its own: `kvgate relay` in
// front of a kvgate-mock engine that a few clients keep busy (stored and evicted blocks every
// step), and --subscribers gRPC streams from this process, --slow of them reading a message
// every 20 ms so they fall behind the history and are moved to snapshots. The relay's resident
// memory is sampled every second; its history is bounded by --history-bytes, so the figure to
// read is whether the second half of the soak still grows.
#pragma once

#include <cstdint>
#include <string>

namespace kvgate::relay {

struct SoakOptions {
  double seconds = 60;
  int subscribers = 100;
  int slow = 10;
  std::string history_bytes = "16MiB";
  int clients = 4;  // closed-loop clients keeping the engine busy
};

void bench_soak(const SoakOptions& options);

}  // namespace kvgate::relay
