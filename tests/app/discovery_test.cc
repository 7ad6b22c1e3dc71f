// The worker documents the gateway reads, shaped as the engines write them: vLLM's /v1/models and
// Prometheus /metrics (one engine label per data-parallel engine core), SGLang's /get_server_info
// with its kv_events_config string and dp_size, and the mock's /server_info and /load.
#include "kvgate/app/discovery.h"

#include <gtest/gtest.h>

namespace kvgate::app {
namespace {

TEST(Discovery, ModelsWithContextLengthsAndLoraAdapters) {
  // vLLM's OpenAI server: a base model and a LoRA adapter served on top of it.
  const ModelList m = parse_models(R"({"object":"list","data":[
    {"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model","created":1733000000,
     "owned_by":"vllm","root":"meta-llama/Llama-3.1-8B-Instruct","parent":null,
     "max_model_len":131072,"permission":[]},
    {"id":"sql-lora","object":"model","created":1733000000,"owned_by":"vllm",
     "root":"/adapters/sql","parent":"meta-llama/Llama-3.1-8B-Instruct","max_model_len":131072}
  ]})");
  ASSERT_TRUE(m.valid);
  EXPECT_EQ(m.models, (std::vector<std::string>{"meta-llama/Llama-3.1-8B-Instruct", "sql-lora"}));
  EXPECT_EQ(m.lora_adapters, std::vector<std::string>{"sql-lora"});
  EXPECT_EQ(m.max_model_len, 131072u);
  EXPECT_FALSE(parse_models("<html>not json</html>").valid);
  EXPECT_EQ(parse_models(R"({"data":[{"id":"m"}]})").max_model_len, 0u);
}

TEST(Discovery, SglangServerInfoWithTwoDataParallelRanks) {
  // SGLang's /get_server_info: server args (kv_events_config is a JSON string) plus state.
  const ServerInfo si = parse_server_info(
      R"({"model_path":"Qwen/Qwen2.5-7B-Instruct","tp_size":1,"dp_size":2,"page_size":16,
          "kv_events_config":"{\"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5600\", \"topic\": \"kv\"}",
          "max_total_num_tokens":462000,"version":"0.4.9"})",
      "10.0.0.7");
  EXPECT_EQ(si.dp_size, 2u);
  EXPECT_EQ(si.block_size, 16u);
  EXPECT_EQ(si.kv_blocks, 462000u / 16);
  ASSERT_EQ(si.endpoints.size(), 2u);
  EXPECT_EQ(si.endpoints[0].rank, 0u);
  EXPECT_EQ(si.endpoints[0].publisher, "tcp://10.0.0.7:5557");
  EXPECT_EQ(si.endpoints[0].replay, "tcp://10.0.0.7:5600");
  EXPECT_EQ(si.endpoints[0].topic, "kv");
  EXPECT_EQ(si.endpoints[1].rank, 1u);
  EXPECT_EQ(si.endpoints[1].publisher, "tcp://10.0.0.7:5558");  // rank r: base port + r
  EXPECT_EQ(si.endpoints[1].replay, "tcp://10.0.0.7:5601");
}

TEST(Discovery, ServerInfoSaysWhichDisaggregationProtocolAndRole) {
  using workers::PdWire;
  using workers::WorkerRole;
  const ServerInfo prefill = parse_server_info(
      R"({"disaggregation_mode":"prefill","disaggregation_bootstrap_port":8998,"page_size":16})",
      "h");
  EXPECT_EQ(prefill.pd_wire, PdWire::kSglang);
  EXPECT_EQ(prefill.pd_role, WorkerRole::kPrefill);
  EXPECT_EQ(prefill.bootstrap_port, 8998u);
  const ServerInfo decode = parse_server_info(
      R"({"disaggregation_mode":"decode","disaggregation_bootstrap_port":8998})", "h");
  EXPECT_EQ(decode.pd_role, WorkerRole::kDecode);
  EXPECT_EQ(decode.bootstrap_port, 0u) << "a bootstrap port is a prefill's";
  const ServerInfo regular = parse_server_info(R"({"disaggregation_mode":"null"})", "h");
  EXPECT_EQ(regular.pd_wire, PdWire::kUnknown);
  EXPECT_FALSE(regular.pd_role.has_value());
  // vLLM's configuration, as JSON (?config_format=json) and in its text form.
  EXPECT_EQ(parse_server_info(
                R"({"vllm_config":{"kv_transfer_config":{"kv_connector": "NixlConnector"}}})", "h")
                .pd_wire,
            PdWire::kVllm);
  EXPECT_EQ(
      parse_server_info(
          R"x({"vllm_config":"model_config=..., kv_transfer_config=KVTransferConfig(kv_connector='NixlConnector', kv_role='kv_both')"})x",
          "h")
          .pd_wire,
      PdWire::kVllm);
  // Both at once (kvgate-mock serves both): the fleet's flag decides.
  const ServerInfo both = parse_server_info(
      R"({"disaggregation_mode":"decode","kv_transfer_config":{"kv_connector":"NixlConnector"}})",
      "h");
  EXPECT_EQ(both.pd_wire, PdWire::kUnknown);
  EXPECT_EQ(both.pd_role, WorkerRole::kDecode);
}

