// The generation stages one by one, on real parts and a sink that keeps what the client would be
// sent, without sockets: admit refuses while draining, a request loop and past the queue; parse
// refuses bodies, over-long prompts and unknown models; route prepares what the worker is sent
// and explains a decision only when asked; account writes one access-log line.
#include <gtest/gtest.h>

#include <future>
#include <span>
#include <string>
#include <vector>

#include "app/generation/stages.h"
#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/use_future.hpp"
#include "kvgate/http/response_sink.h"

namespace kvgate::app {
namespace {

namespace net = boost::asio;

// Keeps the answer a stage sends.
class KeptAnswer final : public http::ResponseSink {
 public:
  explicit KeptAnswer(net::io_context& ctx) : executor_(ctx.get_executor()) {}
  net::any_io_executor executor() const override { return executor_; }
  net::awaitable<Status> send(http::Response r) override {
    answer = std::move(r);
    co_return Status();
  }
  net::awaitable<Status> start(unsigned status, std::string_view,
                               std::span<const http::Header>) override {
    answer.status = status;
    co_return Status();
  }
  net::awaitable<Status> write(std::string_view data) override {
    answer.body.append(data);
    co_return Status();
  }
  net::awaitable<Status> finish() override { co_return Status(); }
  void watch(std::function<void()>) override {}
  void unwatch() override {}

  http::Response answer;
  std::string header(std::string_view name) const {
    for (const auto& [n, v] : answer.headers) {
      if (n == name) return v;
    }
    return {};
  }

 private:
  net::any_io_executor executor_;
};

class GenerationStages : public ::testing::Test {
 protected:
  GenerationStages()
      : workers_({}, Clock::real()),
        policy_(*policy::make_policy(policy::PolicyKind::kCacheAware, config_.cache_aware, {})),
        upstream_(io_, {}),
        routing_(config_, BlockHasher(config_.hash_seed)),
        metrics_(registry_, "cache_aware"),
        access_log_(AccessLogFormat::kText,
                    [this](std::string_view line) { lines_.emplace_back(line); }),
        admission_({.max_concurrent = 1, .queue_size = 0, .queue_timeout = {}}) {}

  GenerationParts parts(DecisionHeaders decisions = DecisionHeaders::kRequest) {
    return GenerationParts{.config = config_,
                           .clock = Clock::real(),
                           .instance_id = "gw-self",
                           .workers = workers_,
                           .policy = *policy_,
                           .upstream = upstream_,
                           .routing = routing_,
                           .tokenizers = tokenizers_,
                           .parse_context = ctx_,
                           .admission = admission_,
                           .access = access_,
                           .metrics = metrics_,
                           .access_log = access_log_,
                           .decision_headers = decisions,
                           .answers = nullptr,
                           .draining = draining_,
                           .shutting_down = shutting_down_,
                           .active = active_};
  }

  // Runs `stage` on this test's context to its end; its result.
  template <class T>
  T run(net::awaitable<T> stage) {
    auto done = net::co_spawn(ctx_, std::move(stage), net::use_future);
    ctx_.restart();
    ctx_.run();
    return done.get();
  }

  static http::Request request(std::string body, std::string_view target = "/v1/completions") {
    http::Request r;
    r.verb = http::Verb::post;
    r.request_target = std::string(target);
    r.payload = std::move(body);
    return r;
  }

