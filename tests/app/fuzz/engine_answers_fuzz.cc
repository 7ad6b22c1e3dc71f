// libFuzzer target for what the gateway reads from engines' answers (built only with
// KVGATE_BUILD_FUZZ, under ASan+UBSan): /v1/models, the server info (vLLM's cache config, SGLang's
// get_server_info), a pushed or polled load report, and vLLM's Prometheus /metrics. Run by
// tools/ci-extra/fuzz.sh with the seed corpus in engine_corpus/.
//
// The first byte picks the parser (its value modulo 4); the rest is the answer. An engine's bad
// answer may cost only that answer: beyond "no crash, no leak, no UB", every figure read must be
// one routing can use (a usage that is a number, ranks and endpoints within the bounds discovery
// sets).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kvgate/app/discovery.h"

namespace {

void check(const kvgate::workers::EngineLoad& l) {
  if (!std::isfinite(l.kv_usage)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: {
      const kvgate::app::ModelList m = kvgate::app::parse_models(body);
      if (m.models.size() > body.size()) std::abort();
      break;
    }
    case 1: {
      const kvgate::app::ServerInfo info = kvgate::app::parse_server_info(body, "10.0.0.7");
      if (info.dp_size < 1 || info.dp_size > 1024) std::abort();
      for (const auto& e : info.endpoints) {
        if (e.rank >= 1024) std::abort();
      }
      break;
    }
    case 2:
    case 3: {
      const kvgate::app::LoadReport r = data[0] % 4 == 2 ? kvgate::app::parse_load_report(body)
                                                         : kvgate::app::parse_vllm_metrics(body);
      check(r.total);
      for (const auto& [rank, load] : r.ranks) check(load);
      break;
    }
  }
  return 0;
}
