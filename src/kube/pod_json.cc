#include "kube/pod_json.h"

#include <utility>

namespace kvgate::kube::detail {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

Status bad(std::string_view what) { return absl::InvalidArgumentError(std::string(what)); }

// An optional member: absent or null leaves `*out` as it is.
bool member(object obj, std::string_view key, element* out) {
  return obj.at_key(key).get(*out) == simdjson::SUCCESS && !out->is_null();
}

Status read_string(object obj, std::string_view key, std::string* out, std::string_view where) {
  element e;
  if (!member(obj, key, &e)) return Status();
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) {
    return bad(std::string(where) + "." + std::string(key) + " is not a string");
  }
  out->assign(s);
  return Status();
}

Status read_map(object obj, std::string_view key, std::map<std::string, std::string>* out) {
  element e;
  if (!member(obj, key, &e)) return Status();
  object m;
  if (e.get(m) != simdjson::SUCCESS)
    return bad("metadata." + std::string(key) + " is not an object");
  for (auto [k, v] : m) {
    std::string_view value;
    if (v.get(value) != simdjson::SUCCESS) {
      return bad("metadata." + std::string(key) + "." + std::string(k) + " is not a string");
    }
    out->emplace(std::string(k), std::string(value));
  }
  return Status();
}

Status read_metadata(object metadata, Pod* out) {
  for (const auto& [key, field] :
       {std::pair{"name", &out->name}, std::pair{"namespace", &out->namespace_name},
        std::pair{"uid", &out->uid}, std::pair{"resourceVersion", &out->resource_version}}) {
    if (Status s = read_string(metadata, key, field, "metadata"); !s.ok()) return s;
  }
  if (out->name.empty()) return bad("metadata.name is missing");
  if (Status s = read_map(metadata, "labels", &out->labels); !s.ok()) return s;
  if (Status s = read_map(metadata, "annotations", &out->annotations); !s.ok()) return s;
  element deletion;
  out->deleting = member(metadata, "deletionTimestamp", &deletion);
  return Status();
}

// The Ready condition's status, from status.conditions[].
Status read_ready(object status, bool* ready) {
  element e;
  if (!member(status, "conditions", &e)) return Status();
  array conditions;
  if (e.get(conditions) != simdjson::SUCCESS) return bad("status.conditions is not an array");
  for (element c : conditions) {
    object condition;
    if (c.get(condition) != simdjson::SUCCESS) return bad("a status condition is not an object");
    std::string_view type;
    if (condition.at_key("type").get(type) != simdjson::SUCCESS || type != "Ready") continue;
    std::string_view value;
    *ready = condition.at_key("status").get(value) == simdjson::SUCCESS && value == "True";
  }
  return Status();
}

Status read_status(object status, Pod* out) {
  std::string phase;
  if (Status s = read_string(status, "phase", &phase, "status"); !s.ok()) return s;
  out->running = phase == "Running";
  if (Status s = read_string(status, "podIP", &out->ip, "status"); !s.ok()) return s;
  return read_ready(status, &out->ready);
}

}  // namespace

Status read_pod(element value, Pod* out) {
  *out = Pod{};
  object pod;
  if (value.get(pod) != simdjson::SUCCESS) return bad("the pod is not an object");
  element e;
  object metadata;
  if (!member(pod, "metadata", &e) || e.get(metadata) != simdjson::SUCCESS) {
    return bad("the pod has no metadata object");
  }
  if (Status s = read_metadata(metadata, out); !s.ok()) return s;
  object status;
  if (!member(pod, "status", &e)) return Status();  // not scheduled yet
  if (e.get(status) != simdjson::SUCCESS) return bad("the pod's status is not an object");
  return read_status(status, out);
}

Result<Pod> parse_pod(std::string_view json) {
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err != simdjson::SUCCESS) {
    return bad(std::string("not JSON: ") + simdjson::error_message(err));
  }
  Pod pod;
  if (Status s = read_pod(doc, &pod); !s.ok()) return s;
  return pod;
}

Result<PodList> parse_pod_list(simdjson::dom::parser& parser, std::string_view json) {
  element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err != simdjson::SUCCESS) {
    return bad(std::string("the pod list is not JSON: ") + simdjson::error_message(err));
  }
  PodList out;
  std::string_view rv;
  if (doc.at_pointer("/metadata/resourceVersion").get(rv) != simdjson::SUCCESS || rv.empty()) {
    return bad("the pod list has no metadata.resourceVersion");
  }
  out.resource_version.assign(rv);
  element items_value;
  array items;
  if (doc.at_key("items").get(items_value) == simdjson::SUCCESS && !items_value.is_null()) {
    if (items_value.get(items) != simdjson::SUCCESS)
      return bad("the pod list's items is not an array");
    for (element item : items) {
      Pod pod;
      if (Status s = read_pod(item, &pod); !s.ok()) {
        return bad("a pod in the list: " + std::string(message_of(s)));
      }
      out.pods.push_back(std::move(pod));
    }
  }
  return out;
}

namespace {

Result<WatchEvent::Type> event_type(std::string_view type) {
  if (type == "ADDED") return WatchEvent::Type::kAdded;
  if (type == "MODIFIED") return WatchEvent::Type::kModified;
  if (type == "DELETED") return WatchEvent::Type::kDeleted;
  if (type == "BOOKMARK") return WatchEvent::Type::kBookmark;
  if (type == "ERROR") return WatchEvent::Type::kError;
  return bad("unknown event type \"" + std::string(type) + "\"");
}

// An ERROR event's object: a Status (code, reason, message).
void read_error(element object_value, WatchEvent* out) {
  int64_t code = 0;
  if (object_value.at_key("code").get(code) == simdjson::SUCCESS) out->code = code;
  std::string_view reason, message;
  if (object_value.at_key("reason").get(reason) != simdjson::SUCCESS) reason = {};
  if (object_value.at_key("message").get(message) != simdjson::SUCCESS) message = {};
  out->message.assign(reason);
  if (!reason.empty() && !message.empty()) out->message += ": ";
  out->message.append(message);
}

}  // namespace

Status parse_watch_event(simdjson::dom::parser& parser, const char* data, size_t size,
                         WatchEvent* out) {
  element doc;
  if (auto err = parser.parse(data, size, false).get(doc); err != simdjson::SUCCESS) {
    return bad(std::string("not JSON: ") + simdjson::error_message(err));
  }
  std::string_view type_text;
  if (doc.at_key("type").get(type_text) != simdjson::SUCCESS) return bad("no event type");
  Result<WatchEvent::Type> type = event_type(type_text);
  if (!type.ok()) return type.status();
  out->type = *type;
  out->code = 0;
  out->message.clear();
  out->resource_version.clear();
  element object_value;
  if (doc.at_key("object").get(object_value) != simdjson::SUCCESS || !object_value.is_object()) {
    return bad("the event has no object");
  }
  if (out->type == WatchEvent::Type::kError) {
    read_error(object_value, out);
    return Status();
  }
  std::string_view rv;
  if (object_value.at_pointer("/metadata/resourceVersion").get(rv) == simdjson::SUCCESS) {
    out->resource_version.assign(rv);
  }
  if (out->type == WatchEvent::Type::kBookmark) return Status();
  return read_pod(object_value, &out->pod);
}

}  // namespace kvgate::kube::detail
