// The mock's "done when": a worker's KV events, received on a real ZMQ SUB (gaps refilled from
// its replay socket), decoded and normalized by the events module and applied to the reference
// indexer, reproduce the worker's engine truth exactly after a few hundred prefix-sharing
// requests, on every wire.
#include <algorithm>
#include <random>
#include <set>

#include "kvgate/events/normalize.h"
#include "kvgate/index/indexer.h"
#include "mock/fleet_fixture.h"

namespace kvgate::mock {
namespace {

using namespace testing;

std::vector<TokenId> random_tokens(std::mt19937& rng, size_t n) {
  std::vector<TokenId> t(n);
  for (auto& x : t) x = 256 + rng() % 30000;
  return t;
}

// Sends `n` requests sharing a few heads, through every API shape, streaming and not.
void client_loop(uint16_t port, int n, uint32_t seed,
                 const std::vector<std::vector<TokenId>>& heads, std::atomic<int>* failures) {
  std::mt19937 rng(seed);
  Http h(port);
  for (int i = 0; i < n; ++i) {
    std::vector<TokenId> prompt = heads[rng() % heads.size()];
    auto suffix = random_tokens(rng, rng() % 150);
    prompt.insert(prompt.end(), suffix.begin(), suffix.end());
    // Now and then a long answer: decode outgrows the pool and preempts.
    const uint32_t max_tokens = rng() % 8 == 0 ? 100 + rng() % 200 : 1 + rng() % 24;
    const bool stream = rng() % 3 == 0;
    std::string target, body;
    switch (rng() % 6) {
      case 0:
        target = "/generate";
        body = "{\"input_ids\":" + ids_json(prompt) +
               ",\"sampling_params\":{\"max_new_tokens\":" + std::to_string(max_tokens) + "}";
        break;
      case 1:
        target = "/v1/chat/completions";
        body =
            "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a mock. Shared "
            "system prompt for every chat in this test.\"},{\"role\":\"user\",\"content\":\"q" +
            std::to_string(rng() % 20) + "\"}],\"max_tokens\":" + std::to_string(max_tokens);
        break;
      default:
        target = "/v1/completions";
        body = "{\"prompt\":" + ids_json(prompt) + ",\"max_tokens\":" + std::to_string(max_tokens);
        break;
    }
    body += stream ? ",\"stream\":true}" : "}";
    http::ClientRequest req;
    req.method = http::Verb::post;
    req.target = target;
    req.body = body;
    Result<http::ClientResponse> r =
        stream ? h.client().stream(req, [](std::string_view) { return Status(); })
               : h.client().request(req);
    if (!r.ok() || r->status != 200) ++*failures;
  }
}

struct Truth {
  uint64_t next_seq = 0;
  bool in_flight = false;
  std::vector<SeqHash> seqs;  // sorted
  size_t blocks = 0;
};

std::vector<Truth> read_truth(Http& h) {
  Json j(h.get("/admin/truth").body);
  std::vector<Truth> out;
  for (auto rank : j["ranks"].get_array()) {
    Truth t;
    t.next_seq = rank["next_seq"].get_uint64();
    t.in_flight = rank["step_in_flight"].get_bool();
    for (auto b : rank["tiers"]["GPU"].get_array()) {
      t.seqs.push_back(b["seq_hash"].get_uint64());
      ++t.blocks;
    }
    std::sort(t.seqs.begin(), t.seqs.end());
    out.push_back(std::move(t));
  }
  return out;
}

class Exactness : public ::testing::TestWithParam<events::WireFormat> {};

TEST_P(Exactness, EventsReproduceEngineTruth) {
  FleetOptions o = small_fleet(/*workers=*/1, /*dp=*/2);
  o.wire = GetParam();
  o.engine.num_blocks = 160;  // 2.5k tokens per rank: the workload evicts and preempts
  o.engine.max_num_seqs = 16;
  o.engine.max_num_batched_tokens = 256;  // chunked prefills
  o.engine.timing.speedup = 200;
  auto fleet = Fleet::start(o);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  const WorkerPorts& ports = (*fleet)->ports(0);
  KvCollector kv({ports.ranks[0].pub_endpoint, ports.ranks[1].pub_endpoint});
  Http admin(ports.http);

  std::mt19937 rng(42);
  std::vector<std::vector<TokenId>> heads;
  for (int i = 0; i < 8; ++i) heads.push_back(random_tokens(rng, 32 + 80 * i));
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back(client_loop, ports.http, 40, 100 + c, std::cref(heads), &failures);
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);

