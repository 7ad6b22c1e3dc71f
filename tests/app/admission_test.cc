// --max-concurrent-requests, --queue-size, --queue-timeout-secs: at most N generation requests run,
// the next ones wait their turn in order, and beyond the queue or past the wait a client gets 429
// with Retry-After. Classes and tenants: a better class goes first, a full queue sheds its worst,
// the tenant served least goes next within a class, reserved slots take only critical requests.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
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

// With every worker over its overload gate, a sheddable request is refused (429) while a standard
// one still goes to the least loaded worker.
TEST_F(AdmissionTest, WithEveryWorkerOverloadedSheddableRequestsAreRefusedFirst) {
  start_worker(/*speedup=*/1);
  ASSERT_TRUE(start(0, [](GatewayConfig& c) { c.cache_aware.overload.in_flight_requests = 1; }));
  std::atomic<unsigned> long_status{0};
  std::thread a = send_async(gateway_->port(), completion("the long one", 150), &long_status);
  ASSERT_TRUE(wait_until(
      [&] { return gateway_->registry().snapshot()->workers[0]->in_flight() == 1; }, 5s));
  http::ClientRequest r{
      .method = http::Verb::post, .target = "/v1/completions", .body = completion("may wait", 4)};
  r.headers = {{"x-kvgate-priority", "sheddable"}};
  auto shed = client().request(r);
  ASSERT_TRUE(shed.ok());
  EXPECT_EQ(shed->status, 429u) << shed->body;
  EXPECT_EQ(shed->header("retry-after"), "1");
  EXPECT_NE(shed->body.find("sheddable"), std::string::npos) << shed->body;
  auto standard = client().post("/v1/completions", completion("must go", 4));
  ASSERT_TRUE(standard.ok());
  EXPECT_EQ(standard->status, 200u) << standard->body;
  a.join();
  EXPECT_EQ(long_status.load(), 200u);
}

// Classes and tenants in the queue. Requests are sent one by one, each once the previous waits,
// and the access log says in which order they ran (one slot: one at a time).
class PriorityQueueTest : public AdmissionTest {
 protected:
  ~PriorityQueueTest() override { std::filesystem::remove(keys_); }

  // One slot held by a long request; `tweak` applied to the gateway's configuration.
  std::thread start_busy(std::atomic<unsigned>* status,
                         const std::function<void(GatewayConfig&)>& tweak = {}) {
    start_logged({}, tweak);
    std::thread t = send("long", "sk-x", "standard", 150, status);
    EXPECT_TRUE(wait_until(
        [&] { return metric_value(gateway_->metrics_text(), "kvgate_admission_running") == 1; },
        5s));
    return t;
  }
  // Tenants x and y, a worker at real speed (`worker` applied) and a gateway with one slot whose
  // access log records the order requests end in (`tweak` applied).
  void start_logged(const std::function<void(mock::FleetOptions&)>& worker,
                    const std::function<void(GatewayConfig&)>& tweak) {
    std::ofstream(keys_) << "keys:\n  - {key: sk-x, tenant: x}\n  - {key: sk-y, tenant: y}\n";
    start_worker_with([&](mock::FleetOptions& o) {
      o.engine.timing.speedup = 1;
      if (worker) worker(o);
    });
    EXPECT_TRUE(start(0, [&](GatewayConfig& c) {
      c.max_concurrent_requests = 1;
      c.queue_size = 8;
      c.queue_timeout = 60s;
      c.api_keys_file = keys_;
      c.access_log = "json";
      c.access_log_sink = [this](std::string_view line) {
        std::lock_guard lock(log_mu_);
        order_.push_back(request_id_in(line));
        lines_.emplace_back(line);
      };
      if (tweak) tweak(c);
    }));
  }
  // A completion with request id `id`, key `key` and class `priority`, from its own thread.
  std::thread send(std::string id, std::string key, std::string priority, int max_tokens,
                   std::atomic<unsigned>* status, bool stream = false) {
    const uint16_t port = gateway_->port();
    return std::thread([=] {
      http::SyncClient c("127.0.0.1", port);
      http::ClientRequest r{.method = http::Verb::post,
                            .target = "/v1/completions",
                            .body = completion("request " + id, max_tokens, stream)};
      r.headers = {{"authorization", "Bearer " + key},
                   {"x-request-id", id},
                   {"x-kvgate-priority", priority}};
      auto res = c.request(r);
      status->store(res.ok() ? res->status : 1);
    });
  }
  // Sends it and waits until it is queued (the queue then holds `queued`).
  std::thread send_queued(std::string id, std::string key, std::string priority, size_t queued,
                          std::atomic<unsigned>* status) {
    std::thread t = send(std::move(id), std::move(key), std::move(priority), 4, status);
    EXPECT_TRUE(wait_until(
        [&] {
          return metric_value(gateway_->metrics_text(), "kvgate_admission_queued") ==
                 static_cast<double>(queued);
        },
        5s));
    return t;
  }
  static std::string request_id_in(std::string_view line) {
    const size_t at = line.find("\"request_id\":\"");
    if (at == std::string_view::npos) return "";
    const size_t from = at + 14;
    return std::string(line.substr(from, line.find('"', from) - from));
  }
  std::vector<std::string> order() {
    std::lock_guard lock(log_mu_);
    return order_;
  }
  // The access log's line of request `id` ("" if none).
  std::string line_of(std::string_view id) {
    std::lock_guard lock(log_mu_);
    for (const std::string& l : lines_) {
      if (request_id_in(l) == id) return l;
    }
    return "";
  }

