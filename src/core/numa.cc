#include "kvgate/core/numa.h"

#include <numa.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <charconv>

namespace kvgate {
namespace {

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

bool parse_int(std::string_view s, int* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= 0;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

std::string NumaTopology::describe() const {
  std::string out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) out += "; ";
    out += "node " + std::to_string(i) + ": CPUs " + cpu_list(nodes[i].cpus);
    out += nodes[i].memory_node >= 0 ? " (memory node " + std::to_string(nodes[i].memory_node) + ")"
                                     : " (memory not bound)";
  }
  return out;
}

NumaTopology detect_numa_topology() {
  const std::vector<int> allowed = allowed_cpus();
  NumaTopology t;
  if (numa_available() >= 0 && numa_num_configured_nodes() > 1) {
    const int max_node = numa_max_node();
    for (int node = 0; node <= max_node; ++node) {
      NumaNode n{.memory_node = node};
      for (int c : allowed) {
        if (numa_node_of_cpu(c) == node) n.cpus.push_back(c);
      }
      if (!n.cpus.empty()) t.nodes.push_back(std::move(n));
    }
  }
  return t.nodes.size() > 1 ? t : single_numa_node();
}

NumaTopology single_numa_node() {
  return {.nodes = {NumaNode{.memory_node = -1, .cpus = allowed_cpus()}}};
}

Result<NumaTopology> parse_numa_topology(std::string_view spec) {
  const std::vector<int> allowed = allowed_cpus();
  NumaTopology t;
  std::vector<int> seen;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t semi = spec.find(';', start);
    if (semi == std::string_view::npos) semi = spec.size();
    const std::string_view node = trim(spec.substr(start, semi - start));
    const std::string where =
        "node " + std::to_string(t.nodes.size()) + " ('" + std::string(node) + "')";
    if (node.empty()) {
      return absl::InvalidArgumentError("--numa-topology: " + where +
                                        " names no CPU; write nodes as CPU lists separated by "
                                        "';', e.g. \"0-3;4-7\"");
    }
    NumaNode n;
    size_t from = 0;
    while (from <= node.size()) {
      size_t comma = node.find(',', from);
      if (comma == std::string_view::npos) comma = node.size();
      const std::string_view item = trim(node.substr(from, comma - from));
      const size_t dash = item.find('-');
      int lo = 0;
      int hi = 0;
      const bool ok = dash == std::string_view::npos
                          ? parse_int(item, &lo) && parse_int(item, &hi)
                          : parse_int(item.substr(0, dash), &lo) &&
                                parse_int(item.substr(dash + 1), &hi) && lo <= hi;
      if (!ok) {
        return absl::InvalidArgumentError("--numa-topology: " + where + ": '" + std::string(item) +
                                          "' is not a CPU number or range (like 0-3)");
      }
      for (int c = lo; c <= hi; ++c) {
        if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
          return absl::InvalidArgumentError(
              "--numa-topology: " + where + ": CPU " + std::to_string(c) +
              " is not one this process may run on (allowed: " + cpu_list(allowed) + ")");
        }
        if (std::find(seen.begin(), seen.end(), c) != seen.end()) {
          return absl::InvalidArgumentError("--numa-topology: " + where + ": CPU " +
                                            std::to_string(c) + " is in two nodes");
        }
        seen.push_back(c);
        n.cpus.push_back(c);
      }
      from = comma + 1;
    }
    std::sort(n.cpus.begin(), n.cpus.end());
    t.nodes.push_back(std::move(n));
    start = semi + 1;
  }
  return t;
}

bool pin_current_thread(std::span<const int> cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

std::vector<int> current_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace kvgate
