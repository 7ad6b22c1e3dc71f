// Tenants by their keys (--api-keys-file): each key's tenant and class reach the access log, a
// key limited to some models gets OpenAI's 404 for another, and a key past its requests or tokens
// per minute gets 429 with Retry-After and OpenAI's x-ratelimit-* headers; a request's output
// tokens count against the next one. A reload reads the file again, keeps the buckets of keys
// whose limits stay, and a bad file keeps the old keys.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "app/cache_report.h"
#include "app/gateway_fixture.h"

namespace kvgate::app {
namespace {

class TenantsTest : public GatewayTest {
 protected:
  TenantsTest()
      : keys_path_((std::filesystem::temp_directory_path() /
                    ("kvgate-keys-" + std::to_string(getpid()) + ".yaml"))
                       .string()) {}
  ~TenantsTest() override { std::filesystem::remove(keys_path_); }

  void write_keys(const std::string& yaml) {
    std::ofstream(keys_path_ + ".tmp", std::ios::trunc) << yaml;
    std::filesystem::rename(keys_path_ + ".tmp", keys_path_);
  }
  // One worker behind a gateway reading the keys file, its access log (json) kept.
  bool start_with_keys(const std::string& yaml) {
    write_keys(yaml);
    return start(1, [&](GatewayConfig& c) {
      c.api_keys_file = keys_path_;
      c.access_log = "json";
      c.access_log_sink = [this](std::string_view line) {
        std::lock_guard lock(log_mu_);
        log_.append(line);
      };
    });
  }
  http::ClientResponse call(const std::string& key, const std::string& body,
                            const std::vector<http::Header>& extra = {}) {
    http::ClientRequest r{.method = http::Verb::post, .target = "/v1/completions", .body = body};
    r.headers.emplace_back("authorization", "Bearer " + key);
    r.headers.insert(r.headers.end(), extra.begin(), extra.end());
    auto res = client().request(r);
    EXPECT_TRUE(res.ok()) << res.status();
    return res.ok() ? *res : http::ClientResponse{};
  }
  std::string log() {
    std::lock_guard lock(log_mu_);
    return log_;
  }

