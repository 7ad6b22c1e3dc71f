// What the relay costs, one engine rank fed the exactness corpus's batches:
//   append   batches (and block events) per second one core turns into history entries and block
//            set updates (RankStream::append: the relay's whole per-batch work after decoding);
//   snapshot the time and wire bytes of the snapshot of a rank holding --snapshot-blocks blocks;
//   fan-out  --subscribers gRPC streams on loopback, each following the rank: how long a batch
//            takes to reach every one of them (p50 / p99 over --fanout-batches), and the relay
//            process's resident memory before and with them;
//   lag      the publish-to-delivery delay of --lag-batches batches at --lag-rate per second,
//            directly and through the relay (lag.h);
//   soak     with --soak-secs, the resident memory of a `kvgate relay` process of its own under
//            --soak-subscribers streams, some of them slow, while an engine churns (soak.h).
//
// Run: build/release/bin/kvgate-bench-relay --batches 200000 --snapshot-blocks 16384
//        --subscribers 100 --fanout-batches 500   (one line)
//      build/release/bin/kvgate-bench-relay --batches 0 --subscribers 0 --lag-batches 0
//        --soak-secs 60 --soak-subscribers 100 --soak-slow 10 --soak-history-bytes 16MiB
#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness/corpus_generator.h"
#include "kvgate/relay/server.h"
#include "kvgate/relay/v1/relay.grpc.pb.h"
#include "lag.h"
#include "percentile.h"
#include "soak.h"

