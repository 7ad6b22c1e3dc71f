// The command line: SGLang model gateway launch lines parse (its names for kvgate's flags are
// aliases, its radix-tree knobs are accepted and ignored), and keys come from the environment.
#include "kvgate/app/config.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <functional>

#include <CLI/CLI.hpp>

#include "app/help_format.h"
#include "kvgate/events/ingest.h"

namespace kvgate::app {
namespace {

GatewayConfig parse(std::vector<std::string> args) {
  GatewayConfig c;
  CLI::App app;
  add_flags(app, c);
  std::vector<const char*> argv = {"kvgate"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(finish_config(c).ok());
  return c;
}

TEST(Config, SglangModelGatewayFlagNamesParse) {
  const GatewayConfig c = parse({"--retry-max-retries",
                                 "7",
                                 "--cb-failure-threshold",
                                 "9",
                                 "--cb-timeout-duration-secs",
                                 "12",
                                 "--log-json",
                                 "--api-key",
                                 "k",
                                 "--shutdown-grace-period-secs",
                                 "30",
                                 "--dp-aware",
                                 "--cache-threshold",
                                 "0.5",
                                 "--eviction-interval-secs",
                                 "60",
                                 "--max-tree-size",
                                 "1000000",
                                 "--cors-allowed-origins",
                                 "https://a.example,https://b.example",
                                 "http://c.example:8080",
                                 "--prometheus-port",
                                 "29000",
                                 "--prometheus-host",
                                 "127.0.0.1",
                                 "--log-dir",
                                 "/var/log/kvgate",
                                 "--max-concurrent-requests",
                                 "64",
                                 "--queue-size",
                                 "32",
                                 "--queue-timeout-secs",
                                 "2.5"});
  EXPECT_EQ(c.max_retries, 7u);
  EXPECT_EQ(c.breaker.consecutive_failures, 9u);
  EXPECT_EQ(c.breaker.open_for, std::chrono::seconds(12));
  EXPECT_EQ(c.log_format, "json");
  EXPECT_EQ(c.api_key, "k");
  EXPECT_EQ(c.shutdown_grace_period, std::chrono::seconds(30));
  EXPECT_TRUE(c.dp_aware);
  EXPECT_EQ(c.cors_allowed_origins,
            (std::vector<std::string>{"https://a.example", "https://b.example",
                                      "http://c.example:8080"}));
  EXPECT_EQ(c.prometheus_port, 29000);
  EXPECT_EQ(c.prometheus_host, "127.0.0.1");
  EXPECT_EQ(c.log_dir, "/var/log/kvgate");
  EXPECT_EQ(c.max_concurrent_requests, 64u);
  EXPECT_EQ(c.queue_size, 32u);
  EXPECT_EQ(c.queue_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.ignored_flags,
            (std::vector<std::string>{"--cache-threshold", "--eviction-interval-secs",
                                      "--max-tree-size"}));
}

TEST(Config, KeysComeFromTheEnvironment) {
  setenv("KVGATE_API_KEY", "from-env", 1);
  setenv("KVGATE_ADMIN_API_KEY", "admin-from-env", 1);
  const GatewayConfig c = parse({});
  unsetenv("KVGATE_API_KEY");
  unsetenv("KVGATE_ADMIN_API_KEY");
  EXPECT_EQ(c.api_key, "from-env");
  EXPECT_EQ(c.admin_api_key, "admin-from-env");
}

TEST(Config, ServingDefaults) {
  const GatewayConfig c = parse({});
  EXPECT_EQ(c.shutdown_grace_period, std::chrono::seconds(180));
  EXPECT_TRUE(c.api_key.empty());
  EXPECT_TRUE(c.ignored_flags.empty());
  EXPECT_EQ(c.max_concurrent_requests, 0u) << "no gateway-wide limit unless asked";
  EXPECT_EQ(c.queue_size, 100u);
  EXPECT_EQ(c.queue_timeout, std::chrono::seconds(60));
  EXPECT_EQ(c.access_log, "off");
  EXPECT_EQ(c.prometheus_port, 0);
}

TEST(Config, TierWeightsNameTheirTiers) {
  using W = std::array<double, index::kTierCount>;
  EXPECT_EQ(parse({}).cache_aware.tier_weights, (W{1, 0.8, 0.5, 0.3}));
  EXPECT_EQ(parse({"--tier-weights", "host=0.9,external=0"}).cache_aware.tier_weights,
            (W{1, 0.9, 0.5, 0}));
  EXPECT_EQ(parse({"--tier-weights", "off"}).cache_aware.tier_weights, (W{1, 1, 1, 1}));
  for (const char* bad : {"host", "gpu=1", "host=1.5", "disk=-0.1", "host=0.5x", "device=0.5"}) {
    EXPECT_THROW(parse({"--tier-weights", bad}), CLI::ValidationError) << bad;
  }
}

TEST(Config, HostilePeerBoundsHaveServingDefaultsAndFlags) {
  const GatewayConfig d = parse({});
  EXPECT_EQ(d.max_inflight_body_bytes, size_t{128} << 20);
  EXPECT_EQ(d.max_answer_bytes, uint64_t{64} << 20);
  EXPECT_EQ(d.grpc_max_message_bytes, size_t{4} << 20);
  EXPECT_EQ(d.grpc_memory_bytes, size_t{24} << 20);
  EXPECT_FALSE(d.tls_session_tickets);
  EXPECT_FALSE(d.forward_client_authorization);
  EXPECT_TRUE(d.worker_api_key.empty());
  EXPECT_EQ(d.client_read_timeout, std::chrono::seconds(60));
  EXPECT_EQ(d.client_idle_timeout, std::chrono::seconds(60));
  const GatewayConfig c = parse({"--max-answer-bytes", "1000", "--grpc-max-message-bytes", "65536",
                                 "--grpc-memory-bytes", "8388608", "--tls-session-tickets",
                                 "--forward-client-authorization", "--worker-api-key", "sk-w",
                                 "--client-read-timeout-secs", "5", "--client-write-timeout-secs",
                                 "6", "--client-idle-timeout-secs", "7.5"});
  EXPECT_EQ(c.max_answer_bytes, 1000u);
  EXPECT_EQ(c.grpc_max_message_bytes, 65536u);
  EXPECT_EQ(c.grpc_memory_bytes, 8388608u);
  EXPECT_TRUE(c.tls_session_tickets);
  EXPECT_TRUE(c.forward_client_authorization);
  EXPECT_EQ(c.worker_api_key, "sk-w");
  EXPECT_EQ(c.client_read_timeout, std::chrono::seconds(5));
  EXPECT_EQ(c.client_write_timeout, std::chrono::seconds(6));
  EXPECT_EQ(c.client_idle_timeout, std::chrono::milliseconds(7500));
  EXPECT_THROW(parse({"--client-idle-timeout-secs", "-1"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--max-answer-bytes", "0"}), CLI::ValidationError);
}

TEST(Config, AnUnknownFlagIsAnError) { EXPECT_THROW(parse({"--no-such-flag"}), CLI::ExtrasError); }

// Other routers' launch lines and slips of the keyboard: the message names the flag first, then
// what to use instead.
TEST(Config, AForeignOrMistypedFlagIsNamedFirstWithWhatToUseInstead) {
  struct Case {
    std::vector<std::string> args;
    std::string message_starts;
  };
  const std::vector<Case> cases = {
      {{"--prefil", "http://a:1", "8998"},
       "--prefil: not a kvgate flag; did you mean --prefill? (also unexpected: http://a:1 8998)"},
      {{"--worker-url", "http://a:1"},
       "--worker-url: not a kvgate flag; did you mean --worker-urls?"},
      {{"--service-discovery", "static", "--static-backends", "http://a:1"},
       "--static-backends: not a kvgate flag; give the workers as --worker-urls"},
      {{"--static-models", "m"}, "--static-models: not a kvgate flag; none is needed"},
      {{"--routing-logic", "prefixaware"},
       "--routing-logic: not a kvgate flag; use --policy: roundrobin is round_robin, session is "
       "consistent_hashing"},
      {{"--session-key", "x-user-id"},
       "--session-key: not a kvgate flag; use --policy consistent_hashing --routing-key-header"},
      {{"--request-id-headers", "x-trace-id"},
       "--request-id-headers: not a kvgate flag; kvgate takes a request's id from x-request-id"},
      {{"--zzzzzzzzzzzz"}, "--zzzzzzzzzzzz: not a kvgate flag (kvgate --help lists them)"},
      {{"stray"}, "'stray': a value no flag takes"},
      {{"--balance-abs-threshold", "-1"}, "--balance-abs-threshold"},
      {{"--balance-rel-threshold", "-0.5"}, "--balance-rel-threshold"},
  };
  for (const Case& c : cases) {
    const Result<LoadedConfig> got = load_config(c.args);
    ASSERT_FALSE(got.ok()) << c.args[0];
    EXPECT_EQ(std::string(got.status().message()).rfind(c.message_starts, 0), 0u)
        << got.status().message();
  }
}

TEST(Config, ForwardedHeadersAreNamedInLowerCaseAndNeverFramingOrCredentials) {
  EXPECT_EQ(parse({}).forward_headers, (std::vector<std::string>{"traceparent", "tracestate"}));
  EXPECT_EQ(parse({"--forward-headers", "X-Trace-Id", "OpenAI-Beta"}).forward_headers,
            (std::vector<std::string>{"x-trace-id", "openai-beta"}));
  EXPECT_TRUE(parse({"--forward-headers", "none"}).forward_headers.empty());
  for (const char* bad : {"Content-Length", "transfer-encoding", "authorization", "host",
                          "x-kvgate-hops", "proxy-connection", "bad header", "x:y"}) {
    EXPECT_THROW(parse({"--forward-headers", bad}), CLI::ValidationError) << bad;
  }
}

TEST(Config, SglangsTokenizerFlagNamesAreKvgatesTokenizer) {
  EXPECT_EQ(parse({"--tokenizer-path", "/models/a"}).tokenizers,
            std::vector<std::string>{"/models/a"});
  EXPECT_EQ(parse({"--model-path", "/models/b"}).tokenizers, std::vector<std::string>{"/models/b"});
}

TEST(Config, SglangsRelativeBalanceThresholdIsWarnedAboutOnlyWhenGiven) {
  const Result<LoadedConfig> given = load_config({"--balance-rel-threshold", "1.5"});
  ASSERT_TRUE(given.ok()) << given.status();
  ASSERT_EQ(given->config.launch_warnings.size(), 1u);
  EXPECT_EQ(given->config.launch_warnings[0].rfind("--balance-rel-threshold: ", 0), 0u)
      << "the flag named first";
  EXPECT_NE(given->config.launch_warnings[0].find("fleet mean"), std::string::npos);
  const Result<LoadedConfig> absent = load_config({});
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_TRUE(absent->config.launch_warnings.empty());
}

TEST(Config, AKvEventsRelayIsAGrpcAddress) {
  EXPECT_EQ(parse({}).kv_events_relay, "");
  EXPECT_EQ(parse({"--kv-events-relay", "grpc://relay-1:50051"}).kv_events_relay, "relay-1:50051");
  for (const char* bad : {"relay-1:50051", "http://relay-1:50051", "grpc://", "grpc://relay-1"}) {
    GatewayConfig c;
    CLI::App app;
    add_flags(app, c);
    std::vector<const char*> argv = {"kvgate", "--kv-events-relay", bad};
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
      ADD_FAILURE() << bad << " was accepted";
    } catch (const CLI::ValidationError& e) {
      EXPECT_NE(std::string(e.what()).find("grpc://HOST:PORT"), std::string::npos) << e.what();
    }
  }
}

TEST(Config, TlsFilesMustExistAndComeInPairs) {
  EXPECT_THROW(parse({"--tls-cert-path", "/nonexistent/cert.pem"}), CLI::ValidationError);
  {
    GatewayConfig c;
    c.tls_cert_path = "cert.pem";  // its key is missing
    const Status s = finish_config(c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.message()).find("--tls-cert-path needs --tls-key-path"),
              std::string::npos)
        << s;
  }
  {
    GatewayConfig c;
    c.tls_key_path = "key.pem";
    EXPECT_FALSE(finish_config(c).ok());
  }
}

// The SGLang model gateway's static prefill/decode line, as its users have it in their scripts.
TEST(Config, TheSglangPdLaunchLineParses) {
  const GatewayConfig c =
      parse({"--pd-disaggregation", "--prefill", "http://prefill-0:8000", "9001", "--prefill",
             "http://prefill-1:8000", "9002", "--prefill", "http://prefill-2:8000", "--decode",
             "http://decode-0:8000", "--decode", "http://decode-1:8000", "--prefill-policy",
             "cache_aware", "--decode-policy", "power_of_two"});
  EXPECT_TRUE(c.pd_disaggregation);
  ASSERT_EQ(c.prefill_workers.size(), 3u);
  EXPECT_EQ(c.prefill_workers[0].url, "http://prefill-0:8000");
  EXPECT_EQ(c.prefill_workers[0].bootstrap_port, 9001);
  EXPECT_EQ(c.prefill_workers[1].bootstrap_port, 9002);
  EXPECT_EQ(c.prefill_workers[2].bootstrap_port, 0) << "no port given";
  EXPECT_EQ(c.decode_workers,
            (std::vector<std::string>{"http://decode-0:8000", "http://decode-1:8000"}));
  EXPECT_EQ(c.prefill_policy, policy::PolicyKind::kCacheAware);
  EXPECT_EQ(c.decode_policy, policy::PolicyKind::kPowerOfTwo);
  EXPECT_FALSE(c.prefill_overload_waiting_requests) << "the prefill side's queue gate is off";
  EXPECT_EQ(parse({"--pd-disaggregation", "--prefill", "http://p:8000", "--decode", "http://d:8000",
                   "--prefill-overload-waiting-requests", "16"})
                .prefill_overload_waiting_requests,
            16u);
}

// vLLM router's launch line for a NixlConnector fleet, and kvgate's own spelling of it.
TEST(Config, TheVllmPdLaunchLineParses) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--vllm-pd-disaggregation", "--prefill", "http://p:8000", "--decode", "http://d:8000"},
           {"--pd-disaggregation", "--pd-protocol", "vllm", "--prefill", "http://p:8000",
            "--decode", "http://d:8000"}}) {
    const GatewayConfig c = parse(args);
    EXPECT_TRUE(c.pd_disaggregation);
    EXPECT_EQ(c.pd_protocol, GatewayConfig::PdProtocol::kVllm);
    ASSERT_EQ(c.prefill_workers.size(), 1u);
    EXPECT_EQ(c.prefill_workers[0].bootstrap_port, 0);
  }
  EXPECT_EQ(parse({"--pd-disaggregation"}).pd_protocol, GatewayConfig::PdProtocol::kSglang);
}

TEST(Config, PrefillAndDecodeFlagsSayWhatIsWrong) {
  const auto refused = [](std::vector<std::string> args) -> std::string {
    GatewayConfig c;
    CLI::App app;
    add_flags(app, c);
    std::vector<const char*> argv = {"kvgate"};
    for (const auto& a : args) argv.push_back(a.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    const Status s = finish_config(c);
    return s.ok() ? "" : std::string(s.message());
  };
  EXPECT_NE(refused({"--prefill", "http://p:8000"}).find("--pd-disaggregation"), std::string::npos);
  EXPECT_NE(refused({"--pd-disaggregation", "--prefill", "http://p:8000", "http"}).find("port"),
            std::string::npos);
  EXPECT_NE(refused({"--pd-disaggregation", "--worker-urls", "http://w:8000"}).find("--prefill"),
            std::string::npos);
  EXPECT_NE(refused({"--pd-disaggregation", "--decode-policy", "fastest"}), "");
  EXPECT_NE(refused({"--pd-disaggregation", "--pd-local-prefill-tokens", "64"})
                .find("--pd-protocol vllm"),
            std::string::npos);
  EXPECT_NE(refused({"--pd-disaggregation", "--pd-local-prefill-wait-ratio", "1"})
                .find("--pd-protocol vllm"),
            std::string::npos);
  EXPECT_EQ(refused({"--vllm-pd-disaggregation", "--pd-local-prefill-tokens", "64",
                     "--pd-local-prefill-share", "0.9", "--pd-local-prefill-wait-ratio", "1"}),
            "");
}

TEST(Config, TheRoutingKeyHeaderIsAHeaderNameThatVariesByCaller) {
  EXPECT_EQ(parse({"--routing-key-header", "x-session-id"}).routing_key_header, "x-session-id");
  EXPECT_EQ(parse({"--routing-key-header", "Authorization"}).routing_key_header, "Authorization");
  for (const char* refused :
       {"", "x session", "x-key:", "Content-Length", "host", "X-Request-Id"}) {
    SCOPED_TRACE(refused);
    GatewayConfig c;
    c.routing_key_header = refused;
    const Status s = finish_config(c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.message()).find("--routing-key-header"), std::string::npos) << s;
  }
}

TEST(Config, StateSyncDefaultsAndRefusals) {
  const GatewayConfig off = parse({});
  EXPECT_TRUE(off.state_sync_url.empty());
  const GatewayConfig on =
      parse({"--state-sync", "redis://10.0.0.7:6379", "--state-sync-period-secs", "0.5"});
  EXPECT_EQ(on.state_sync_namespace, "kvgate");
  EXPECT_EQ(on.state_sync_period, std::chrono::milliseconds(500));
  EXPECT_EQ(on.state_sync_ttl, std::chrono::milliseconds(1500));  // three periods
  const auto refusal = [](const std::function<void(GatewayConfig&)>& set) {
    GatewayConfig c;
    c.state_sync_url = "redis://10.0.0.7:6379";
    set(c);
    const Status s = finish_config(c);
    EXPECT_FALSE(s.ok());
    return std::string(s.message());
  };
  EXPECT_NE(refusal([](GatewayConfig& c) { c.state_sync_url = "redis://:1"; }).find("--state-sync"),
            std::string::npos);
  EXPECT_NE(refusal([](GatewayConfig& c) {
              c.state_sync_namespace = "a b";
            }).find("--state-sync-namespace"),
            std::string::npos);
  EXPECT_NE(refusal([](GatewayConfig& c) {
              c.state_sync_ttl = c.state_sync_period;
            }).find("--state-sync-ttl-secs"),
            std::string::npos);
}

TEST(Config, TheInFlightOverloadRuleIsOffUntilGivenACount) {
  EXPECT_FALSE(parse({}).cache_aware.overload.in_flight_requests.has_value());
  EXPECT_EQ(parse({"--worker-overload-in-flight", "300"}).cache_aware.overload.in_flight_requests,
            300u);
  EXPECT_THROW(parse({"--worker-overload-in-flight", "0"}), CLI::ValidationError);
}

TEST(Config, ReservedCriticalPrefillsNeedTheirPlaces) {
  GatewayConfig c;
  c.reserved_critical_prefills = 1;
  const Status s = finish_config(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("needs --worker-max-prefilling"), std::string::npos) << s;
  EXPECT_EQ(parse({"--reserved-critical-prefills", "1", "--worker-max-prefilling", "1"})
                .reserved_critical_prefills,
            1u);
}

TEST(Config, ThreadsArePinnedOnlyWhereTheLayoutAsksUnlessTold) {
  EXPECT_EQ(parse({}).pin_threads, "auto");
  EXPECT_EQ(parse({"--pin-threads", "on"}).pin_threads, "on");
  EXPECT_EQ(parse({"--pin-threads", "off"}).pin_threads, "off");
  EXPECT_EQ(parse({"--no-pin-threads"}).pin_threads, "off");
  EXPECT_THROW(parse({"--pin-threads", "always"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--pin-threads", "on", "--no-pin-threads"}), CLI::ExcludesError);
}

// The intake bounds' flags default to the event side's own defaults and reach its options.
TEST(Config, KvEventBoundsHaveServingDefaultsAndReachTheEventSide) {
  const GatewayConfig defaults = parse({});
  events::IngestOptions io;
  apply_kv_event_bounds(defaults.kv_event_bounds, io);
  const events::IngestOptions plain;
  EXPECT_EQ(io.subscription.bounds.live_hwm, plain.subscription.bounds.live_hwm);
  EXPECT_EQ(io.subscription.bounds.max_message_bytes, int64_t{16} << 20);
  EXPECT_EQ(io.subscription.bounds.replay_pacing.min_interval, std::chrono::milliseconds(100));
  EXPECT_EQ(io.capacity_margin, 2.0);
  EXPECT_EQ(io.subscription.limits.max_payload_bytes, size_t{16} << 20)
      << "nothing past the socket's limit reaches the decoder";
  const GatewayConfig c = parse({"--kv-events-rcvhwm",
                                 "500",
                                 "--kv-events-replay-rcvhwm",
                                 "20000",
                                 "--kv-events-max-message-bytes",
                                 "1048576",
                                 "--kv-events-turn-messages",
                                 "64",
                                 "--kv-events-turn-bytes",
                                 "65536",
                                 "--kv-events-replay-interval-secs",
                                 "0.25",
                                 "--kv-events-replay-backoff-max-secs",
                                 "10",
                                 "--kv-events-hash-quarantine-ratio",
                                 "0",
                                 "--kv-events-capacity-margin",
                                 "1.25",
                                 "--kv-events-max-holder-blocks",
                                 "65536",
                                 "--kv-events-lag-window-secs",
                                 "30"});
  apply_kv_event_bounds(c.kv_event_bounds, io);
  const events::IntakeBounds& b = io.subscription.bounds;
  EXPECT_EQ(b.live_hwm, 500);
  EXPECT_EQ(b.replay_hwm, 20000);
  EXPECT_EQ(b.max_message_bytes, 1 << 20);
  EXPECT_EQ(b.turn_messages, 64u);
  EXPECT_EQ(b.turn_bytes, 65536u);
  EXPECT_EQ(b.replay_pacing.min_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(b.replay_pacing.max_interval, std::chrono::seconds(10));
  EXPECT_EQ(b.quarantine.max_mismatch_ratio, 0.0);
  EXPECT_EQ(io.capacity_margin, 1.25);
  EXPECT_EQ(io.default_holder_blocks, 65536u);
  EXPECT_EQ(io.lag_window, std::chrono::seconds(30));
  EXPECT_THROW(parse({"--kv-events-capacity-margin", "0.5"}), CLI::ValidationError);
  EXPECT_THROW(parse({"--kv-events-rcvhwm", "0"}), CLI::ValidationError);
}

TEST(HelpWrap, BreaksAtSpacesKeepsLineBreaksAndCutsOnlyTooWideWords) {
  EXPECT_EQ(wrap_words("one two three four", 9), "one two\nthree\nfour");
  EXPECT_EQ(wrap_words("a\n\nb c", 80), "a\n\nb c");
  // A spec wider than a line is cut after a ',' or '[', with no space put into it.
  EXPECT_EQ(wrap_words("see tcp://H:P[,replay=tcp://H:P][,topic=T] here", 20),
            "see tcp://H:P[,\nreplay=tcp://H:P][,\ntopic=T] here");
  // A word wider than a line with nowhere to cut stays whole.
  EXPECT_EQ(wrap_words("x abcdefghijklmnop y", 5), "x\nabcdefghijklmnop\ny");
}

}  // namespace
}  // namespace kvgate::app
