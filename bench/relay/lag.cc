#include "lag.h"
#include "percentile.h"

#include <zmq.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/core/clock.h"
#include "kvgate/events/encode.h"
#include "kvgate/events/subscription.h"
#include "kvgate/index/indexer.h"
#include "kvgate/relay/engine_feed.h"
#include "kvgate/relay/follower.h"
#include "kvgate/relay/server.h"
#include "kvgate/relay/stream_table.h"

namespace kvgate::relay {
namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Publish-to-delivery delays of the batches published after `from` (wall clock), in ms.
class Delays {
 public:
  // Keeps only the batches published from `from` on (drops what was kept before).
  void start_at(double from) {
    std::lock_guard<std::mutex> lock(mu_);
    from_ = from;
    ms_.clear();
  }
  void add(double engine_ts) {
    const double now = wall_now();
    if (engine_ts < from_.load()) return;
    std::lock_guard<std::mutex> lock(mu_);
    ms_.push_back((now - engine_ts) * 1000);
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ms_.size();
  }
  std::vector<double> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return ms_;
  }

 private:
  std::atomic<double> from_{1e300};
  mutable std::mutex mu_;
  std::vector<double> ms_;
};

// One batch as an engine publishes it: one stored block with 16 tokens of its own.
std::string payload(uint64_t i, double ts) {
  events::BlockStored stored;
  stored.block_hashes = {static_cast<events::EngineHash>(i + 1)};
  stored.block_size = 16;
  for (uint32_t t = 0; t < 16; ++t) stored.token_ids.push_back(static_cast<TokenId>(i * 16 + t));
  events::WireBatch batch{.ts = ts, .events = {stored}};
  std::string out;
  events::encode_batch(batch, events::WireFormat::kVllmMap, &out);
  return out;
}

}  // namespace

void bench_lag(int batches, double rate) {
  zmq::context_t ctx(1);
  zmq::socket_t pub(ctx, zmq::socket_type::pub);
  pub.bind("tcp://127.0.0.1:*");
  const std::string endpoint = pub.get(zmq::sockopt::last_endpoint);

  // Through the relay: its feed subscribes, its server streams, a follower applies to an index.
  StreamTable table({});
  EngineFeed feed(table);
  RelayServer server(table, {.listen = "127.0.0.1:0"});
  if (!server.start().ok()) {
    std::fprintf(stderr, "lag: cannot start the relay's server\n");
    return;
  }
  if (!feed.add({.name = "engine", .kv_endpoint = endpoint, .block_size = 16},
                {{.publisher = endpoint}})
           .ok()) {
    std::fprintf(stderr, "lag: the relay cannot subscribe\n");
    return;
  }
  auto idx = index::make_indexer(index::IndexKind::kChain);
  if (!idx.ok()) return;
  auto followed = index::make_synchronized(std::move(*idx));
  RelayFollower follower(*followed, {.target = "127.0.0.1:" + std::to_string(server.port())});
  Delays relayed, direct;
  FollowCallbacks callbacks;
  callbacks.on_batch = [&relayed](double ts) { relayed.add(ts); };
  (void)follower.add("engine", 0, HolderId(0), callbacks);

  // Directly: the subscription a gateway's event lane runs, on a thread polling it.
  events::SubscriptionSpec spec;
  spec.key = HolderKey{WorkerId(1), 0};
  spec.holder = HolderId(1);
  spec.worker_name = "direct";
  spec.endpoint = endpoint;
  events::Subscription sub(
      ctx, spec, {},
      [&direct](std::unique_ptr<events::NormalizedBatch>& b) {
        direct.add(b->ts);
        b.reset();
        return true;
      },
      Clock::real());
  (void)sub.start();
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    std::vector<zmq_pollitem_t> items;
    while (!stop) {
      items.clear();
      sub.poll_items(&items);
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(10));
      sub.handle(items.data());
      sub.tick();
    }
  });

  // Both readers connect in the background: publish until each has taken a batch (the first
  // ones, before the subscribers joined, are a gap each side resyncs over), then measure.
  const auto gap = std::chrono::duration<double>(1.0 / rate);
  uint64_t seq = 0;
  const auto publish = [&] {
    const std::string p = payload(seq, wall_now());
    const std::array<uint8_t, 8> s = events::encode_seq(seq++);
    pub.send(zmq::const_buffer("", 0), zmq::send_flags::sndmore);
    pub.send(zmq::const_buffer(s.data(), s.size()), zmq::send_flags::sndmore);
    pub.send(zmq::const_buffer(p.data(), p.size()), zmq::send_flags::none);
  };
  relayed.start_at(0);
  direct.start_at(0);
  for (int i = 0; i < 2000 && (relayed.size() == 0 || direct.size() < 1); ++i) {
    publish();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // resyncs settle
  const double from = wall_now();
  relayed.start_at(from);
  direct.start_at(from);
  auto next = std::chrono::steady_clock::now();
  for (int i = 0; i < batches; ++i) {
    publish();
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(gap);
    std::this_thread::sleep_until(next);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop = true;
  poller.join();
  follower.stop();
  server.stop();
  feed.stop();
  const std::vector<double> d = direct.take(), r = relayed.take();
  std::printf(
      "lag: %d batches at %.0f/s published on ZMQ; publish to delivery p50 / p99: direct "
      "%.3f / %.3f ms (%zu), through the relay %.3f / %.3f ms (%zu); added p50 %.3f ms, p99 "
      "%.3f ms\n",
      batches, rate, percentile(d, 0.5), percentile(d, 0.99), d.size(), percentile(r, 0.5),
      percentile(r, 0.99), r.size(), percentile(r, 0.5) - percentile(d, 0.5),
      percentile(r, 0.99) - percentile(d, 0.99));
}

}  // namespace kvgate::relay
