// Worker: the read-only routes (health, models, load report, server info, metrics)
// (detail/worker.h).
#include "mock/detail/worker.h"
#include "mock/detail/worker_parts.h"

#include "kvgate/core/json_writer.h"

namespace kvgate::mock::detail {
using http::Response;

Response Worker::health() const { return Response::text(200, ""); }

Response Worker::models() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("object", "list").key("data").begin_array();
  w.begin_object().member("id", options_.model).member("object", "model");
  w.member("created", int64_t{0}).member("owned_by", "kvgate-mock");
  w.member("root", options_.model).member("max_model_len", options_.engine.max_model_len);
  w.end_object().end_array().end_object();
  return Response::json(200, std::move(out));
}

// SGLang's /get_model_info.
Response Worker::model_info() const {
  std::string out;
  JsonWriter w(&out);
  w.begin_object().member("model_path", options_.model).member("tokenizer_path", options_.model);
  w.member("is_generation", true).key("preferred_sampling_params").null();
  w.member("weight_version", "default").end_object();
  return Response::json(200, std::move(out));
}

Response Worker::load_report() const {
  std::string out;
  JsonWriter w(&out);
  uint64_t running = 0, waiting = 0, used = 0, blocks = 0, queued = 0;
  std::vector<EngineLoad> loads;
  for (const auto& r : ranks_) {
    loads.push_back(rank_load(*r));
    const EngineLoad& l = loads.back();
    running += l.running;
    waiting += l.waiting;
    used += l.used_blocks;
    blocks += l.num_blocks;
    queued += l.queued_prefill_tokens;
  }
  w.begin_object().member("worker", options_.index);
  w.member("running", running).member("waiting", waiting);
  w.member("kv_usage", blocks ? double(used) / double(blocks) : 0.0);
  w.member("queued_prefill_tokens", queued);
  w.member("used_blocks", used).member("num_blocks", blocks);
  w.member("paused", paused_);
  w.key("ranks").begin_array();
  for (size_t i = 0; i < loads.size(); ++i) {
    const EngineLoad& l = loads[i];
    w.begin_object().member("dp_rank", i).member("running", l.running).member("waiting", l.waiting);
    w.member("kv_usage", l.kv_usage()).member("queued_prefill_tokens", l.queued_prefill_tokens);
    w.member("used_blocks", l.used_blocks).member("cached_blocks", l.cached_blocks);
    w.member("num_blocks", l.num_blocks).end_object();
  }
  w.end_array().end_object();
  return Response::json(200, std::move(out));
}

Response Worker::server_info() const {
  const EngineConfig& e = options_.engine;
  const bool sglang = hash_scheme_for(options_.wire) == HashScheme::kSglangSha256;
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  w.member("model_path", options_.model).member("served_model_name", options_.model);
  w.member("engine", sglang ? "sglang" : "vllm").member("version", "kvgate-mock");
  w.member("worker_index", options_.index).member("dp_size", options_.dp_size);
  w.member("page_size", e.block_size).member("block_size", e.block_size);
  w.member("num_gpu_blocks", e.num_blocks);
  w.member("max_total_num_tokens", uint64_t{e.num_blocks} * e.block_size);
  w.member("max_running_requests", e.max_num_seqs);
  w.member("max_num_batched_tokens", e.max_num_batched_tokens);
  w.member("context_length", e.max_model_len);
  w.member("enable_prefix_caching", e.enable_prefix_caching);
  // SGLang's server arguments for prefill/decode disaggregation ("null": not disaggregated).
  w.member("disaggregation_mode",
           options_.pd.role == PdRole::kRegular ? "null" : pd_role_name(options_.pd.role));
  if (bootstrap_) w.member("disaggregation_bootstrap_port", bootstrap_->port());
  // And vLLM's: the mock serves both protocols, so it says both (a gateway then goes by its flag).
  if (options_.pd.role != PdRole::kRegular) {
    w.key("kv_transfer_config").begin_object().member("kv_connector", "NixlConnector");
    w.member("kv_role", options_.pd.role == PdRole::kPrefill ? "kv_producer" : "kv_both");
    w.end_object();
  }
  const tokenizer::Tokenizer* model_tokenizer = tokenizer_->model();
  w.member("tokenizer", model_tokenizer != nullptr ? "model" : "kvgate-test-tokenizer");
  w.member("vocab_size", model_tokenizer != nullptr ? model_tokenizer->vocab_size() : e.vocab);
  w.member("kv_events_wire", events::wire_format_name(options_.wire));
  w.member("kv_events_hash", hash_scheme_name(e.hash_scheme));
  if (!sglang) w.member("prefix_caching_hash_algo", "sha256_cbor");
  w.member("router_hash_seed", e.router_hash_seed);
  w.member("kv_events_topic", options_.topic);
  w.member("kv_events_replay_shape",
           options_.replay_shape == ReplayShape::kWithTopic ? "topic" : "legacy");
  w.member("kv_events_buffer_steps", options_.replay_buffer_steps);
  // The engines' own config string, rank 0's endpoints (rank r adds its own offset).
  std::string config;
  JsonWriter cw(&config);
  cw.begin_object().member("publisher", "zmq").member("endpoint", options_.advertised[0].pub);
  if (!options_.advertised[0].replay.empty()) {
    cw.member("replay_endpoint", options_.advertised[0].replay);
  }
  cw.member("topic", options_.topic).member("buffer_steps", options_.replay_buffer_steps);
  cw.end_object();
  w.member("kv_events_config", config);
  w.key("kv_events_endpoints").begin_array();
  for (uint32_t r = 0; r < options_.dp_size; ++r) {
    const StreamEndpoints& ep = options_.advertised[r];
    w.begin_object().member("dp_rank", r).member("endpoint", ep.pub);
    w.key("replay_endpoint");
    if (ep.replay.empty()) {
      w.null();
    } else {
      w.value(ep.replay);
    }
    w.member("topic", options_.topic).end_object();
  }
  w.end_array();
  w.end_object();
  return Response::json(200, std::move(out));
}

Response Worker::metrics() {
  for (auto& rp : ranks_) {
    Rank& r = *rp;
    EngineLoad l = rank_load(r);
    r.running->Set(l.running);
    r.waiting->Set(l.waiting);
    r.kv_usage->Set(l.kv_usage());
    r.gpu_usage->Set(l.kv_usage());
    const EngineCounters& c = r.engine.counters();
    auto bump = [](metrics::Counter* m, uint64_t now, uint64_t& seen) {
      if (now > seen) m->Increment(double(now - seen));
      seen = now;
    };
    bump(r.queries, c.prefix_cache_queries, r.exported.prefix_cache_queries);
    bump(r.hits, c.prefix_cache_hits, r.exported.prefix_cache_hits);
    bump(r.preemptions, c.preemptions, r.exported.preemptions);
    bump(r.prompt_tokens, c.prompt_tokens, r.exported.prompt_tokens);
    bump(r.generation_tokens, c.generation_tokens, r.exported.generation_tokens);
    bump(r.success, c.finished_requests, r.exported.finished_requests);
    StreamStats s = hub_.stats(r.stream);
    bump(r.batches_sent, s.sent, r.exported_sent);
    bump(r.batches_dropped, s.dropped, r.exported_dropped);
  }
  return Response::text(200, metrics::text_exposition(*registry_),
                        "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace kvgate::mock::detail
