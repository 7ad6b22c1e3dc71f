// Pod: what the watcher keeps of a Kubernetes pod, read from the API's JSON (metadata, status).
#pragma once

#include <map>
#include <string>

namespace kvgate::kube {

struct Pod {
  std::string name;
  std::string namespace_name;
  std::string uid;
  std::string ip;                // status.podIP; empty until the pod is scheduled and started
  std::string resource_version;  // metadata.resourceVersion
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  bool running = false;   // status.phase == Running
  bool ready = false;     // the Ready condition's status is "True"
  bool deleting = false;  // metadata.deletionTimestamp is set: the pod is terminating

  // A worker to send requests to: Running, Ready, with an IP, and not being deleted (a
  // terminating pod can stay Ready for its grace period; new requests must not go there).
  bool serving() const { return running && ready && !ip.empty() && !deleting; }

  bool operator==(const Pod&) const = default;
};

}  // namespace kvgate::kube