  std::string keys_ = (std::filesystem::temp_directory_path() /
                       ("kvgate-admission-keys-" + std::to_string(getpid()) + ".yaml"))
                          .string();
  std::mutex log_mu_;
  std::vector<std::string> order_;
  std::vector<std::string> lines_;
};

TEST_F(PriorityQueueTest, ABetterClassGoesFirstAndAFullQueueShedsTheWorst) {
  std::atomic<unsigned> st[6] = {};
  std::thread busy = start_busy(&st[0], [](GatewayConfig& c) { c.queue_size = 3; });
  std::vector<std::thread> t;
  t.push_back(send_queued("shed-1", "sk-x", "sheddable", 1, &st[1]));
  t.push_back(send_queued("std-1", "sk-x", "standard", 2, &st[2]));
  t.push_back(send_queued("shed-2", "sk-x", "sheddable", 3, &st[3]));
  // The queue is full: a critical request takes the newest sheddable one's place.
  t.push_back(send("crit-1", "sk-y", "critical", 4, &st[4]));
  ASSERT_TRUE(wait_until([&] { return st[3].load() != 0; }, 5s));
  EXPECT_EQ(st[3].load(), 429u) << "shed for the critical request";
  // Full again, and a sheddable one is refused at once.
  t.push_back(send("shed-3", "sk-x", "sheddable", 4, &st[5]));
  busy.join();
  for (auto& x : t) x.join();
  EXPECT_EQ(st[5].load(), 429u);
  for (int i : {0, 1, 2, 4}) EXPECT_EQ(st[i].load(), 200u) << i;
  ASSERT_TRUE(wait_until([&] { return order().size() >= 6; }, 5s));
  std::vector<std::string> ran;
  for (const std::string& id : order()) {
    if (id == "long" || id == "crit-1" || id == "std-1" || id == "shed-1") ran.push_back(id);
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"long", "crit-1", "std-1", "shed-1"}));
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(metric_value(m, "kvgate_admission_events_total{event=\"shed\"}"), 1);
  EXPECT_EQ(metric_value(m, "kvgate_admission_events_total{event=\"queued\"}"), 4)
      << "shed-1, std-1, shed-2 and crit-1 waited; shed-3 was refused at once";
  // Each admitted request's wait, by class: the refused ones are not among them.
  EXPECT_EQ(metric_value(m, "kvgate_admission_wait_seconds_count{class=\"critical\"}"), 1);
  EXPECT_EQ(metric_value(m, "kvgate_admission_wait_seconds_count{class=\"standard\"}"), 2);
  EXPECT_EQ(metric_value(m, "kvgate_admission_wait_seconds_count{class=\"sheddable\"}"), 1);
  EXPECT_GT(metric_value(m, "kvgate_admission_wait_seconds_sum{class=\"critical\"}"), 0);
  // The access log says how long each waited: crit-1 waited for the long request.
  EXPECT_NE(line_of("crit-1").find("\"queued_ms\":"), std::string::npos) << line_of("crit-1");
  EXPECT_EQ(line_of("shed-3").find("queued_ms"), std::string::npos) << line_of("shed-3");
}

TEST_F(PriorityQueueTest, WithinAClassTheTenantServedLeastGoesNext) {
  std::atomic<unsigned> st[5] = {};
  std::thread busy = start_busy(&st[0]);  // tenant x's long request: x has been served more
  std::vector<std::thread> t;
  t.push_back(send_queued("x-1", "sk-x", "standard", 1, &st[1]));
  t.push_back(send_queued("x-2", "sk-x", "standard", 2, &st[2]));
  t.push_back(send_queued("y-1", "sk-y", "standard", 3, &st[3]));
  busy.join();
  for (auto& x : t) x.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(st[i].load(), 200u) << i;
  ASSERT_TRUE(wait_until([&] { return order().size() >= 4; }, 5s));
  const std::vector<std::string> ran = order();
  // y arrived last but had received nothing: it goes right after x's long request.
  EXPECT_EQ(ran[0], "long");
  EXPECT_EQ(ran[1], "y-1");
}

