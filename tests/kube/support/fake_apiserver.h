// FakeApiServer: enough of a Kubernetes API server, over HTTPS, for pod watchers and kubectl.
//
// It holds pods in namespaces and a history of their changes, each change taking the next
// resourceVersion, and answers as the real server does:
//   GET /version, /api (APIVersions), /api/v1 (APIResourceList: pods), /apis (no groups);
//   GET /api/v1/namespaces/{ns}/pods and /api/v1/pods, with labelSelector: a PodList whose
//     metadata.resourceVersion is the newest; with watch=1 (or true): a chunked stream of
//     {"type":...,"object":...} lines. From resourceVersion R it replays the changes after R, then
//     follows; without R (or "0") it first sends every matching pod as ADDED. A pod whose labels
//     start or stop matching the selector arrives as ADDED or DELETED. A watch ends cleanly after
//     timeoutSeconds; with allowWatchBookmarks it gets a BOOKMARK every bookmark_interval.
//   A resourceVersion older than the compaction point is 410: an ERROR event with a Status of code
//     410, reason Expired (as the real server's watch cache answers), or with
//     gone_as_http_status the HTTP status itself.
//   Every route but /version needs "Authorization: Bearer <token>" (401 with a Status otherwise);
//     set_token() rotates it and the old one stops working (open watches go on, as they do).
// Faults for tests: quiet watches, ended watches, expired watches, a compacted history, and the
// server going down (every connection cut) and coming back on the same port.
//
// Its certificates (a CA and a server certificate for 127.0.0.1 and localhost) are made when it
// starts, in a temporary folder removed with it.
//
// Threading: every method from any thread; the server runs on a thread of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvgate::testing {

struct FakePod {
  std::string name;
  std::string namespace_name = "default";
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string phase = "Running";  // status.phase; "" leaves it out
  bool ready = true;              // the Ready condition
  std::string ip;                 // status.podIP; "" leaves it out
  bool deleting = false;          // metadata.deletionTimestamp
  // Set by the server.
  std::string uid;
  uint64_t resource_version = 0;
};

struct FakeApiServerOptions {
  std::string token = "fake-token";
  std::chrono::milliseconds bookmark_interval{0};  // 0: no bookmarks
  bool gone_as_http_status = false;
};

struct FakeApiServerStats {
  uint64_t requests = 0;
  uint64_t unauthorized = 0;  // 401s
  uint64_t lists = 0;
  uint64_t watches = 0;  // watches opened (200)
  uint64_t open_watches = 0;
  uint64_t gone = 0;  // 410s, as a status or an ERROR event
  uint64_t bookmarks = 0;
};

class FakeApiServer {
 public:
  explicit FakeApiServer(FakeApiServerOptions options = {});
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  uint16_t port() const;
  std::string url() const;  // https://127.0.0.1:PORT
  const std::string& ca_file() const;
  std::string token() const;
  // A kubeconfig for this server (its CA, the current token or `token`, `ns` as the context's
  // namespace), written to `path`.
  void write_kubeconfig(const std::string& path, const std::string& ns = "default",
                        std::optional<std::string> token = std::nullopt) const;

  // Pods. Every change takes the next resourceVersion and reaches the open watches.
  void apply(FakePod pod);  // creates the pod (a new uid) or replaces it (keeping its uid)
  // Changes the pod in place; false if there is none.
  bool update(const std::string& ns, const std::string& name,
              const std::function<void(FakePod&)>& change);
  bool remove(const std::string& ns, const std::string& name);
  std::optional<FakePod> pod(const std::string& ns, const std::string& name) const;
  std::vector<FakePod> pods(const std::string& ns = "") const;  // "" every namespace
  uint64_t resource_version() const;

  // Faults.
  void set_token(std::string token);
  void set_bookmark_interval(std::chrono::milliseconds every);
  void set_gone_as_http_status(bool on);
  void quiet_watches();   // the open watches send nothing more (events wait) until they end
  void end_watches();     // the open watches end cleanly, as at their timeout
  void expire_watches();  // compacts, then an ERROR 410 on every open watch, which ends
  void compact();         // a watch from a resourceVersion older than now gets 410
  void go_down();         // stops listening and cuts every connection (watches fail mid-stream)
  void come_up(bool compact_history);  // listens again on the same port
  void restart(bool compact_history) {
    go_down();
    come_up(compact_history);
  }

  FakeApiServerStats stats() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace kvgate::testing
