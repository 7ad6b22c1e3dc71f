#include "kvgate/core/numa.h"

#include <gtest/gtest.h>

#include <thread>

namespace kvgate {
namespace {

TEST(Numa, TheMachinesTopologyCoversEveryAllowedCpuOnce) {
  const NumaTopology t = detect_numa_topology();
  ASSERT_GE(t.size(), 1u);
  std::vector<int> all;
  for (const NumaNode& n : t.nodes) {
    EXPECT_FALSE(n.cpus.empty());
    all.insert(all.end(), n.cpus.begin(), n.cpus.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, current_thread_cpus());
}

TEST(Numa, ADescribedTopologyNamesItsCpusAndBindsNoMemory) {
  const std::vector<int> cpus = current_thread_cpus();
  ASSERT_FALSE(cpus.empty());
  const std::string first = std::to_string(cpus.front());
  const std::string last = std::to_string(cpus.back());
  const std::string spec = cpus.size() > 1 ? first + ";" + last : first;
  auto t = parse_numa_topology(spec);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), cpus.size() > 1 ? 2u : 1u);
  EXPECT_EQ(t->nodes[0].cpus, std::vector<int>{cpus.front()});
  EXPECT_EQ(t->nodes[0].memory_node, -1);
  EXPECT_NE(t->describe().find("node 0: CPUs " + first + " (memory not bound)"), std::string::npos)
      << t->describe();

  if (cpus.size() > 1 && cpus[1] == cpus[0] + 1) {
    auto range = parse_numa_topology(first + "-" + std::to_string(cpus[1]));
    ASSERT_TRUE(range.ok()) << range.status();
    EXPECT_EQ(range->nodes[0].cpus, (std::vector<int>{cpus[0], cpus[1]}));
  }
}

TEST(Numa, BadDescriptionsSayWhatIsWrong) {
  const auto message = [](std::string_view spec) {
    auto t = parse_numa_topology(spec);
    EXPECT_FALSE(t.ok()) << spec;
    return std::string(t.status().message());
  };
  EXPECT_NE(message("0;;1").find("node 1 ('') names no CPU"), std::string::npos);
  EXPECT_NE(message("x").find("'x' is not a CPU number or range"), std::string::npos);
  EXPECT_NE(message("3-1").find("is not a CPU number or range"), std::string::npos);
  EXPECT_NE(message("100000").find("is not one this process may run on"), std::string::npos);
  const std::string c = std::to_string(current_thread_cpus().front());
  EXPECT_NE(message(c + ";" + c).find("is in two nodes"), std::string::npos);
}

TEST(Numa, APinnedThreadRunsOnItsCpusOnly) {
  const std::vector<int> cpus = current_thread_cpus();
  std::vector<int> seen;
  std::thread t([&] {
    ASSERT_TRUE(pin_current_thread(std::span<const int>(&cpus.back(), 1)));
    seen = current_thread_cpus();
  });
  t.join();
  EXPECT_EQ(seen, std::vector<int>{cpus.back()});
  EXPECT_EQ(current_thread_cpus(), cpus) << "the caller stays as it was";
}

}  // namespace
}  // namespace kvgate
