#include "kvgate/http/io_pool.h"

#include <gtest/gtest.h>

#include <future>

#include "boost/asio/post.hpp"
#include "kvgate/core/numa.h"

namespace kvgate::http {
namespace {

std::vector<int> cpus_seen_by(IoPool& pool, size_t context) {
  std::promise<std::vector<int>> seen;
  boost::asio::post(pool.context(context), [&] { seen.set_value(current_thread_cpus()); });
  return seen.get_future().get();
}

TEST(IoPool, WithoutNodesThreadsRunAnywhere) {
  IoPool pool(2);
  pool.start();
  EXPECT_EQ(pool.nodes(), 1u);
  EXPECT_EQ(cpus_seen_by(pool, 1), current_thread_cpus());
}

TEST(IoPool, PerNodeContextsRunOnTheirNodesCpus) {
  const std::vector<int> cpus = current_thread_cpus();
  const std::vector<std::vector<int>> nodes = {{cpus.front()}, {cpus.back()}};
  IoPool pool(1, nodes);  // at least one context per node
  pool.start();
  ASSERT_EQ(pool.size(), 2u);
  EXPECT_EQ(pool.nodes(), 2u);
  for (size_t i = 0; i < pool.size(); ++i) {
    EXPECT_EQ(pool.node_of(i), i % 2);
    EXPECT_EQ(pool.cpus_of(i), nodes[i % 2]);
    EXPECT_EQ(cpus_seen_by(pool, i), nodes[i % 2]) << "context " << i;
  }
  // next() alternates between the nodes.
  const auto* a = &pool.next();
  const auto* b = &pool.next();
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace kvgate::http
