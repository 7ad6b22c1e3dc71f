#include "drills/flood_publisher.h"

#include <algorithm>
#include <cmath>

#include <zmq_addon.hpp>

#include "kvgate/events/encode.h"
#include "kvgate/events/engine_hash.h"

namespace kvgate::drills {
namespace {

constexpr std::string_view kTopic = "kv-events";
// Year 2100: a publisher whose clock is wrong (the gateway must leave it out of its lag).
constexpr double kBogusTimestamp = 4'102'444'800.0;

}  // namespace

FloodPublisher::FloodPublisher(FloodPlan plan) : plan_(plan) {
  pub_.set(zmq::sockopt::linger, 0);
  pub_.set(zmq::sockopt::xpub_verbose, 1);
  router_.set(zmq::sockopt::linger, 0);
  router_.set(zmq::sockopt::sndhwm, 0);  // a replay is served whole, as an engine means it to be
  pub_.bind("tcp://127.0.0.1:*");
  router_.bind("tcp://127.0.0.1:*");
  endpoint_ = pub_.get(zmq::sockopt::last_endpoint);
  replay_endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  replay_thread_ = std::thread([this] { serve_replays(); });
}

FloodPublisher::~FloodPublisher() {
  stop_ = true;
  if (flood_thread_.joinable()) flood_thread_.join();
  replay_thread_.join();
}

bool FloodPublisher::wait_subscriber(std::chrono::milliseconds timeout) {
  zmq::pollitem_t item{pub_.handle(), 0, ZMQ_POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    zmq::message_t m;
    if ((item.revents & ZMQ_POLLIN) && pub_.recv(m, zmq::recv_flags::dontwait) && m.size() >= 1 &&
        static_cast<const char*>(m.data())[0] == 1) {
      return true;
    }
  }
  return false;
}

void FloodPublisher::prepare() {
  const events::VllmSha256Cbor vllm;
  const auto n = static_cast<size_t>(plan_.rate * plan_.seconds);
  const uint32_t bs = plan_.block_size;
  payloads_.resize(n);
  std::vector<TokenId> block(bs);
  for (size_t i = 0; i < n; ++i) {
    events::BlockStored s;
    s.block_size = bs;
    events::Digest parent = vllm.none_hash();  // a fresh sequence: every store applies
    for (uint32_t b = 0; b < plan_.blocks_per_message; ++b) {
      const auto first = static_cast<TokenId>((i * plan_.blocks_per_message + b) * bs);
      for (uint32_t t = 0; t < bs; ++t) block[t] = first + t;
      parent = vllm.block(parent, block);
      s.block_hashes.push_back(events::VllmSha256Cbor::wire_value(parent));
      s.token_ids.insert(s.token_ids.end(), block.begin(), block.end());
    }
    events::WireBatch batch;
    batch.ts = kBogusTimestamp;
    batch.events.push_back(std::move(s));
    batch.dp_rank = 0;
    events::encode_batch(batch, events::WireFormat::kVllmArray, &payloads_[i]);
  }
  big_.assign(plan_.big_frame_bytes, '\x90');
}

void FloodPublisher::start() {
  flood_thread_ = std::thread([this] { flood(); });
}

void FloodPublisher::wait() {
  if (flood_thread_.joinable()) flood_thread_.join();
}

FloodPublisher::Stats FloodPublisher::stats() {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

void FloodPublisher::send_store(size_t i) {
  const uint64_t seq = next_seq_++;
  last_seq_ = seq;
  const auto seq_frame = events::encode_seq(seq);
  std::vector<zmq::const_buffer> frames = {zmq::buffer(kTopic), zmq::buffer(seq_frame),
                                           zmq::buffer(payloads_[i])};
  (void)zmq::send_multipart(pub_, frames, zmq::send_flags::dontwait);  // full: dropped, as a PUB
  std::lock_guard<std::mutex> l(mu_);
  window_.emplace_back(seq, &payloads_[i]);
  while (window_.size() > plan_.replay_window) window_.pop_front();
  ++stats_.messages;
}

void FloodPublisher::send_big_frame() {
  const auto seq_frame = events::encode_seq(last_seq_);
  // Without a copy: libzmq sends straight from big_, which lives as long as the publisher.
  zmq::message_t payload(big_.data(), big_.size(), nullptr, nullptr);
  (void)pub_.send(zmq::buffer(kTopic), zmq::send_flags::sndmore);
  (void)pub_.send(zmq::buffer(seq_frame), zmq::send_flags::sndmore);
  (void)pub_.send(payload, zmq::send_flags::none);
  std::lock_guard<std::mutex> l(mu_);
  ++stats_.big_frames;
}

void FloodPublisher::flood() {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const size_t n = payloads_.size();
  int big_frames = 0;
  uint64_t chaos = 0;
  for (size_t i = 0; i < n && !stop_;) {
    const double at = static_cast<double>(i) / plan_.rate;  // when message i is due
    const auto due =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at));
    if (Clock::now() < due) std::this_thread::sleep_until(due);
    if (at >= (big_frames + 0.5) * plan_.big_frame_every_s) {
      send_big_frame();
      ++big_frames;
    }
    if (at >= plan_.chaos_from_s + static_cast<double>(chaos) * plan_.chaos_every_s) {
      next_seq_ =
          chaos++ % 2 == 0 ? next_seq_ + 1000 : next_seq_ - std::min<uint64_t>(next_seq_, 500);
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.chaos;
    }
    send_store(i++);
  }
  std::lock_guard<std::mutex> l(mu_);
  stats_.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
}

void FloodPublisher::serve_replays() {
  zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
  std::vector<std::pair<uint64_t, const std::string*>> copy;
  while (!stop_) {
    zmq::poll(&item, 1, std::chrono::milliseconds(20));
    if (!(item.revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> req;
    if (!zmq::recv_multipart(router_, std::back_inserter(req), zmq::recv_flags::dontwait)) continue;
    if (req.size() != 3) continue;
    const auto from = events::decode_seq(
        std::span<const uint8_t>(static_cast<const uint8_t*>(req[2].data()), req[2].size()));
    {
      std::lock_guard<std::mutex> l(mu_);
      stats_.replay_requests.push_back(std::chrono::steady_clock::now());
      copy.assign(window_.begin(), window_.end());
    }
    if (!from) continue;
    const auto reply = [&](uint64_t seq, std::string_view payload) {
      const auto seq_frame = events::encode_seq(seq);
      std::vector<zmq::const_buffer> frames = {zmq::buffer(req[0].data(), req[0].size()),
                                               zmq::buffer("", 0), zmq::buffer(kTopic),
                                               zmq::buffer(seq_frame), zmq::buffer(payload)};
      (void)zmq::send_multipart(router_, frames);
    };
    for (const auto& [seq, payload] : copy) {
      if (seq >= *from) reply(seq, *payload);
    }
    reply(events::kReplayEndSeq, "");
  }
}

}  // namespace kvgate::drills