  GatewayConfig config_;
  net::io_context ctx_;
  http::IoPool io_{1};
  workers::WorkerRegistry workers_;
  std::unique_ptr<policy::Policy> policy_;
  UpstreamPool upstream_;
  RoutingInput routing_;
  PromptTokenizers tokenizers_;
  metrics::Registry registry_;
  GatewayMetrics metrics_;
  std::vector<std::string> lines_;
  AccessLog access_log_;
  AdmissionGate admission_;
  AccessGuard access_{"", ""};
  std::atomic<bool> draining_{false};
  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> active_{0};
};

TEST_F(GenerationStages, AdmitRefusesWhileDrainingALoopAndPastTheQueue) {
  const GenerationParts p = parts();
  {
    draining_ = true;
    http::Request req = request("{}");
    KeptAnswer sink(ctx_);
    http::Responder res(sink);
    Generation g(ApiRoute::kCompletions, req, res, Clock::real().now());
    AdmissionGate::Ticket ticket;
    EXPECT_FALSE(run(admit(p, g, &ticket)));
    EXPECT_EQ(sink.answer.status, 503u);
    EXPECT_EQ(sink.header("retry-after"), "1");
    draining_ = false;
  }
  {
    http::Request req = request("{}");
    req.fields.add(kHopsHeader, "gw-other, gw-self");
    KeptAnswer sink(ctx_);
    http::Responder res(sink);
    Generation g(ApiRoute::kCompletions, req, res, Clock::real().now());
    AdmissionGate::Ticket ticket;
    EXPECT_FALSE(run(admit(p, g, &ticket)));
    EXPECT_EQ(sink.answer.status, 508u);
  }
  // One slot and no queue: the first is admitted and holds it, the second is refused.
  http::Request req = request("{}");
  KeptAnswer first_sink(ctx_), second_sink(ctx_);
  http::Responder first_res(first_sink), second_res(second_sink);
  Generation first(ApiRoute::kCompletions, req, first_res, Clock::real().now());
  Generation second(ApiRoute::kCompletions, req, second_res, Clock::real().now());
  AdmissionGate::Ticket held, refused;
  EXPECT_TRUE(run(admit(p, first, &held)));
  EXPECT_FALSE(run(admit(p, second, &refused)));
  EXPECT_EQ(second_sink.answer.status, 429u);
}

TEST_F(GenerationStages, ParseRefusesBadBodiesLongPromptsAndUnknownModels) {
  config_.max_model_len = 8;
  const GenerationParts p = parts();
  const auto status_of = [&](std::string body) {
    http::Request req = request(std::move(body));
    KeptAnswer sink(ctx_);
    http::Responder res(sink);
    Generation g(ApiRoute::kCompletions, req, res, Clock::real().now());
    const bool went_on = run(parse(p, g));
    return went_on ? 0u : sink.answer.status;
  };
  EXPECT_EQ(status_of("not json"), 400u);
  EXPECT_EQ(status_of(R"({"prompt":"one two three four five six seven eight nine ten"})"), 400u);
  EXPECT_EQ(status_of(R"({"prompt":"short"})"), 0u) << "no model is any model";
  // A fleet that says its models knows which exist.
  workers::WorkerInfo info;
  info.models = {"known"};
  info.discovered = true;
  ASSERT_TRUE(workers_.add("http://127.0.0.1:1", info).ok());
  EXPECT_EQ(status_of(R"({"model":"unknown","prompt":"short"})"), 404u);
  EXPECT_EQ(status_of(R"({"model":"known","prompt":"short"})"), 0u);
}

TEST_F(GenerationStages, RoutePreparesTheWorkersRequestAndExplainsOnlyWhenAsked) {
  const GenerationParts p = parts();
  for (const bool asked : {false, true}) {
    http::Request req = request(R"({"prompt":"route me","stream":true})");
    if (asked) req.fields.add(kExplainRequestHeader, "1");
    KeptAnswer sink(ctx_);
    http::Responder res(sink);
    Generation g(ApiRoute::kCompletions, req, res, Clock::real().now());
    g.request_id = "rid-1";
    g.explain = wants_decision(p.decision_headers, req.header(kExplainRequestHeader));
    ASSERT_TRUE(run(parse(p, g)));
    prepare_route(p, g);
    EXPECT_TRUE(g.strip_usage) << "a stream that did not ask for usage, under cache_aware";
    EXPECT_NE(g.upstream.body.find(R"("stream_options":{"include_usage":true})"),
              std::string::npos);
    ASSERT_GE(g.upstream.headers.size(), 4u);
    EXPECT_EQ(g.upstream.headers[0].first, "authorization");
    EXPECT_EQ(g.upstream.headers[2].second, "rid-1");
    EXPECT_EQ(g.upstream.headers.back().second, "gw-self") << "the hop list";
    const policy::Decision d = decide(p, g);
    EXPECT_LT(d.worker, 0) << "an empty fleet";
    EXPECT_TRUE(g.record.routed);
    EXPECT_EQ(g.decision.empty(), !asked);
  }
}

TEST_F(GenerationStages, AccountWritesOneAccessLogLine) {
  const GenerationParts p = parts();
  http::Request req = request("{}");
  KeptAnswer sink(ctx_);
  http::Responder res(sink);
  Generation g(ApiRoute::kCompletions, req, res, Clock::real().now());
  g.request_id = "rid-2";
  g.record = {.method = "POST", .path = req.path(), .request_id = g.request_id};
  http::Response answer = error_answer(p, ErrorReason::kNoWorker, 503, "none");
  run(reply(g, std::move(answer)));
  EXPECT_EQ(sink.header(std::string(kRequestIdHeader)), "rid-2");
  account(p, g);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("POST /v1/completions 503"), std::string::npos) << lines_[0];
  EXPECT_NE(lines_[0].find("id=rid-2"), std::string::npos) << lines_[0];
}

}  // namespace
}  // namespace kvgate::app

namespace kvgate::app {
namespace {

// The worker's body rewritten: members put first, the client's of the same names left out, every
// other member kept byte for byte (numbers, escapes, nested objects that reuse a dropped name).
TEST(WorkerExchange, WithMembersReplacesTopLevelMembersAndKeepsTheRestByteForByte) {
  const std::string body =
      R"({ "model":"m", "stream" : true,"temperature":0.20,"stop":["a\"b","\u00e9"],)"
      R"("extra":{"stream":1,"max_tokens":[1,2]}, "max_tokens":64 })";
  static constexpr std::string_view kDrop[] = {"stream", "max_tokens"};
  const auto out = with_members(body, R"("stream":false,"max_tokens":1)", kDrop);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, R"({"stream":false,"max_tokens":1,"model":"m","temperature":0.20,)"
                  R"("stop":["a\"b","\u00e9"],"extra":{"stream":1,"max_tokens":[1,2]}})");
  EXPECT_EQ(*with_members("{}", R"("a":1)"), R"({"a":1})");
  EXPECT_EQ(*with_members(R"( {"b":2})", R"("a":1)"), R"( {"a":1,"b":2})");
  EXPECT_FALSE(with_members("[1,2]", R"("a":1)"));
  EXPECT_FALSE(with_members("[1,2]", R"("a":1)", kDrop));
  EXPECT_FALSE(with_members("not json", R"("a":1)", kDrop));
}

}  // namespace
}  // namespace kvgate::app
