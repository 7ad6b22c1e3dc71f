// kvgate-events: an operator's view of the engines' KV-event streams.
//
//   kvgate-events decode batch.msgpack             one payload file -> normalized JSON
//   kvgate-events watch tcp://10.0.0.5:5557 --replay tcp://10.0.0.5:5558 --topic kv-events
//
// Both go through the gateway's own decoder, normalizer and admission cursor (kvgate::events),
// so what they print is what the gateway would do with the same bytes.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "batch_json.h"
#include "kvgate/core/clock.h"
#include "kvgate/events/decode.h"
#include "kvgate/events/normalize.h"
#include "kvgate/events/subscription.h"

namespace {

using namespace kvgate::events;

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop = true; }

int decode_file(const std::string& path, const std::string& format, uint64_t hash_seed) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "kvgate-events: cannot read %s\n", path.c_str());
    return 1;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BatchDecoder decoder;
  DecodedBatch batch;
  const bool ok = decoder.decode(bytes, &batch);
  Normalizer normalizer(hash_seed);
  NormalizedBatch normalized;
  normalizer.normalize(batch, &normalized);
  if (ok && format != "auto") {
    const auto want = parse_wire_format(format);
    const auto seen = batch.hints.guess();
    if (want && seen && *want != *seen) {
      std::fprintf(stderr, "kvgate-events: note: the events look like %s, not %s\n",
                   std::string(wire_format_name(*seen)).c_str(), format.c_str());
    }
  }
  std::string out;
  kvgate::events::tool::append_batch_json(batch, &normalized, &out);
  std::printf("%s\n", out.c_str());
  return ok ? 0 : 2;
}

int watch(SubscriptionSpec spec, uint64_t hash_seed, int64_t count, double seconds) {
  zmq::context_t ctx(1);
  SubscriptionOptions options;
  options.hash_seed = hash_seed;
  uint64_t printed = 0;
  Subscription sub(
      ctx, spec, options,
      [](std::unique_ptr<NormalizedBatch>& b) {
        b.reset();
        return true;
      },
      kvgate::Clock::real());
  sub.set_observer([&](const MessageReport& r) {
    std::string line;
    kvgate::events::tool::append_report_json(r, &line);
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    ++printed;
  });
  if (auto s = sub.start(); !s.ok()) {
    std::fprintf(stderr, "kvgate-events: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds > 0 ? seconds : 1e9));
  std::vector<zmq_pollitem_t> items;
  while (!g_stop && std::chrono::steady_clock::now() < deadline &&
         (count <= 0 || printed < static_cast<uint64_t>(count))) {
    items.clear();
    sub.poll_items(&items);
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
    } catch (const zmq::error_t&) {
      continue;  // interrupted by a signal
    }
    sub.handle(items.data());
    sub.tick();
  }
  const CursorStats& c = sub.cursor_stats();
  std::fprintf(stderr,
               "kvgate-events: applied %llu, replayed %llu, duplicates %llu, gaps %llu, "
               "restarts %llu, degraded %s, bad frames %llu\n",
               static_cast<unsigned long long>(c.applied),
               static_cast<unsigned long long>(c.replayed),
               static_cast<unsigned long long>(c.duplicates),
               static_cast<unsigned long long>(c.gaps), static_cast<unsigned long long>(c.restarts),
               sub.degraded() ? "yes" : "no", static_cast<unsigned long long>(sub.bad_frames()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Reads the KV-cache events that vLLM and SGLang engines publish (ZMQ PUB, msgpack) the way\n"
      "the gateway does, and prints what it makes of them as JSON.\n\n"
      "Every layout the engines send is accepted: vLLM array events of every version, vLLM map\n"
      "events (0.24+), the map-shaped batch, SGLang array and map events. An event that cannot be\n"
      "read is dropped with a reason (listed under \"dropped\"); the rest of its batch is kept.\n"
      "docs/wire.md describes the wire, docs/events.md what the gateway does with it.",
      "kvgate-events"};
  app.require_subcommand(1);
  uint64_t hash_seed = kvgate::kDefaultHashSeed;
  app.add_option("--hash-seed", hash_seed,
                 "seed of the router's block hashes (must match the gateway's)")
      ->capture_default_str();

  auto* decode = app.add_subcommand(
      "decode",
      "decode one payload file (the third frame of a live message, saved as raw bytes) and print\n"
      "it as JSON: \"events\" as the wire says them, \"index_events\" as the index will get them\n"
      "(tier, parent, the router's local hash of each block), \"dropped\" per reason.\n"
      "Exit status 2 when the whole payload is unreadable.\n\n"
      "  kvgate-events decode batch.msgpack");
  std::string file, format = "auto";
  decode->add_option("FILE", file, "payload file")->required();
  decode
      ->add_option("--format", format,
                   "expected layout: auto, vllm-array, vllm-map, sglang, sglang-map (the decoder\n"
                   "accepts every layout either way; a named one only adds a note when the\n"
                   "events look different)")
      ->capture_default_str();

  auto* watch_cmd = app.add_subcommand(
      "watch",
      "subscribe to an engine's publisher and print one JSON line per message: live or replay,\n"
      "seq, the admission verdict (applied, duplicate, buffered, \"gap: replay from N\",\n"
      "\"resync (reason)\", restart), event count and drop reasons. Ctrl-C stops; a summary\n"
      "goes to stderr.\n\n"
      "  kvgate-events watch tcp://127.0.0.1:5557 --replay tcp://127.0.0.1:5558\n"
      "  kvgate-events watch tcp://10.0.0.5:5557 --topic kv-events --count 100");
  SubscriptionSpec spec;
  spec.worker_name = "watch";
  std::string scheme = "auto";
  int64_t count = 0;
  double seconds = 0;
  watch_cmd->add_option("ENDPOINT", spec.endpoint, "the engine's PUB endpoint")->required();
  watch_cmd->add_option("--replay", spec.replay_endpoint,
                        "the engine's replay (ROUTER) endpoint; gaps are refilled from it");
  watch_cmd->add_option("--topic", spec.topic, "ZMQ topic prefix (default: every message)");
  watch_cmd
      ->add_option("--hash-check", scheme,
                   "engine hash scheme to verify: auto, vllm-sha256-cbor, sglang, off")
      ->capture_default_str();
  watch_cmd
      ->add_option("--vllm-seed", spec.hash_check.vllm_seed,
                   "vLLM NONE_HASH seed (the engine's PYTHONHASHSEED, if set)")
      ->capture_default_str();
  watch_cmd->add_option("--count", count, "stop after this many messages (0: no limit)");
  watch_cmd->add_option("--seconds", seconds, "stop after this long (0: no limit)");

  CLI11_PARSE(app, argc, argv);

  if (*decode) return decode_file(file, format, hash_seed);
  auto s = parse_hash_scheme(scheme);
  if (!s.ok()) {
    std::fprintf(stderr, "kvgate-events: %s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  spec.hash_check.scheme = *s;
  return watch(spec, hash_seed, count, seconds);
}
