#include "kube/requests.h"

namespace kvgate::kube::detail {

std::string query_escape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string pods_path(std::string_view namespace_name) {
  if (namespace_name.empty()) return "/api/v1/pods";
  return "/api/v1/namespaces/" + query_escape(namespace_name) + "/pods";
}

std::string list_target(std::string_view namespace_name, std::string_view selector) {
  std::string out = pods_path(namespace_name);
  if (!selector.empty()) out += "?labelSelector=" + query_escape(selector);
  return out;
}

std::string watch_target(std::string_view namespace_name, std::string_view selector,
                         std::string_view resource_version, std::chrono::seconds timeout) {
  std::string out = pods_path(namespace_name);
  out += "?watch=1&allowWatchBookmarks=true&resourceVersion=";
  out += query_escape(resource_version);
  out += "&timeoutSeconds=" + std::to_string(timeout.count());
  if (!selector.empty()) out += "&labelSelector=" + query_escape(selector);
  return out;
}

}  // namespace kvgate::kube::detail