TEST(Discovery, ServerInfoWithExplicitEndpointsPerRank) {
  const ServerInfo si = parse_server_info(
      R"({"dp_size":2,"block_size":16,"num_gpu_blocks":26000,"kv_events_endpoints":[
          {"dp_rank":0,"endpoint":"tcp://0.0.0.0:7000","replay_endpoint":"tcp://0.0.0.0:7001"},
          {"dp_rank":1,"endpoint":"tcp://0.0.0.0:7002","replay_endpoint":"tcp://0.0.0.0:7003",
           "topic":"t"}]})",
      "engine-3");
  EXPECT_EQ(si.dp_size, 2u);
  EXPECT_EQ(si.kv_blocks, 26000u);
  ASSERT_EQ(si.endpoints.size(), 2u);
  EXPECT_EQ(si.endpoints[1].rank, 1u);
  EXPECT_EQ(si.endpoints[1].publisher, "tcp://engine-3:7002");
  EXPECT_EQ(si.endpoints[1].topic, "t");
  EXPECT_TRUE(parse_server_info("{}", "h").endpoints.empty());
  EXPECT_EQ(parse_server_info("{}", "h").dp_size, 1u);
  // A rank past any real data-parallel size costs only that endpoint (each rank is a candidate in
  // every routing decision).
  const ServerInfo huge = parse_server_info(
      R"({"dp_size":4000000,"kv_events_endpoints":[{"dp_rank":4000000,"endpoint":"tcp://h:1"},
          {"dp_rank":0,"endpoint":"tcp://h:2"}]})",
      "h");
  EXPECT_EQ(huge.dp_size, 1u);
  ASSERT_EQ(huge.endpoints.size(), 1u);
  EXPECT_EQ(huge.endpoints[0].publisher, "tcp://h:2");
}

TEST(Discovery, VllmMetricsPerEngineCore) {
  // vLLM V1 with --data-parallel-size 2: one engine label per engine core.
  const LoadReport r = parse_vllm_metrics(
      "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
      "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 5.0\n"
      "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
      "# TYPE vllm:num_requests_waiting gauge\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n"
      "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 2.0\n"
      "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
      "# TYPE vllm:kv_cache_usage_perc gauge\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.5 1733000000000\n"
      "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 123456.0\n");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.total.running, 8u);
  EXPECT_EQ(r.total.waiting, 2u);
  EXPECT_DOUBLE_EQ(r.total.kv_usage, 0.5);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[0].first, 0u);
  EXPECT_EQ(r.ranks[0].second.running, 3u);
  EXPECT_DOUBLE_EQ(r.ranks[0].second.kv_usage, 0.25);
  EXPECT_EQ(r.ranks[1].second.running, 5u);
  EXPECT_EQ(r.ranks[1].second.waiting, 2u);
  EXPECT_DOUBLE_EQ(r.ranks[1].second.kv_usage, 0.5) << "a timestamp after the value is not it";
}

TEST(Discovery, OlderVllmMetricsWithoutEngineLabels) {
  const LoadReport r = parse_vllm_metrics(
      "vllm:num_requests_running{model_name=\"m\"} 2.0\n"
      "vllm:num_requests_waiting{model_name=\"m\"} 1.0\n"
      "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.75\n");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.total.running, 2u);
  EXPECT_EQ(r.total.waiting, 1u);
  EXPECT_DOUBLE_EQ(r.total.kv_usage, 0.75);
  EXPECT_TRUE(r.ranks.empty());
  EXPECT_FALSE(parse_vllm_metrics("process_cpu_seconds_total 12.5\n").found);
}

// An engine's bad figures cost only themselves (each once undefined behaviour: a value past
// uint32_t cast to it, a port offset past int).
TEST(Discovery, ValuesNoGaugeCanHoldAreSkippedOrSaturate) {
  const LoadReport r = parse_vllm_metrics(
      "vllm:num_requests_running{engine=\"0\"} NaN\n"
      "vllm:num_requests_running{engine=\"0\"} -4\n"
      "vllm:num_requests_running{engine=\"0\"} +Inf\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} NaN\n"
      "vllm:num_requests_waiting{engine=\"0\"} 5.5e+25\n"
      "vllm:num_requests_waiting{engine=\"1\"} 3\n");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.total.running, 0u);
  EXPECT_DOUBLE_EQ(r.total.kv_usage, 0.0);
  EXPECT_EQ(r.total.waiting, UINT32_MAX) << "saturates, and stays so with more added";
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].second.waiting, 3u);

  const ServerInfo info = parse_server_info(
      R"({"page_size":16,"dp_size":2,"kv_events_config":"{\"endpoint\":\"tcp://*:65535\"}"})",
      "10.0.0.7");
  ASSERT_EQ(info.endpoints.size(), 2u);
  EXPECT_EQ(info.endpoints[0].publisher, "tcp://10.0.0.7:65535");
  EXPECT_EQ(info.endpoints[1].publisher, "tcp://10.0.0.7:65535") << "no port past 65535";
}

TEST(Discovery, MockLoadReportPerRank) {
  const LoadReport r = parse_load_report(
      R"({"worker":0,"running":4,"waiting":1,"kv_usage":0.5,"queued_prefill_tokens":900,
          "ranks":[{"dp_rank":0,"running":1,"waiting":0,"kv_usage":0.25,"queued_prefill_tokens":0},
                   {"dp_rank":1,"running":3,"waiting":1,"kv_usage":0.75,
                    "queued_prefill_tokens":900}]})");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.total.running, 4u);
  EXPECT_EQ(r.total.queued_prefill_tokens, 900u);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.ranks[1].first, 1u);
  EXPECT_EQ(r.ranks[1].second.running, 3u);
  EXPECT_DOUBLE_EQ(r.ranks[1].second.kv_usage, 0.75);
  EXPECT_FALSE(parse_load_report("not json").found);
}

}  // namespace
}  // namespace kvgate::app
