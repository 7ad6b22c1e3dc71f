// NUMA topology: which CPUs (and which memory node) make up each node the gateway gives a pool
// of its own (an executor pool, an index shard, event lanes).
//
// The machine's topology comes from libnuma (--numa auto). A described one (--numa-topology) lets
// the per-node paths run on a machine with one node, as CI's do: its nodes pin threads to the
// CPUs named but bind no memory (memory_node -1), since the node numbers do not exist there.
//
// Threading: values; pin_current_thread() acts on the calling thread only.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"

namespace kvgate {

struct NumaNode {
  int memory_node = -1;   // libnuma's node to allocate on, or -1: wherever the OS puts it
  std::vector<int> cpus;  // ascending
};

struct NumaTopology {
  std::vector<NumaNode> nodes;  // at least one
  size_t size() const { return nodes.size(); }
  // "node 0: CPUs 0-3 (memory 0); node 1: ..." for logs.
  std::string describe() const;
};

// The nodes libnuma reports that hold CPUs this process may run on, in node order; one node
// holding every allowed CPU (memory_node -1) when libnuma reports one node or is unavailable.
NumaTopology detect_numa_topology();

// One node holding every CPU this process may run on, memory not bound: the plain layout.
NumaTopology single_numa_node();

// A described topology: nodes separated by ';', each a CPU list of numbers and ranges ("0-3,8").
// Every CPU must be one this process may run on, and in one node only; the error names the part
// at fault.
Result<NumaTopology> parse_numa_topology(std::string_view spec);

// Restricts the calling thread to `cpus` (no-op for an empty list). False when the OS refused.
bool pin_current_thread(std::span<const int> cpus);

// The CPUs the calling thread may run on, ascending.
std::vector<int> current_thread_cpus();

}  // namespace kvgate
