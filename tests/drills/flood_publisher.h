// FloodPublisher: a worker's KV-event publisher gone wrong, on real ZMQ sockets (an XPUB for the
// live stream and a replay ROUTER, on loopback), for the flood drill. It sends what a runaway or
// hostile publisher would: valid stores with hashes never seen before at a steady rate (vLLM's
// sha256_cbor, so the engine-hash check agrees with every one), a 100 MB frame now and then, and
// sequence numbers that keep jumping ahead and going back. Its replay socket serves the last
// `replay_window` messages, as an engine's does, and notes when each request came.
//
// Threading: construct, then start() from one thread; the flood runs on a thread of its own and
// the replay socket on another. stats() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

namespace kvgate::drills {

struct FloodPlan {
  double rate = 10'000;  // messages a second
  double seconds = 10;
  uint32_t blocks_per_message = 4;
  uint32_t block_size = 16;
  double big_frame_every_s = 2;  // a frame of big_frame_bytes, its seq the last one's again
  size_t big_frame_bytes = size_t{100} << 20;
  // From chaos_from_s on, one message every chaos_every_s whose seq jumps 1,000 ahead or goes 500
  // back, in turn (before it, the stores alone fill the flooded holder to its limit).
  double chaos_from_s = 5;
  double chaos_every_s = 0.01;
  size_t replay_window = 20'000;  // messages the replay socket serves
};

class FloodPublisher {
 public:
  explicit FloodPublisher(FloodPlan plan);
  ~FloodPublisher();
  FloodPublisher(const FloodPublisher&) = delete;
  FloodPublisher& operator=(const FloodPublisher&) = delete;

  std::string endpoint() const { return endpoint_; }
  std::string replay_endpoint() const { return replay_endpoint_; }
  // Waits until a subscriber has joined (the gateway's SUB socket), up to `timeout`.
  bool wait_subscriber(std::chrono::milliseconds timeout);

  // Builds every message of the plan (so the flood's rate is the sockets', not the hashing's).
  void prepare();
  // Floods on a thread of its own; wait() returns when the plan's time is over.
  void start();
  void wait();

  struct Stats {
    uint64_t messages = 0;    // stores sent
    uint64_t big_frames = 0;  // 100 MB frames sent
    uint64_t chaos = 0;       // messages whose seq jumped or went back
    double seconds = 0;       // how long the flood took
    std::vector<std::chrono::steady_clock::time_point> replay_requests;
  };
  Stats stats();

 private:
  void flood();
  void serve_replays();
  void send_store(size_t i);
  void send_big_frame();

  FloodPlan plan_;
  zmq::context_t ctx_{1};
  zmq::socket_t pub_{ctx_, zmq::socket_type::xpub};
  zmq::socket_t router_{ctx_, zmq::socket_type::router};
  std::string endpoint_, replay_endpoint_;
  std::vector<std::string> payloads_;
  std::string big_;  // the 100 MB frame, sent without a copy
  uint64_t next_seq_ = 0;
  uint64_t last_seq_ = 0;
  std::mutex mu_;
  std::deque<std::pair<uint64_t, const std::string*>> window_;  // guarded by mu_
  Stats stats_;                                                 // guarded by mu_
  std::atomic<bool> stop_{false};
  std::thread flood_thread_;
  std::thread replay_thread_;
};

}  // namespace kvgate::drills
