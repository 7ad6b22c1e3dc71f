// A KV-event publisher for loopback tests: an engine's PUB socket (XPUB here, so the test can wait
// for the subscriber to join instead of guessing with a sleep) and its replay ROUTER, serving
// the last `window` batches in either reply shape. Publishing is from the test's thread; the
// replay socket is served by a thread of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kvgate/events/encode.h"

namespace kvgate::events::testing {

class TestPublisher {
 public:
  struct Options {
    size_t window = 10000;
    bool topic_in_replay = true;  // vLLM >= 0.26 reply shape ["", topic, seq, payload]
    bool serve_replay = true;     // false: a ROUTER that never answers
    std::string topic = "kv-events";
    WireFormat format = WireFormat::kVllmArray;
    // Where to bind (port 0: a free port the OS picks); a restarted engine binds the old ports.
    std::string endpoint = "tcp://127.0.0.1:*";
    std::string replay_endpoint = "tcp://127.0.0.1:*";
    int sndhwm = 1000;  // ZMQ's default; 0 queues a flood whole instead of dropping it
  };

  explicit TestPublisher(Options o)
      : o_(o),
        ctx_(1),
        pub_(ctx_, zmq::socket_type::xpub),
        router_(ctx_, zmq::socket_type::router) {
    pub_.set(zmq::sockopt::linger, 0);
    pub_.set(zmq::sockopt::sndhwm, o_.sndhwm);
    pub_.set(zmq::sockopt::xpub_verbose, 1);  // every subscription, also a re-subscription
    router_.set(zmq::sockopt::linger, 0);
    pub_.bind(o_.endpoint);
    router_.bind(o_.replay_endpoint);
    endpoint_ = pub_.get(zmq::sockopt::last_endpoint);
    replay_endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { serve(); });
  }
  ~TestPublisher() {
    stop_ = true;
    thread_.join();
  }

  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }

  // Waits (with a deadline) until a subscriber has subscribed to a topic that takes this
  // publisher's batches. Other subscriptions (a gateway also asks for pushed load records, whose
  // topic is its own) are skipped: left queued, one would answer a later wait for a subscriber
  // that has not joined yet.
  bool wait_subscriber(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    zmq::pollitem_t item{pub_.handle(), 0, ZMQ_POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      if (item.revents & ZMQ_POLLIN) {
        zmq::message_t m;
        if (pub_.recv(m, zmq::recv_flags::dontwait) && takes_batches(m)) return true;
      }
    }
    return false;
  }

  // A subscribe message ("\x01" + topic) whose topic prefixes the batches' topic, as ZMQ matches.
  bool takes_batches(const zmq::message_t& m) const {
    const std::string_view bytes(static_cast<const char*>(m.data()), m.size());
    return !bytes.empty() && bytes[0] == 1 &&
           std::string_view(o_.topic).starts_with(bytes.substr(1));
  }

  // Publishes the next batch; `deliver` false loses it on the wire (it still enters the replay
  // buffer, as when a subscriber's queue overflows). Returns its seq.
  uint64_t publish(const WireBatch& batch, bool deliver = true) {
    std::string payload;
    encode_batch(batch, o_.format, &payload);
    return publish_raw(payload, deliver);
  }
  uint64_t publish_raw(const std::string& payload, bool deliver = true) {
    const uint64_t seq = next_++;
    {
      std::lock_guard<std::mutex> l(mu_);
      buffer_.emplace_back(seq, payload);
      while (buffer_.size() > o_.window) buffer_.pop_front();
    }
    if (deliver) {
      const auto s = encode_seq(seq);
      std::vector<zmq::const_buffer> frames = {zmq::buffer(o_.topic), zmq::buffer(s),
                                               zmq::buffer(payload)};
      zmq::send_multipart(pub_, frames);
    }
    return seq;
  }
  // The engine process restarts: seq starts over, the replay buffer is empty.
  void restart() {
    next_ = 0;
    std::lock_guard<std::mutex> l(mu_);
    buffer_.clear();
  }
  uint64_t next_seq() const { return next_; }
  // The next batch's seq, as a publisher whose sequence jumps or goes back would number it (the
  // replay buffer is kept).
  void set_next_seq(uint64_t seq) { next_ = seq; }
  // While held, replay requests wait (so a test can decide what the buffer holds when served).
  void hold_replays(bool hold) { hold_ = hold; }
  int replay_requests() const { return replay_requests_.load(); }
  // When each replay request arrived.
  std::vector<std::chrono::steady_clock::time_point> replay_request_times() {
    std::lock_guard<std::mutex> l(mu_);
    return request_times_;
  }

 private:
  void serve() {
    zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
    while (!stop_) {
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (hold_) {  // checked after the poll too: a request may arrive while it waits
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> req;
      if (!zmq::recv_multipart(router_, std::back_inserter(req), zmq::recv_flags::dontwait)) {
        continue;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        request_times_.push_back(std::chrono::steady_clock::now());
      }
      ++replay_requests_;
      if (!o_.serve_replay || req.size() != 3) continue;
      const auto start = decode_seq(
          std::span<const uint8_t>(static_cast<const uint8_t*>(req[2].data()), req[2].size()));
      if (!start) continue;
      std::deque<std::pair<uint64_t, std::string>> copy;
      {
        std::lock_guard<std::mutex> l(mu_);
        copy = buffer_;
      }
      for (auto& [seq, payload] : copy) {
        if (seq < *start) continue;
        send_reply(req[0], seq, payload);
      }
      send_reply(req[0], kReplayEndSeq, "");
    }
  }
  void send_reply(const zmq::message_t& id, uint64_t seq, const std::string& payload) {
    const auto s = encode_seq(seq);
    std::vector<zmq::const_buffer> frames = {zmq::buffer(id.data(), id.size()), zmq::buffer("", 0)};
    if (o_.topic_in_replay) frames.push_back(zmq::buffer(o_.topic));
    frames.push_back(zmq::buffer(s));
    frames.push_back(zmq::buffer(payload));
    zmq::send_multipart(router_, frames);
  }

  Options o_;
  zmq::context_t ctx_;
  zmq::socket_t pub_;
  zmq::socket_t router_;
  std::string endpoint_, replay_endpoint_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> hold_{false};
  std::atomic<int> replay_requests_{0};
  uint64_t next_ = 0;
  std::mutex mu_;
  std::deque<std::pair<uint64_t, std::string>> buffer_;
  std::vector<std::chrono::steady_clock::time_point> request_times_;
};

}  // namespace kvgate::events::testing