  std::string keys_path_;
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(TenantsTest, EachKeyIsItsTenantWithItsClassAndModels) {
  ASSERT_TRUE(start_with_keys(R"(keys:
  - key: sk-team-a
    tenant: team-a
    priority: critical
  - key_sha256: 292d075b18c9240a48b848c521422c5f418f7dd16b5c66755fe58d0fb6a43e1f  # sha256("sk-team-b")
    tenant: team-b
  - key: sk-team-c
    tenant: team-c
    models: [another-model]
)"));
  EXPECT_EQ(call("sk-team-a", completion("hello")).status, 200u);
  EXPECT_EQ(call("sk-unknown", completion("hello")).status, 401u);
  EXPECT_EQ(call("sk-team-b", completion("hello")).status, 200u) << "found by its digest";
  const http::ClientResponse c = call("sk-team-c", completion("hello"));
  EXPECT_EQ(c.status, 404u) << c.body;
  EXPECT_NE(c.body.find("does not exist or you do not have access"), std::string::npos) << c.body;
  // The header's class wins over the key's.
  EXPECT_EQ(call("sk-team-a", completion("hello"), {{"x-smg-priority", "sheddable"}}).status, 200u);
  ASSERT_TRUE(kvgate::testing::wait_until(
      [&] { return log().find("\"priority\":\"sheddable\"") != std::string::npos; }));
  const std::string l = log();
  EXPECT_NE(l.find(R"("tenant":"team-a","priority":"critical")"), std::string::npos) << l;
  EXPECT_NE(l.find(R"("tenant":"team-a","priority":"sheddable")"), std::string::npos) << l;
  EXPECT_EQ(metric_value(gateway_->metrics_text(),
                         "kvgate_request_errors_total{reason=\"model_not_allowed\"}"),
            1);
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(metric_value(m, "kvgate_tenant_requests_total{class=\"critical\",tenant=\"team-a\"}"),
            1)
      << m;
  EXPECT_EQ(metric_value(m, "kvgate_tenant_requests_total{class=\"sheddable\",tenant=\"team-a\"}"),
            1);
  EXPECT_GT(metric_value(m, "kvgate_tenant_tokens_total{kind=\"output\",tenant=\"team-a\"}"), 0);
}

TEST_F(TenantsTest, TenantsPastTheSeriesLimitShareOther) {
  write_keys(
      "keys:\n  - {key: k1, tenant: t1}\n  - {key: k2, tenant: t2}\n"
      "  - {key: k3, tenant: t3}\n");
  ASSERT_TRUE(start(1, [&](GatewayConfig& c) {
    c.api_keys_file = keys_path_;
    c.tenant_series_limit = 2;
  }));
  for (const char* k : {"k1", "k2", "k3"}) EXPECT_EQ(call(k, completion("hello")).status, 200u);
  // A request is counted when it ends, which its client may see first.
  const auto counted = [&](const std::string& tenant) {
    return metric_value(
               gateway_->metrics_text(),
               "kvgate_tenant_requests_total{class=\"standard\",tenant=\"" + tenant + "\"}") == 1;
  };
  EXPECT_TRUE(kvgate::testing::wait_until([&] { return counted("t1") && counted("other"); }));
  const std::string m = gateway_->metrics_text();
  EXPECT_EQ(m.find("tenant=\"t3\""), std::string::npos) << m;
}

TEST_F(TenantsTest, AKeyPastItsRequestsPerMinuteGets429WithOpenAIsHeaders) {
  ASSERT_TRUE(
      start_with_keys("keys:\n  - {key: sk-a, tenant: a, rpm: 3}\n"
                      "  - {key: sk-b, tenant: b}\n"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(call("sk-a", completion("hello")).status, 200u);
  const http::ClientResponse r = call("sk-a", completion("hello"));
  ASSERT_EQ(r.status, 429u) << r.body;
  EXPECT_EQ(metric_value(gateway_->metrics_text(),
                         "kvgate_tenant_refusals_total{reason=\"rate_limited\",tenant=\"a\"}"),
            1);
  EXPECT_NE(r.body.find("Rate limit reached for requests"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("x-ratelimit-limit-requests"), "3");
  EXPECT_EQ(r.header("x-ratelimit-remaining-requests"), "0");
  // A third of a minute's allowance comes back every 20 s (less the time the calls took).
  const std::string reset(r.header("x-ratelimit-reset-requests"));
  ASSERT_EQ(reset.back(), 's') << reset;
  const int seconds = std::stoi(reset);
  EXPECT_GE(seconds, 1) << reset;
  EXPECT_LE(seconds, 20) << reset;
  EXPECT_EQ(r.header("retry-after"), std::to_string(seconds));
  // Another tenant is not held back.
  EXPECT_EQ(call("sk-b", completion("hello")).status, 200u);
}

TEST_F(TenantsTest, OutputTokensCountAgainstTheNextRequest) {
  // 100 tokens a minute: a 90-token answer and its prompt leave too little for the next prompt.
  ASSERT_TRUE(start_with_keys("keys:\n  - {key: sk-a, tenant: a, tpm: 100}\n"));
  const std::string prompt = "count to ten";
  const http::ClientResponse first = call("sk-a", completion(prompt, 90));
  ASSERT_EQ(first.status, 200u) << first.body;
  // Two prompts alone fit; with the first answer's tokens they do not.
  const uint64_t prompt_tokens = reported_count(first.body, "\"prompt_tokens\"").value_or(0);
  const uint64_t output_tokens = reported_count(first.body, "\"completion_tokens\"").value_or(0);
  ASSERT_GT(prompt_tokens, 0u) << first.body;
  ASSERT_LE(2 * prompt_tokens, 100u) << first.body;
  ASSERT_GT(2 * prompt_tokens + output_tokens, 100u) << first.body;
  const http::ClientResponse second = call("sk-a", completion(prompt, 90));
  ASSERT_EQ(second.status, 429u) << second.body;
  EXPECT_NE(second.body.find("Rate limit reached for tokens"), std::string::npos) << second.body;
  EXPECT_EQ(second.header("x-ratelimit-limit-tokens"), "100");
  EXPECT_LT(std::stoull(std::string(second.header("x-ratelimit-remaining-tokens"))), prompt_tokens);
  EXPECT_FALSE(second.header("retry-after").empty());
}

TEST_F(TenantsTest, AReloadReadsTheFileKeepsTheBucketsAndABadFileKeepsTheOldKeys) {
  ASSERT_TRUE(start_with_keys("keys:\n  - {key: sk-a, tenant: a, rpm: 2}\n"));
  gateway_->set_config_reader(
      [this]() -> Result<LoadedConfig> {
        LoadedConfig c;
        c.config.api_keys_file = keys_path_;
        c.config.worker_urls = {url_of(0)};
        return c;
      },
      {});
  EXPECT_EQ(call("sk-a", completion("hello")).status, 200u);
  EXPECT_EQ(call("sk-a", completion("hello")).status, 200u);
  write_keys("keys:\n  - {key: sk-a, tenant: a, rpm: 2}\n  - {key: sk-new, tenant: n}\n");
  ReloadOutcome out = gateway_->reload();
  ASSERT_TRUE(out.ok) << out.error;
  EXPECT_EQ(call("sk-new", completion("hello")).status, 200u);
  EXPECT_EQ(call("sk-a", completion("hello")).status, 429u) << "the reload reset sk-a's bucket";

  write_keys("keys:\n  - {key: sk-a, tenant: a, rpm: -1}\n");
  out = gateway_->reload();
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.error.find("keys[0]: rpm is not a positive count"), std::string::npos) << out.error;
  EXPECT_EQ(call("sk-new", completion("hello")).status, 200u) << "the old keys hold";
}

}  // namespace
}  // namespace kvgate::app
