// PodWatcher: the pods of a namespace (or of all) that match a label selector, kept current from a
// Kubernetes API server, the way client-go's informers do it.
//
// It lists the pods, then watches from the list's resourceVersion with bookmarks on, one event a
// line (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) on a chunked HTTPS stream, each watch asking
// for watch_timeout. Then:
//   - a watch the server ends (its timeout) -> watch again at once from the last resourceVersion;
//   - 410 Gone, as the watch's HTTP status or as an ERROR event with code 410 (the server's history
//     no longer reaches back to that version) -> list again, then watch;
//   - no byte for quiet_timeout, not even a bookmark (a half-open connection, a stuck proxy) ->
//     the watch is renewed on a new connection, from the last resourceVersion;
//   - any other failure (connect, TLS, an HTTP error, a cut stream, 401) -> reconnect after a
//     backoff with full jitter (uniform in [0, min(backoff_max, backoff_min * 2^failures)]),
//     resuming from the last resourceVersion; a 401 also re-reads the token file.
// The token file is re-read whenever it changed (inode, size or mtime) before each request.
// Failures are counted by kind and logged at most once per 5 s.
//
// After each change (an event, or a batch of events that arrived together, and after each list)
// the handler gets every matching pod the watcher holds, serving or not, in no particular order;
// the caller decides which to route to (Pod::serving()). A pod whose labels stop matching the
// selector leaves the set. Pods are keyed by namespace and name.
//
// Threading: start() and stop() from one control thread, never from the io_context's thread.
// The watcher runs on `ctx`, and so does the handler; the caller runs `ctx`. stop() ends the
// watch and waits while `ctx` runs until the watcher is done: the handler is not called once
// stop() returned (if `ctx` has stopped, stop() returns at once and the watcher, should `ctx`
// run again, ends without calling the handler). stats() from any thread. The destructor stops;
// `ctx` must outlive the watcher. start() once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "boost/asio/io_context.hpp"
#include "kvgate/kube/api_server.h"
#include "kvgate/kube/pod.h"
#include "kvgate/kube/selector.h"

namespace kvgate::kube {

struct WatcherOptions {
  ApiServer server;
  std::string namespace_name;  // empty: every namespace
  Selector selector;
  std::chrono::seconds watch_timeout{300};  // timeoutSeconds asked of each watch
  // An API server sends a bookmark on an idle watch about once a minute (Kubernetes 1.27 and
  // later), so a watch silent for longer than this is taken for dead.
  std::chrono::milliseconds quiet_timeout{90'000};
  std::chrono::milliseconds backoff_min{200};
  std::chrono::milliseconds backoff_max{10'000};
  std::chrono::milliseconds connect_timeout{5'000};  // the TCP connection and TLS handshake
  std::chrono::milliseconds list_timeout{30'000};    // a whole list's answer
};

struct WatcherStats {
  uint64_t lists = 0;         // lists answered
  uint64_t watches = 0;       // watches answered with 200
  uint64_t relists_gone = 0;  // lists made again after 410 Gone
  uint64_t reconnects = 0;    // connections made after the first
  uint64_t events = 0;        // ADDED, MODIFIED and DELETED events applied
  uint64_t bookmarks = 0;
  uint64_t quiet_renewals = 0;    // watches renewed after quiet_timeout without a byte
  uint64_t token_reloads = 0;     // token file reads that found a new token
  uint64_t bad_events = 0;        // event lines skipped: not JSON, or not a pod
  uint64_t unauthorized = 0;      // 401 and 403 answers, and a token file that cannot be read
  uint64_t http_errors = 0;       // other unexpected statuses and ERROR events but 410
  uint64_t transport_errors = 0;  // connect, TLS, timeouts, cut streams
  bool connected = false;         // a watch is open
  std::string last_error;         // the last failure, "" if none yet
};

class PodWatcher {
 public:
  using Handler = std::function<void(const std::vector<Pod>&)>;

  PodWatcher(boost::asio::io_context& ctx, WatcherOptions options, Handler handler);
  ~PodWatcher();
  PodWatcher(const PodWatcher&) = delete;
  PodWatcher& operator=(const PodWatcher&) = delete;

  void start();
  void stop();
  WatcherStats stats() const;

  class Impl;

 private:
  boost::asio::io_context& ctx_;
  std::shared_ptr<Impl> impl_;
  bool started_ = false;
};

}  // namespace kvgate::kube