  // Every response is back, so every step has ended and published; wait for the SUBs.
  std::vector<Truth> truth = read_truth(admin);
  ASSERT_EQ(truth.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_FALSE(truth[r].in_flight);
    ASSERT_GT(truth[r].next_seq, 20u) << "rank " << r << " published too little to test";
    wait_until(
        [&] {
          auto m = kv.messages(r);
          return !m.empty() && m.back().seq + 1 >= truth[r].next_seq;
        },
        kFleetWait);
  }

  auto index = index::make_indexer(index::IndexKind::kReference, {o.engine.router_hash_seed});
  ASSERT_TRUE(index.ok());
  uint64_t removals = 0;
  for (uint32_t r = 0; r < 2; ++r) {
    // Live messages, then whatever the SUB missed (its connection raced the first batches)
    // refilled from the replay socket.
    std::map<uint64_t, std::string> by_seq;
    size_t live = 0;
    for (auto& m : kv.messages(r)) {
      by_seq.emplace(m.seq, std::move(m.payload));
      ++live;
    }
    bool ended = false;
    for (auto& m : replay(ports.ranks[r].replay_endpoint, 0, &ended)) {
      by_seq.emplace(m.seq, std::move(m.payload));
    }
    EXPECT_TRUE(ended);
    ASSERT_EQ(by_seq.size(), truth[r].next_seq);
    ASSERT_EQ(by_seq.rbegin()->first + 1, truth[r].next_seq);
    EXPECT_GE(live * 10, by_seq.size() * 9) << "the live stream should carry nearly everything";

    events::BatchDecoder decoder;
    events::Normalizer normalizer(o.engine.router_hash_seed);
    events::DecodedBatch decoded;
    events::NormalizedBatch normalized;
    index::ApplyResult total;
    for (auto& [seq, payload] : by_seq) {
      ASSERT_TRUE(decoder.decode(payload, &decoded)) << "seq " << seq;
      ASSERT_EQ(decoded.dropped_total(), 0u);
      ASSERT_TRUE(decoded.dp_rank.has_value());
      EXPECT_EQ(*decoded.dp_rank, r);
      normalized.clear();
      normalizer.normalize(decoded, &normalized);
      total += (*index)->apply(HolderId(r), normalized.events);
    }
    removals += total.removed_blocks;
    EXPECT_EQ(total.orphan_events, 0u);
    EXPECT_EQ(total.unknown_removals, 0u);
    EXPECT_EQ(total.malformed_events, 0u);

    std::vector<index::Membership> members;
    ASSERT_TRUE((*index)->holder_memberships(HolderId(r), members).ok());
    std::vector<SeqHash> indexed;
    for (const auto& m : members) indexed.push_back(m.seq);
    std::sort(indexed.begin(), indexed.end());
    EXPECT_EQ(indexed, truth[r].seqs) << "rank " << r;
    EXPECT_GT(truth[r].blocks, 100u);
    std::printf("rank %u: %zu batches (%zu live), %zu resident blocks, %u stored, %u removed\n", r,
                by_seq.size(), live, truth[r].blocks, total.stored_blocks, total.removed_blocks);
  }
  EXPECT_GT(removals, 0u) << "the workload should have evicted";
  std::string metrics = admin.get("/metrics").body;
  double preemptions = 0;
  for (size_t at = 0;
       (at = metrics.find("\nvllm:num_preemptions_total{", at)) != std::string::npos;) {
    at = metrics.find("} ", at) + 2;
    preemptions += std::stod(metrics.substr(at, metrics.find('\n', at) - at));
  }
  std::printf("preemptions %.0f\n", preemptions);
  (*fleet)->stop();
}

INSTANTIATE_TEST_SUITE_P(Wires, Exactness,
                         ::testing::Values(events::WireFormat::kVllmArray,
                                           events::WireFormat::kVllmMap,
                                           events::WireFormat::kSglangArray,
                                           events::WireFormat::kSglangMap),
                         [](const auto& param_info) {
                           std::string n(events::wire_format_name(param_info.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace kvgate::mock
