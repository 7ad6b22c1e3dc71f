// PublisherHub: the mock's KV-event transport. One thread owns every ZMQ socket of the process
// (a PUB and an optional replay ROUTER per engine rank), so no socket is ever touched from two
// threads, and engine threads hand it batches through a queue.
//
// Wire (docs/wire.md): live messages are [topic, seq (8 bytes BE), payload]. The replay
// socket keeps the last `buffer_steps` batches (dropped ones too: a batch dropped on the wire is
// still in the engine's buffer, which is what makes a gap recoverable) and answers a DEALER's
// ["", start_seq] with ["", topic, seq, payload] per buffered batch with seq >= start_seq (or
// ["", seq, payload] in the legacy shape), then the end marker (seq ff..ff, empty payload).
//
// Threading: add_stream() before start(); publish(), restart() and stats() from any thread. A
// stream's batches are sent in publish() order; a batch is held until its due time (the delay
// fault), and the ones behind it wait with it.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/core/clock.h"
#include "kvgate/core/result.h"
#include "kvgate/core/thread_annotations.h"

namespace kvgate::mock::detail {

enum class ReplayShape { kWithTopic, kLegacy };

struct StreamSpec {
  std::string pub_endpoint;                    // e.g. "tcp://127.0.0.1:5557" or "tcp://127.0.0.1:*"
  std::optional<std::string> replay_endpoint;  // none: no replay socket
  std::string topic;
  ReplayShape shape = ReplayShape::kWithTopic;
  size_t buffer_steps = 10'000;
};

struct StreamEndpoints {
  std::string pub;     // as bound, e.g. "tcp://127.0.0.1:40123"
  std::string replay;  // empty without a replay socket
  uint16_t pub_port = 0;
  uint16_t replay_port = 0;
};

struct StreamStats {
  uint64_t sent = 0;
  uint64_t dropped = 0;  // published with the drop fault: buffered, not sent
  uint64_t replay_requests = 0;
  uint64_t replayed_batches = 0;
  uint64_t restarts = 0;
  uint64_t bad_replay_requests = 0;
};

class PublisherHub {
 public:
  PublisherHub();
  ~PublisherHub();
  PublisherHub(const PublisherHub&) = delete;
  PublisherHub& operator=(const PublisherHub&) = delete;

  // Creates and binds a stream's sockets; returns its index.
  Result<size_t> add_stream(const StreamSpec& spec);
  StreamEndpoints endpoints(size_t stream) const;
  Status start();
  void stop();

  // Queues a batch. `drop`: buffer it for replay but do not send it (the drop fault).
  void publish(size_t stream, uint64_t seq, std::string payload, MonoTime due, bool drop);
  // Sends a pushed load record ([kLoadTopic, payload], events/load_record.h) at once: not
  // numbered, not kept for replay, not held by the delay fault (a load is news or nothing).
  void publish_load(size_t stream, std::string payload);
  // Simulates a publisher process restart: queued batches and the replay buffer are lost and the
  // sockets are closed and bound again on the same ports (subscribers reconnect).
  void restart(size_t stream);
  StreamStats stats(size_t stream) const;

 private:
  struct Stream;
  struct Command;
  void run();
  void service_replay(Stream& s);
  void send_due(Stream& s, MonoTime now);
  Status bind(Stream& s, bool rebind);
  void enqueue(Command c);

  void* ctx_ = nullptr;
  int wake_fd_ = -1;
  std::vector<std::unique_ptr<Stream>> streams_;  // fixed after start()
  mutable Mutex mu_;
  std::deque<Command> commands_ KVGATE_GUARDED_BY(mu_);
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace kvgate::mock::detail
