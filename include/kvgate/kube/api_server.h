// ApiServer: where a Kubernetes API server is and how to authenticate to it, from the pod's own
// service account (in_cluster) or from a kubeconfig file (from_kubeconfig).
//
// Only bearer tokens authenticate (a service account's, a kubeconfig user's token or tokenFile);
// a kubeconfig user with client certificates or an exec plugin is refused with an error that
// says so. Threading: the functions read files and the environment; call them from one thread.
#pragma once

#include <cstdint>
#include <string>

#include "kvgate/core/result.h"

namespace kvgate::kube {

struct ApiServer {
  std::string host;  // a name or an IP address (IPv6 without brackets)
  uint16_t port = 443;
  // The server's certificate must chain to these PEM roots: a file, or the PEM text itself (a
  // kubeconfig's certificate-authority-data; used when set). Both empty: the system's roots.
  std::string ca_file;
  std::string ca_data;
  // A file holding the token, read again whenever it changes (projected service-account tokens
  // are rewritten before they expire) and after a 401; or, when no file is given, a fixed token.
  std::string token_file;
  std::string token;
  bool insecure = false;  // insecure-skip-tls-verify: the server's certificate is not checked
  // The namespace the credentials belong to (the service account's, or the kubeconfig context's);
  // empty if unknown. A default for what to watch, nothing more.
  std::string namespace_name;
};

// In a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, and the service account's token,
// ca.crt and namespace in `secrets_dir`. An error names the variable or file that is missing.
Result<ApiServer> in_cluster(
    const std::string& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// A kubeconfig file (YAML): the current context's cluster (server https://host[:port],
// certificate-authority (relative to the file's folder) or certificate-authority-data,
// insecure-skip-tls-verify) and user (token or tokenFile), and the context's namespace. An error
// names the file and the entry that is missing or unusable.
Result<ApiServer> from_kubeconfig(const std::string& path);

}  // namespace kvgate::kube
