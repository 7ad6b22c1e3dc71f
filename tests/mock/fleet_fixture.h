// Shared pieces of the mock's integration tests: an in-process fleet on free ports, JSON over
// HTTP, a ZMQ SUB collector per rank and a replay client.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "gtest/gtest.h"
#include "kvgate/events/decode.h"
#include "kvgate/events/encode.h"
#include "kvgate/http/client.h"
#include "kvgate/mock/fleet.h"
#include "simdjson.h"
#include "support/wait.h"

namespace kvgate::mock::testing {

using namespace std::chrono_literals;

using kvgate::testing::wait_until;
// How long the fleet tests wait for events and answers: a fleet under a sanitizer is slow.
inline constexpr std::chrono::seconds kFleetWait{20};

// Options for a small, fast fleet on free ports.
inline FleetOptions small_fleet(uint32_t workers = 1, uint32_t dp = 1) {
  FleetOptions o;
  o.workers = workers;
  o.dp_size = dp;
  o.http_port = 0;
  o.kv_port = 0;
  o.engine.num_blocks = 2048;
  o.engine.timing.speedup = 100;
  o.threads = 2;
  return o;
}

// A JSON document that owns its parser.
class Json {
 public:
  explicit Json(const std::string& text) : parser_(std::make_unique<simdjson::dom::parser>()) {
    auto err = parser_->parse(text).get(root_);
    ok_ = err == simdjson::SUCCESS;
  }
  bool ok() const { return ok_; }
  simdjson::dom::element root() const { return root_; }
  simdjson::dom::element operator[](std::string_view key) const { return root_[key].value(); }

 private:
  std::unique_ptr<simdjson::dom::parser> parser_;
  simdjson::dom::element root_;
  bool ok_ = false;
};

// One blocking HTTP client per call site (not thread-safe).
class Http {
 public:
  explicit Http(uint16_t port) : client_("127.0.0.1", port) {}
  http::ClientResponse get(const std::string& target) {
    auto r = client_.get(target);
    EXPECT_TRUE(r.ok()) << target << ": " << r.status();
    return r.ok() ? *r : http::ClientResponse{};
  }
  http::ClientResponse post(const std::string& target, const std::string& body) {
    auto r = client_.post(target, body);
    EXPECT_TRUE(r.ok()) << target << ": " << r.status();
    return r.ok() ? *r : http::ClientResponse{};
  }
  http::SyncClient& client() { return client_; }

 private:
  http::SyncClient client_;
};

inline std::string ids_json(const std::vector<TokenId>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

struct KvMessage {
  std::string topic;
  uint64_t seq = 0;
  std::string payload;
  std::chrono::steady_clock::time_point received;
};

// Subscribes to every given endpoint and collects their messages on a background thread.
class KvCollector {
 public:
  explicit KvCollector(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {
    for (size_t i = 0; i < endpoints_.size(); ++i) {
      subs_.emplace_back(ctx_, zmq::socket_type::sub);
      subs_.back().set(zmq::sockopt::subscribe, "");
      subs_.back().set(zmq::sockopt::rcvhwm, 0);
      subs_.back().set(zmq::sockopt::reconnect_ivl, 20);
      subs_.back().connect(endpoints_[i]);
    }
    messages_.resize(endpoints_.size());
    thread_ = std::thread([this] { run(); });
  }
  ~KvCollector() {
    stop_ = true;
    thread_.join();
  }
  std::vector<KvMessage> messages(size_t stream) {
    std::lock_guard<std::mutex> l(mu_);
    return messages_[stream];
  }
  size_t count(size_t stream) {
    std::lock_guard<std::mutex> l(mu_);
    return messages_[stream].size();
  }
  void clear() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& m : messages_) m.clear();
  }

 private:
  void run() {
    std::vector<zmq::pollitem_t> items;
    for (auto& s : subs_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
    while (!stop_) {
      zmq::poll(items, std::chrono::milliseconds(10));
      for (size_t i = 0; i < subs_.size(); ++i) {
        if (!(items[i].revents & ZMQ_POLLIN)) continue;
        std::vector<zmq::message_t> frames;
        while (
            zmq::recv_multipart(subs_[i], std::back_inserter(frames), zmq::recv_flags::dontwait)) {
          if (frames.size() == 3) {
            KvMessage m;
            m.topic = frames[0].to_string();
            m.seq = *events::decode_seq(
                {static_cast<const uint8_t*>(frames[1].data()), frames[1].size()});
            m.payload = frames[2].to_string();
            m.received = std::chrono::steady_clock::now();
            std::lock_guard<std::mutex> l(mu_);
            messages_[i].push_back(std::move(m));
          }
          frames.clear();
        }
      }
    }
  }

  zmq::context_t ctx_;
  std::vector<std::string> endpoints_;
  std::vector<zmq::socket_t> subs_;
  std::mutex mu_;
  std::vector<std::vector<KvMessage>> messages_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Asks a replay socket for every batch from `start`; returns them (and whether the end marker
// came).
inline std::vector<KvMessage> replay(const std::string& endpoint, uint64_t start,
                                     bool* ended = nullptr) {
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(endpoint);
  auto seq = events::encode_seq(start);
  dealer.send(zmq::message_t(), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(seq.data(), seq.size()));
  std::vector<KvMessage> out;
  if (ended) *ended = false;
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  for (;;) {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(dealer, std::back_inserter(frames))) break;
    // ["", topic, seq, payload] or ["", seq, payload]
    if (frames.size() < 3 || frames[0].size() != 0) break;
    size_t s = frames.size() == 4 ? 2 : 1;
    KvMessage m;
    if (frames.size() == 4) m.topic = frames[1].to_string();
    m.seq = *events::decode_seq({static_cast<const uint8_t*>(frames[s].data()), frames[s].size()});
    m.payload = frames[s + 1].to_string();
    if (m.seq == events::kReplayEndSeq) {
      if (ended) *ended = true;
      break;
    }
    out.push_back(std::move(m));
  }
  return out;
}

inline events::WireBatch decode(const std::string& payload) {
  events::BatchDecoder d;
  events::DecodedBatch b;
  EXPECT_TRUE(d.decode(payload, &b));
  return events::to_wire(b);
}

}  // namespace kvgate::mock::testing