namespace kvgate::relay {
namespace {

using Steady = std::chrono::steady_clock;

double rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

// The corpus's batches for one holder.
struct Source {
  index::harness::CorpusGenerator gen;
  index::harness::Step step;
  uint64_t seq = 0;
  explicit Source(uint32_t capacity)
      : gen({.seed = 5, .holders = 1, .holder_capacity = capacity}) {}
  RankBatch next() {
    do {
      gen.next(step);
    } while (step.kind != index::harness::Step::Kind::kBatch);
    return {.seq = seq++, .events = step.events};
  }
};

void bench_append(uint64_t batches) {
  RankStream s({});
  Source src(384);
  uint64_t blocks = 0;
  const auto t0 = Steady::now();
  for (uint64_t i = 0; i < batches; ++i) {
    const RankBatch b = src.next();
    for (const index::Event& e : b.events) blocks += e.engine_hashes.size();
    s.append(b);
  }
  const double secs = std::chrono::duration<double>(Steady::now() - t0).count();
  std::printf(
      "append: %llu batches, %llu block events in %.2f s: %.0f batches/s, %.0f block "
      "events/s (one core, corpus generation included)\n",
      static_cast<unsigned long long>(batches), static_cast<unsigned long long>(blocks), secs,
      static_cast<double>(batches) / secs, static_cast<double>(blocks) / secs);
}

// A rank holding `blocks` blocks as conversations leave them: chains of 64 blocks, each group of
// eight under a shared 16-block prefix (a system prompt), every tenth block also on the host tier.
void fill(RankStream& s, uint32_t blocks, uint64_t& seq) {
  uint32_t held = 0;
  for (uint64_t chain = 0; held < blocks; ++chain) {
    std::vector<index::EngineHash> eng;
    std::vector<LocalHash> local;
    const bool shares = chain % 8 != 0;
    const uint64_t prefix_head = (chain / 8) << 32;
    for (uint32_t i = shares ? 16 : 0; i < 64 && held < blocks; ++i, ++held) {
      const uint64_t id = i < 16 ? prefix_head | i : (chain << 32) | i;
      eng.push_back(id + 1);
      local.push_back(id * 0x9E3779B97F4A7C15ull + 7);
    }
    const index::Event e{.kind = index::EventKind::kStored,
                         .tier = index::Tier::kDevice,
                         .has_parent = shares,
                         .parent = shares ? (prefix_head | 15) + 1 : 0,
                         .engine_hashes = eng,
                         .local_hashes = local};
    s.append({.seq = seq++, .events = std::span(&e, 1)});
    if (chain % 10 == 0) {
      const index::Event host{.kind = index::EventKind::kStored,
                              .tier = index::Tier::kHost,
                              .has_parent = e.has_parent,
                              .parent = e.parent,
                              .engine_hashes = eng,
                              .local_hashes = local};
      s.append({.seq = seq++, .events = std::span(&host, 1)});
    }
  }
}

void bench_snapshot(uint32_t blocks) {
  RankStream s({.max_batches = 1});
  uint64_t seq = 0;
  fill(s, blocks, seq);
  v1::RankInfo info;
  std::vector<double> ms;
  size_t bytes = 0, chunks = 0;
  for (int run = 0; run < 5; ++run) {
    s.append({.seq = seq++});  // a new place: the snapshot is taken again
    RankStream::Cursor fresh;
    const auto t0 = Steady::now();
    const auto got = s.next(fresh, 1);
    ms.push_back(std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
    bytes = 0;
    chunks = 0;
    for (const auto& m : got) {
      if (m->has_snapshot()) {
        bytes += m->ByteSizeLong();
        ++chunks;
      }
    }
  }
  s.describe(&info);
  std::printf(
      "snapshot: %llu block copies held, %zu chunks, %.0f KiB on the wire (%.1f B per "
      "block), taken in %.2f ms (median of 5)\n",
      static_cast<unsigned long long>(info.blocks()), chunks, static_cast<double>(bytes) / 1024.0,
      static_cast<double>(bytes) / static_cast<double>(std::max<uint64_t>(1, info.blocks())),
      percentile(ms, 0.5));
}

void bench_fanout(int subscribers, int batches) {
  StreamTable table({});
  RankStream* rank = (*table.add({.name = "engine", .ranks = 1}))[0];
  RelayServer server(table,
                     {.listen = "127.0.0.1:0", .heartbeat = std::chrono::milliseconds(1000)});
  if (!server.start().ok()) {
    std::fprintf(stderr, "fan-out: cannot start the server\n");
    return;
  }
  const double rss_before = rss_mib();
  // Each subscriber on its own channel (a gateway replica each), read by a thread of its own.
  std::vector<std::atomic<int64_t>> seen(static_cast<size_t>(subscribers));
  for (auto& s : seen) s = -1;
  std::vector<std::thread> readers;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::atomic<bool> stop{false};
  for (int i = 0; i < subscribers; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ChannelArguments args;
    args.SetInt("kvgate.bench.subscriber", i);  // a channel of its own, not a shared one
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server.port()),
                                             grpc::InsecureChannelCredentials(), args);
    readers.emplace_back([&, i, channel] {
      auto stub = v1::Relay::NewStub(channel);
      v1::SubscribeRequest req;
      req.set_worker("engine");
      auto reader = stub->Subscribe(contexts[static_cast<size_t>(i)].get(), req);
      v1::SubscribeResponse m;
      while (!stop && reader->Read(&m)) {
        if (m.has_batch()) seen[static_cast<size_t>(i)] = static_cast<int64_t>(m.batch().seq());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Source src(384);
  std::vector<double> reach_us;
  for (int b = 0; b < batches; ++b) {
    const RankBatch batch = src.next();
    const auto t0 = Steady::now();
    rank->append(batch);
    const auto all = [&] {
      for (auto& s : seen) {
        if (s.load() < static_cast<int64_t>(batch.seq)) return false;
      }
      return true;
    };
    while (!all()) std::this_thread::yield();
    reach_us.push_back(std::chrono::duration<double, std::micro>(Steady::now() - t0).count());
  }
  const double rss_with = rss_mib();
  stop = true;
  for (auto& c : contexts) c->TryCancel();
  for (auto& t : readers) t.join();
  std::printf(
      "fan-out: %d subscribers, a batch reaches all of them in p50 %.0f us / p99 %.0f us "
      "(%d batches); RSS %.0f MiB before the subscribers, %.0f MiB with them (this "
      "process holds the subscribers too)\n",
      subscribers, percentile(reach_us, 0.5), percentile(reach_us, 0.99), batches, rss_before,
      rss_with);
  server.stop();
}

}  // namespace
}  // namespace kvgate::relay

int main(int argc, char** argv) {
  CLI::App app{"The relay's costs: append throughput, snapshot size and time, gRPC fan-out"};
  uint64_t batches = 200'000;
  uint32_t snapshot_blocks = 16'384;
  int subscribers = 100, fanout_batches = 500;
  app.add_option("--batches", batches, "Batches appended for the throughput figure")
      ->capture_default_str();
  app.add_option("--snapshot-blocks", snapshot_blocks, "Blocks the snapshotted rank holds")
      ->capture_default_str();
  app.add_option("--subscribers", subscribers, "gRPC subscribers for the fan-out figure")
      ->capture_default_str();
  app.add_option("--fanout-batches", fanout_batches, "Batches timed in the fan-out")
      ->capture_default_str();
  int lag_batches = 2000;
  double lag_rate = 200;
  app.add_option("--lag-batches", lag_batches, "Batches timed for the added apply lag (0: skip)")
      ->capture_default_str();
  app.add_option("--lag-rate", lag_rate, "Batches per second the engine publishes then")
      ->capture_default_str();
  kvgate::relay::SoakOptions soak{.seconds = 0};
  app.add_option("--soak-secs", soak.seconds,
                 "Seconds of the soak of a relay process of its own (0: skip)")
      ->capture_default_str();
  app.add_option("--soak-subscribers", soak.subscribers, "gRPC subscribers during the soak")
      ->capture_default_str();
  app.add_option("--soak-slow", soak.slow,
                 "Of them, how many read a message every 20 ms (they fall behind the history)")
      ->capture_default_str();
  app.add_option("--soak-history-bytes", soak.history_bytes,
                 "The soaked relay's --relay-history-bytes")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (batches > 0) kvgate::relay::bench_append(batches);
  if (snapshot_blocks > 0) kvgate::relay::bench_snapshot(snapshot_blocks);
  if (subscribers > 0) kvgate::relay::bench_fanout(subscribers, fanout_batches);
  if (lag_batches > 0) kvgate::relay::bench_lag(lag_batches, lag_rate);
  if (soak.seconds > 0) kvgate::relay::bench_soak(soak);
  return 0;
}
