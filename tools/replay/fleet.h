// The fleet behind the replay's target, through its HTTP APIs (blocking calls, control path only):
//
//   discover()        the gateway's GET /workers (URLs, block size, KV event endpoints), or, when
//                     the target is a worker (no /workers route), the target's GET /server_info
//   describe_worker() a worker's GET /server_info
//   fetch_records()   a mock worker's GET /admin/requests, paged: its per-request records,
//                     with `oracle_tokens` when the mock reports it
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "replay/oracle.h"

namespace kvgate::replay {

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};
// "http://HOST:PORT" with an optional trailing path ("/" or "/v1"): the path is ignored. HOST may
// be a name, an IPv4 address or a bracketed IPv6 address.
Result<Endpoint> parse_http_url(std::string_view url);
// "http://HOST:PORT" without a trailing slash (how the gateway names workers).
std::string canonical_url(std::string_view url);

struct FleetWorker {
  std::string url;
  uint32_t block_size = 0;  // 0: not reported
  std::string role;         // the gateway's: regular, prefill or decode ("" from a worker itself)
  std::vector<KvStream> streams;
};

struct Fleet {
  bool through_gateway = false;  // the target answered GET /workers
  std::vector<FleetWorker> workers;
};

Result<Fleet> discover(std::string_view target_url);
Result<FleetWorker> describe_worker(std::string_view url);

struct MockRecord {
  std::string id;
  std::string request_id;  // the x-request-id the worker received ("" when none)
  std::string status;      // finished / aborted
  uint64_t prompt_tokens = 0;
  uint64_t cached_tokens = 0;
  uint64_t output_tokens = 0;
  std::optional<uint64_t> oracle_tokens;
};
Result<std::vector<MockRecord>> fetch_records(std::string_view worker_url);

}  // namespace kvgate::replay
