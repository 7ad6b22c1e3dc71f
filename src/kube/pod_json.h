// The API's JSON for pods, lists and watch events, read with simdjson's DOM parser. The parser is
// the caller's, reused from event to event: its buffers grow to the largest document once, so an
// event costs no allocation beyond the pod's own strings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"
#include "kvgate/kube/pod.h"
#include "simdjson.h"

namespace kvgate::kube::detail {

// A pod object (metadata, status) into `out`, which is reset first. Needs metadata.name; every
// other field may be missing (a pod just created has no IP, no phase, no conditions).
Status read_pod(simdjson::dom::element object, Pod* out);

// The same from JSON text (tests).
Result<Pod> parse_pod(std::string_view json);

struct PodList {
  std::string resource_version;  // metadata.resourceVersion: where a watch continues from
  std::vector<Pod> pods;
};

// A PodList's JSON. `json` is copied by simdjson when it lacks padding.
Result<PodList> parse_pod_list(simdjson::dom::parser& parser, std::string_view json);

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kAdded;
  Pod pod;                       // kAdded, kModified, kDeleted
  std::string resource_version;  // the object's (every type but kError)
  int64_t code = 0;              // kError: the Status object's code (410: history compacted)
  std::string message;           // kError: its reason and message
};

// One line of a watch stream. `data` must be followed by simdjson::SIMDJSON_PADDING readable
// bytes (the watcher's line buffer keeps that room). `out` is overwritten.
Status parse_watch_event(simdjson::dom::parser& parser, const char* data, size_t size,
                         WatchEvent* out);

}  // namespace kvgate::kube::detail