// --worker-max-prefilling 1 on one worker: a prompt waits in the gateway's queue while another is
// prefilled there, and goes on at that one's first token, not at its end. The queue's order holds:
// tenant y, lifted to x's counter when it started waiting, goes before x's backlog.
TEST_F(PriorityQueueTest, WithPrefillsBoundedThePromptAfterGoesAtTheFirstToken) {
  start_logged(
      [](mock::FleetOptions& o) {
        o.engine.timing.prefill_tokens_per_s = 20;  // each prompt's prefill takes a few hundred ms
      },
      [](GatewayConfig& c) {
        c.max_concurrent_requests = 0;  // no bound on requests running: only on prefills
        c.cache_aware.overload.prefilling_requests = 1;
      });
  ASSERT_FALSE(HasFailure());
  std::atomic<unsigned> st[4] = {};
  // x's long stream: 150 tokens after its prefill, about a second.
  std::thread long_one = send("long", "sk-x", "standard", 150, &st[0], /*stream=*/true);
  ASSERT_TRUE(wait_until(
      [&] { return metric_value(gateway_->metrics_text(), "kvgate_admission_prefilling") == 1; },
      5s));
  std::vector<std::thread> t;
  t.push_back(send_queued("x-1", "sk-x", "standard", 1, &st[1]));
  t.push_back(send_queued("x-2", "sk-x", "standard", 2, &st[2]));
  t.push_back(send_queued("y-1", "sk-y", "standard", 3, &st[3]));
  for (auto& x : t) x.join();
  long_one.join();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(st[i].load(), 200u) << i;
  ASSERT_TRUE(wait_until([&] { return order().size() >= 4; }, 5s));
  const std::vector<std::string> ran = order();
  EXPECT_EQ(ran, (std::vector<std::string>{"y-1", "x-1", "x-2", "long"}))
      << "each waited for the prompt before it, not for the long answer";
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(metric_value(m, "kvgate_admission_prefilling"), 0);
  EXPECT_EQ(metric_value(m, "kvgate_admission_running"), 0);
}

// Two prefill places on one worker (--worker-max-prefilling 2), one reserved for critical: with a
// standard prompt prefilling, the next standard one waits although a place is free, and a
// critical one takes that place at once.
TEST_F(PriorityQueueTest, ReservedPrefillPlacesTakeOnlyCriticalRequests) {
  start_logged(
      [](mock::FleetOptions& o) {
        o.engine.timing.prefill_tokens_per_s = 2;  // each prompt prefills for a second or so
      },
      [](GatewayConfig& c) {
        c.max_concurrent_requests = 0;
        c.cache_aware.overload.prefilling_requests = 2;
        c.reserved_critical_prefills = 1;
        c.liveness.wedge = 0s;  // (silence that long would look like a wedged engine)
      });
  ASSERT_FALSE(HasFailure());
  const auto gauge = [&](const char* name) { return metric_value(gateway_->metrics_text(), name); };
  std::atomic<unsigned> st[3] = {};
  std::thread long_one = send("long", "sk-x", "standard", 4, &st[0], /*stream=*/true);
  ASSERT_TRUE(wait_until([&] { return gauge("kvgate_admission_prefilling") == 1; }, 5s));
  std::thread second = send_queued("std-2", "sk-x", "standard", 1, &st[1]);
  EXPECT_EQ(gauge("kvgate_admission_prefilling"), 1) << "the free place is critical's";
  std::thread crit = send("crit", "sk-y", "critical", 4, &st[2], /*stream=*/true);
  EXPECT_TRUE(wait_until([&] { return gauge("kvgate_admission_prefilling") == 2; }, 5s));
  EXPECT_EQ(gauge("kvgate_admission_queued"), 1) << "std-2 still waits for the long prompt";
  for (std::thread* t : {&long_one, &second, &crit}) t->join();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(st[i].load(), 200u) << i;
}

TEST_F(PriorityQueueTest, ReservedSlotsTakeOnlyCriticalRequests) {
  start_worker(/*speedup=*/1);
  std::ofstream(keys_) << "keys:\n  - {key: sk-x, tenant: x}\n";
  ASSERT_TRUE(start(0, [&](GatewayConfig& c) {
    c.max_concurrent_requests = 2;
    c.reserved_critical_slots = 1;
    c.queue_size = 4;
    c.queue_timeout = 60s;
    c.api_keys_file = keys_;
  }));
  std::atomic<unsigned> st[3] = {};
  std::thread a = send("std-long", "sk-x", "standard", 150, &st[0]);
  ASSERT_TRUE(wait_until(
      [&] { return metric_value(gateway_->metrics_text(), "kvgate_admission_running") == 1; }, 5s));
  // One slot left, reserved: a standard request waits, a critical one runs.
  std::thread b = send_queued("std-2", "sk-x", "standard", 1, &st[1]);
  std::thread c = send("crit", "sk-x", "critical", 4, &st[2]);
  c.join();
  EXPECT_EQ(st[2].load(), 200u);
  EXPECT_EQ(st[1].load(), 0u) << "the standard request still waits for the long one";
  a.join();
  b.join();
  EXPECT_EQ(st[0].load(), 200u);
  EXPECT_EQ(st[1].load(), 200u);
}

}  // namespace
}  // namespace kvgate::app
