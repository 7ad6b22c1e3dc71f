// What the gateway reads from a worker's own documents: its models (/v1/models), its description
// and KV-event endpoints (/server_info, SGLang's /get_server_info) and its load (the mock's /load,
// vLLM's Prometheus /metrics). Public because `kvgate relay` (relayd) discovers its engines from
// the same /server_info. Pure parsing, no I/O: a document that is not what is expected yields
// empty fields, never an error (the worker is asked again later).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvgate/core/ids.h"
#include "kvgate/workers/load.h"
#include "kvgate/workers/worker.h"

namespace kvgate::app {

struct ModelList {
  std::vector<std::string> models;
  std::vector<std::string> lora_adapters;  // models whose `parent` names another model
  uint32_t max_model_len = 0;              // the longest `max_model_len` (0: none said)
  bool valid = false;                      // an OpenAI list with a `data` array
};
ModelList parse_models(std::string_view body);

struct ServerInfo {
  std::vector<workers::KvEndpoint> endpoints;  // host wildcards replaced by `host`
  uint32_t block_size = 0;
  uint32_t dp_size = 1;
  uint64_t kv_blocks = 0;  // the KV pool per rank, in blocks, as the engine says it (0: not said)
  // Prefill/decode disaggregation as the engine says it: SGLang's `disaggregation_mode` (its role)
  // and a prefill's `disaggregation_bootstrap_port`; vLLM's NixlConnector in its configuration
  // (`kv_transfer_config`, JSON or vLLM's text form).
  std::optional<workers::WorkerRole> pd_role;
  uint16_t bootstrap_port = 0;
  workers::PdWire pd_wire = workers::PdWire::kUnknown;
};
// vLLM-style `kv_events_endpoints` (one per rank), else SGLang's `kv_events_config` (a JSON string
// whose ports rank r offsets by r, for `dp_size` ranks).
ServerInfo parse_server_info(std::string_view body, const std::string& host);

// A load report: the engine's total and, where it says them, each data-parallel rank's.
struct LoadReport {
  bool found = false;
  workers::EngineLoad total;
  std::vector<std::pair<DpRank, workers::EngineLoad>> ranks;
};
// The mock's GET /load JSON (`running`, `waiting`, `kv_usage`, `queued_prefill_tokens`, `ranks`).
LoadReport parse_load_report(std::string_view body);
// vLLM's gauges in Prometheus text: num_requests_running / _waiting summed, KV-cache usage the
// largest (kv_cache_usage_perc, or the older gpu_cache_usage_perc), per rank by the `engine`
// label vLLM gives each data-parallel engine core.
LoadReport parse_vllm_metrics(std::string_view text);

}  // namespace kvgate::app
