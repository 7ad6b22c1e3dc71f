// --max-concurrent-requests, --queue-size, --queue-timeout-secs: at most N generation requests run,
// the next ones wait their turn in order, and beyond the queue or past the wait a client gets 429
// with Retry-After.
#include <atomic>
#include <thread>

#include "app/gateway_fixture.h"

namespace kvgate::app {
namespace {

using namespace std::chrono_literals;

// A completion sent from its own thread and connection; its status lands in `*status`.
std::thread send_async(uint16_t port, std::string body, std::atomic<unsigned>* status) {
  return std::thread([port, body = std::move(body), status] {
    http::SyncClient c("127.0.0.1", port);
    auto r = c.post("/v1/completions", body);
    status->store(r.ok() ? r->status : 1);
  });
}

class AdmissionTest : public GatewayTest {
 protected:
  // A slow worker (a 150-token answer takes about a second) behind a gateway that runs one
  // request at a time; then a long request, once it holds the slot. Its status lands in `*status`.
  std::thread start_one_slot_with_a_long_request(size_t queue_size,
                                                 std::chrono::milliseconds queue_timeout,
                                                 std::atomic<unsigned>* status) {
    start_worker(/*speedup=*/1);
    EXPECT_TRUE(start(0, [&](GatewayConfig& c) {
      c.max_concurrent_requests = 1;
      c.queue_size = queue_size;
      c.queue_timeout = queue_timeout;
    }));
    std::thread t = send_async(gateway_->port(), completion("the long one", 150), status);
    EXPECT_TRUE(wait_until(
        [&] { return metric_value(gateway_->metrics_text(), "kvgate_admission_running") == 1; },
        std::chrono::seconds(5)));
    return t;
  }
};

TEST_F(AdmissionTest, BeyondTheLimitRequestsWaitThenTimeOutOrAreRefusedAtOnce) {
  std::atomic<unsigned> first{0}, second{0};
  std::thread a = start_one_slot_with_a_long_request(/*queue_size=*/1, 300ms, &first);
  std::thread b = send_async(gateway_->port(), completion("the waiting one", 4), &second);
  ASSERT_TRUE(wait_until(
      [&] { return metric_value(gateway_->metrics_text(), "kvgate_admission_queued") == 1; }, 5s));
  // The queue is full: refused at once.
  auto refused = client().post("/v1/completions", completion("one too many", 4));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 429u);
  EXPECT_EQ(refused->header("retry-after"), "1");
  EXPECT_NE(refused->body.find("queue is full"), std::string::npos) << refused->body;
  b.join();
  EXPECT_EQ(second.load(), 429u) << "waited 300 ms while the long one ran";
  a.join();
  EXPECT_EQ(first.load(), 200u);
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(metric_value(m, "kvgate_request_errors_total{reason=\"queue_full\"}"), 1);
  EXPECT_EQ(metric_value(m, "kvgate_request_errors_total{reason=\"queue_timeout\"}"), 1);
  // The slot frees as the answer's last bytes leave, which the client may see first.
  EXPECT_TRUE(wait_until(
      [&] { return metric_value(gateway_->metrics_text(), "kvgate_admission_running") == 0; }, 5s));
  auto again = client().post("/v1/completions", completion("free again", 4));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 200u);
}

TEST_F(AdmissionTest, AWaitingRequestTakesTheSlotWhenItFrees) {
  std::atomic<unsigned> first{0}, second{0};
  std::thread a = start_one_slot_with_a_long_request(/*queue_size=*/4, 20s, &first);
  std::thread b = send_async(gateway_->port(), completion("the waiting one", 4), &second);
  a.join();
  b.join();
  EXPECT_EQ(first.load(), 200u);
  EXPECT_EQ(second.load(), 200u);
}

// Many clients at once: the engine never sees more than the limit running, and every request is
// answered in the end.
TEST_F(AdmissionTest, ManyAtOnceNeverRunMoreThanTheLimit) {
  ASSERT_TRUE(start(1, [](GatewayConfig& c) {
    c.max_concurrent_requests = 3;
    c.queue_size = 64;
    c.queue_timeout = 60s;
  }));
  std::atomic<bool> sampling{true};
  std::atomic<int> most_running{0};
  std::thread sampler([&] {
    http::SyncClient engine("127.0.0.1", worker_port(0));
    while (sampling.load()) {
      auto r = engine.get("/load");
      if (r.ok()) {
        const size_t at = r->body.find("\"running\":");
        if (at != std::string::npos) {
          const int running = std::atoi(r->body.c_str() + at + 10);
          int seen = most_running.load();
          while (running > seen && !most_running.compare_exchange_weak(seen, running)) {
          }
        }
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  std::vector<std::atomic<unsigned>> statuses(24);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < statuses.size(); ++i) {
    clients.push_back(send_async(
        gateway_->port(), completion("client " + std::to_string(i) + " asks", 40), &statuses[i]));
  }
  for (auto& t : clients) t.join();
  sampling.store(false);
  sampler.join();
  for (size_t i = 0; i < statuses.size(); ++i) EXPECT_EQ(statuses[i].load(), 200u) << i;
  EXPECT_GE(most_running.load(), 2) << "the requests overlapped";
  EXPECT_LE(most_running.load(), 3);
}

}  // namespace
}  // namespace kvgate::app
