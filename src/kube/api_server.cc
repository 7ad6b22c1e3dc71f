#include "kvgate/kube/api_server.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>

#include "absl/strings/escaping.h"
#include "yaml-cpp/yaml.h"

namespace kvgate::kube {
namespace {

Result<uint16_t> parse_port(std::string_view text, const std::string& where) {
  uint32_t port = 0;
  if (text.empty() || text.size() > 5) {
    return absl::InvalidArgumentError(where + ": port \"" + std::string(text) + "\" is not a port");
  }
  for (char c : text) {
    if (c < '0' || c > '9') {
      return absl::InvalidArgumentError(where + ": port \"" + std::string(text) +
                                        "\" is not a port");
    }
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port == 0 || port > 65535) {
    return absl::InvalidArgumentError(where + ": port " + std::string(text) + " is out of range");
  }
  return static_cast<uint16_t>(port);
}

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string trimmed(std::string s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t start = 0;
  while (start < s.size() && space(s[start])) ++start;
  return s.substr(start);
}

// "https://host[:port][/]": the host (brackets off an IPv6 address) and port (443 by default).
Status parse_server_url(const std::string& url, const std::string& where, ApiServer* out) {
  constexpr std::string_view kScheme = "https://";
  if (url.rfind(kScheme, 0) != 0) {
    return absl::InvalidArgumentError(where + ": server \"" + url +
                                      "\" is not an https:// URL (only HTTPS is supported)");
  }
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos && rest.substr(slash) != "/") {
    return absl::InvalidArgumentError(where + ": server \"" + url +
                                      "\" has a path; only https://host[:port] is supported");
  }
  rest = rest.substr(0, slash);
  std::string_view host = rest;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(where + ": server \"" + url + "\" has an unclosed '['");
    }
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty())
    return absl::InvalidArgumentError(where + ": server \"" + url + "\" has no host");
  out->host = std::string(host);
  out->port = 443;
  if (!port.empty()) {
    Result<uint16_t> p = parse_port(port, where + ": server \"" + url + "\"");
    if (!p.ok()) return p.status();
    out->port = *p;
  }
  return Status();
}

}  // namespace

Result<ApiServer> in_cluster(const std::string& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (host == nullptr || *host == '\0') {
    return absl::FailedPreconditionError(
        "not running in a Kubernetes pod: KUBERNETES_SERVICE_HOST is not set");
  }
  ApiServer out;
  out.host = host;
  if (const char* port = std::getenv("KUBERNETES_SERVICE_PORT"); port != nullptr && *port) {
    Result<uint16_t> p = parse_port(port, "KUBERNETES_SERVICE_PORT");
    if (!p.ok()) return p.status();
    out.port = *p;
  }
  out.token_file = secrets_dir + "/token";
  out.ca_file = secrets_dir + "/ca.crt";
  for (const std::string& file : {out.token_file, out.ca_file}) {
    if (::access(file.c_str(), R_OK) != 0) {
      return absl::FailedPreconditionError("service account file " + file +
                                           " is missing or unreadable");
    }
  }
  if (std::optional<std::string> ns = read_text(secrets_dir + "/namespace")) {
    out.namespace_name = trimmed(*ns);
  }
  return out;
}

namespace {

// The entry of a named list (clusters, users, contexts) called `name`: its `field` map.
Result<YAML::Node> named_entry(const YAML::Node& root, const char* list, const char* field,
                               const std::string& name, const std::string& where) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence()) {
    for (const YAML::Node& entry : entries) {
      if (entry["name"] && entry["name"].as<std::string>() == name && entry[field]) {
        return entry[field];
      }
    }
  }
  return absl::NotFoundError(where + ": " + field + " \"" + name + "\" is not in " + list);
}

std::string text_of(const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

Status read_cluster(const YAML::Node& cluster, const std::string& where, const std::string& dir,
                    ApiServer* out) {
  const std::string server = text_of(cluster, "server");
  if (server.empty()) return absl::InvalidArgumentError(where + ": the cluster has no server");
  if (Status s = parse_server_url(server, where, out); !s.ok()) return s;
  out->insecure =
      cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>();
  if (const std::string data = text_of(cluster, "certificate-authority-data"); !data.empty()) {
    std::string pem;
    if (!absl::Base64Unescape(data, &pem)) {
      return absl::InvalidArgumentError(where +
                                        ": the cluster's certificate-authority-data is not base64");
    }
    out->ca_data = std::move(pem);
  } else if (std::string file = text_of(cluster, "certificate-authority"); !file.empty()) {
    if (std::filesystem::path(file).is_relative()) file = dir + "/" + file;
    out->ca_file = std::move(file);
  }
  return Status();
}

Status read_user(const YAML::Node& user, const std::string& where, const std::string& dir,
                 ApiServer* out) {
  out->token = text_of(user, "token");
  if (std::string file = text_of(user, "tokenFile"); !file.empty() && out->token.empty()) {
    if (std::filesystem::path(file).is_relative()) file = dir + "/" + file;
    out->token_file = std::move(file);
  }
  if (!out->token.empty() || !out->token_file.empty()) return Status();
  const char* how = user["exec"]            ? "an exec plugin"
                    : user["auth-provider"] ? "an auth-provider"
                    : user["client-certificate"] || user["client-certificate-data"]
                        ? "client certificates"
                        : nullptr;
  if (how != nullptr) {
    return absl::InvalidArgumentError(where + ": the user authenticates with " + how +
                                      ", which is not supported; give it a token or tokenFile");
  }
  return absl::InvalidArgumentError(where + ": the user has no token or tokenFile");
}

Result<ApiServer> read_kubeconfig(const YAML::Node& root, const std::string& path) {
  const std::string current = text_of(root, "current-context");
  if (current.empty())
    return absl::InvalidArgumentError("kubeconfig " + path + " has no current-context");
  const std::string where = "kubeconfig " + path + ", context \"" + current + "\"";
  Result<YAML::Node> context =
      named_entry(root, "contexts", "context", current, "kubeconfig " + path);
  if (!context.ok()) return context.status();
  const std::string cluster_name = text_of(*context, "cluster");
  const std::string user_name = text_of(*context, "user");
  if (cluster_name.empty()) return absl::InvalidArgumentError(where + " names no cluster");
  if (user_name.empty()) return absl::InvalidArgumentError(where + " names no user");
  Result<YAML::Node> cluster = named_entry(root, "clusters", "cluster", cluster_name, where);
  if (!cluster.ok()) return cluster.status();
  Result<YAML::Node> user = named_entry(root, "users", "user", user_name, where);
  if (!user.ok()) return user.status();
  ApiServer out;
  std::error_code ec;
  const std::string dir = std::filesystem::absolute(path, ec).parent_path().string();
  if (Status s = read_cluster(*cluster, where + ", cluster \"" + cluster_name + "\"", dir, &out);
      !s.ok()) {
    return s;
  }
  if (Status s = read_user(*user, where + ", user \"" + user_name + "\"", dir, &out); !s.ok()) {
    return s;
  }
  out.namespace_name = text_of(*context, "namespace");
  return out;
}

}  // namespace

Result<ApiServer> from_kubeconfig(const std::string& path) {
  // yaml-cpp reports with exceptions; none leaves this function.
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) return absl::InvalidArgumentError("kubeconfig " + path + " is not a map");
    return read_kubeconfig(root, path);
  } catch (const YAML::BadFile&) {
    return absl::NotFoundError("kubeconfig " + path + " cannot be read");
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError("kubeconfig " + path + ": " + e.what());
  }
}

}  // namespace kvgate::kube
