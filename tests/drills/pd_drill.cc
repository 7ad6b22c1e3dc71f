// Prefill/decode disaggregation under faults: a gateway in front of two prefill and two decode
// kvgate-mock processes (one worker each, SGLang's protocol, pairing through bootstrap rooms),
// streamed traffic, and one worker killed, stopped or restarted mid-run. Every drill requires that
// no request hangs and that every one either succeeds (on the same or another pair) or ends with
// a clean error (an SSE error event, or an error status with an OpenAI error document), never a
// reset connection; and that the decode workers hold no pull open afterwards.
#include <gtest/gtest.h>
#include <signal.h>

#include "drills/harness.h"

namespace kvgate::drills {
namespace {

constexpr char kTransferTimeoutMs[] = "2000";

// Two prefill and two decode workers, each its own process, behind a gateway.
struct PdFleet {
  // `slow_prefill_a`: flags that make prefill-a's engine slower than the others;
  // `transfer_timeout_ms`: how long a decode waits for its room.
  explicit PdFleet(std::vector<std::string> slow_prefill_a = {},
                   const char* transfer_timeout_ms = kTransferTimeoutMs)
      : prefill_a(std::make_unique<MockFleet>(1, joined(prefill_args(), slow_prefill_a))),
        prefill_b(std::make_unique<MockFleet>(1, prefill_args())),
        decode_a(std::make_unique<MockFleet>(1, decode_args(transfer_timeout_ms))),
        decode_b(std::make_unique<MockFleet>(1, decode_args(transfer_timeout_ms))) {
    if (!prefill_a->ready() || !prefill_b->ready() || !decode_a->ready() || !decode_b->ready()) {
      return;
    }
    std::vector<std::string> line = {"--log-level", "warn", "--pd-disaggregation"};
    for (const MockFleet* p : {prefill_a.get(), prefill_b.get()}) {
      line.insert(line.end(), {"--prefill", p->url(0), std::to_string(p->bootstrap_port(0))});
    }
    for (const MockFleet* d : {decode_a.get(), decode_b.get()}) {
      line.insert(line.end(), {"--decode", d->url(0)});
    }
    gw = std::make_unique<GatewayProcess>(std::vector<std::string>{}, line);
  }
  static std::vector<std::string> joined(std::vector<std::string> a,
                                         const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  static std::vector<std::string> prefill_args() {
    return {"--pd-role", "prefill", "--bootstrap-port", "0"};
  }
  static std::vector<std::string> decode_args(const char* timeout_ms = kTransferTimeoutMs) {
    return {"--pd-role", "decode", "--pd-transfer-timeout-ms", timeout_ms};
  }
  bool ready() const { return gw && gw->ready() && gw->wait_routable(4, 20); }

  // Pulls the decode workers still hold open (the decodes that are alive).
  uint64_t pulls_in_flight() const {
    uint64_t n = 0;
    for (const MockFleet* d : {decode_a.get(), decode_b.get()}) {
      if (d == nullptr) continue;  // (killed)
      if (auto body = d->admin_get(0, "/admin/pd")) {
        const size_t at = body->find("\"pulls_in_flight\":");
        if (at != std::string::npos) n += std::stoull(body->substr(at + 18));
      }
    }
    return n;
  }

  std::unique_ptr<MockFleet> prefill_a, prefill_b, decode_a, decode_b;
  std::unique_ptr<GatewayProcess> gw;
};

// Requests that neither succeeded nor ended cleanly: a transport failure, or an error status
// without an OpenAI error document.
size_t unclean(const std::vector<StreamRecord>& records) {
  size_t n = 0;
  for (const StreamRecord& r : records) {
    if (r.ok() || r.ended_cleanly()) continue;
    const bool clean_status =
        r.failure.rfind("status ", 0) == 0 && r.failure.find("\"error\"") != std::string::npos;
    n += clean_status ? 0 : 1;
  }
  return n;
}

// What every drill reports and requires of its traffic.
struct Outcome {
  size_t hung = 0, unclean = 0, ok_after = 0, total_after = 0;
  uint64_t pulls_left = 0;
  std::string summary;
  bool holds() const { return hung == 0 && unclean == 0 && pulls_left == 0; }
  std::string describe() const {
    return std::to_string(hung) + " hung; " + std::to_string(unclean) + " ended uncleanly; " +
           std::to_string(ok_after) + " of " + std::to_string(total_after) +
           " ok once the fault was seen; " + std::to_string(pulls_left) +
           " decode pulls left open; " + summary;
  }
};

// Stops the traffic and measures it; requests started `settled` seconds or more after the fault
// count as "after".
Outcome measure(Traffic& traffic, const PdFleet& f, double settled) {
  traffic.stop(30);
  Outcome o;
  o.hung = traffic.in_flight();
  const auto records = traffic.records();
  o.unclean = unclean(records);
  for (const StreamRecord& r : records) {
    if (r.start < settled) continue;
    ++o.total_after;
    o.ok_after += r.ok() ? 1 : 0;
  }
  o.summary = summarize(records).describe();
  // The pulls end within the transfer timeout at the latest.
  for (int i = 0; i < 60 && (o.pulls_left = f.pulls_in_flight()) > 0; ++i) sleep_s(0.1);
  return o;
}

TEST(Drill, PdPrefillKilledMidTransfer) {
  PdFleet f;
  ASSERT_TRUE(f.ready());
  Traffic traffic({.port = f.gw->port(), .max_tokens = 40});
  traffic.start_open(10);
  sleep_s(3);
  const double killed_at = now_s();
  ASSERT_TRUE(f.prefill_a->process().signal(SIGKILL));
  sleep_s(6);
  const Outcome o = measure(traffic, f, killed_at + 3);
  const bool passed = o.holds() && o.ok_after == o.total_after && o.total_after > 0;
  report("prefill worker killed mid-transfer (SIGKILL)",
         "no hung or unclean request; retried on the other pair; decode pulls freed; all ok 3 s "
         "after",
         o.describe(), passed);
  EXPECT_TRUE(o.holds()) << o.describe();
  EXPECT_EQ(o.ok_after, o.total_after) << o.describe();
}

TEST(Drill, PdDecodeKilledMidStream) {
  PdFleet f;
  ASSERT_TRUE(f.ready());
  Traffic traffic({.port = f.gw->port(), .max_tokens = 200});
  traffic.start_open(10);
  sleep_s(3);
  const double killed_at = now_s();
  ASSERT_TRUE(f.decode_a->process().signal(SIGKILL));
  f.decode_a.reset();  // (its admin page is gone)
  sleep_s(6);
  const Outcome o = measure(traffic, f, killed_at + 3);
  const bool passed = o.holds() && o.ok_after == o.total_after && o.total_after > 0;
  report("decode worker killed mid-stream (SIGKILL)",
         "no hung or unclean request (streams cut end with an SSE error event); all ok 3 s after",
         o.describe(), passed);
  EXPECT_TRUE(o.holds()) << o.describe();
  EXPECT_EQ(o.ok_after, o.total_after) << o.describe();
}

// A prefill that takes its requests and never answers (stopped): the rooms never arrive, the
// decodes give up after their transfer timeout, and the gateway takes the pair elsewhere.
TEST(Drill, PdRoomNeverArrives) {
  PdFleet f;
  ASSERT_TRUE(f.ready());
  Traffic traffic({.port = f.gw->port(), .max_tokens = 40});
  traffic.start_open(10);
  sleep_s(3);
  const double stopped_at = now_s();
  ASSERT_TRUE(f.prefill_a->process().signal(SIGSTOP));
  sleep_s(8);
  const Outcome o = measure(traffic, f, stopped_at + 5);
  ASSERT_TRUE(f.prefill_a->process().signal(SIGCONT));
  const bool passed = o.holds() && o.ok_after == o.total_after && o.total_after > 0;
  report("prefill stopped: rooms never arrive (SIGSTOP)",
         "no hung or unclean request; the decode's pull times out (2 s) and the pair is retried; "
         "all ok 5 s after",
         o.describe(), passed);
  EXPECT_TRUE(o.holds()) << o.describe();
  EXPECT_EQ(o.ok_after, o.total_after) << o.describe();
}

// One prefill worker saturated (a tenth of the others' prefill speed, two sequences at a time)
// while the decode workers idle: pairs move to the prefill that keeps up, and nothing fails. The
// decodes wait for their rooms as long as an engine's default (10 s): a room late from a queue is
// not lost.
TEST(Drill, PdPrefillSaturatedWhileDecodeIdles) {
  PdFleet f({"--prefill-tokens-per-s", "1000", "--max-num-seqs", "2"}, "10000");
  ASSERT_TRUE(f.ready());
  const std::string slow = f.prefill_a->url(0), fast = f.prefill_b->url(0);
  Traffic traffic({.port = f.gw->port(), .max_tokens = 8, .prompt_words = 400});
  traffic.start_open(20);
  sleep_s(10);
  const Outcome o = measure(traffic, f, 0);
  const double to_slow =
      f.gw->metric_sum("kvgate_worker_requests_total", "worker=\"" + slow + "\"").value_or(0);
  const double to_fast =
      f.gw->metric_sum("kvgate_worker_requests_total", "worker=\"" + fast + "\"").value_or(0);
  const double share = to_slow + to_fast > 0 ? to_slow / (to_slow + to_fast) : 1;
  const bool passed = o.holds() && o.ok_after == o.total_after && share < 0.35;
  char measured[96];
  std::snprintf(measured, sizeof measured, "slow prefill took %.0f of %.0f pairs (%.0f%%); ",
                to_slow, to_slow + to_fast, share * 100);
  report("prefill saturated while decode idles",
         "no hung or unclean request, all ok; the saturated prefill takes < 35% of pairs",
         measured + o.describe(), passed);
  EXPECT_TRUE(o.holds()) << o.describe();
  EXPECT_EQ(o.ok_after, o.total_after) << o.describe();
  EXPECT_LT(share, 0.35) << measured;
}

// A decode worker restarts on its ports with an empty cache: the gateway keeps serving, routes to
// it again, and its index of that worker is what the restarted engine holds.
TEST(Drill, PdDecodeRestartsEmpty) {
  PdFleet f;
  ASSERT_TRUE(f.ready());
  const std::string url = f.decode_a->url(0);
  const std::vector<std::string> same_ports = f.decode_a->same_ports_args(0);
  Watcher watcher(*f.gw);
  Traffic traffic({.port = f.gw->port(), .max_tokens = 40});
  traffic.start_open(10);
  sleep_s(3);
  const double killed_at = now_s();
  ASSERT_TRUE(f.decode_a->process().signal(SIGKILL));
  f.decode_a.reset();
  sleep_s(1);
  std::vector<std::string> args = PdFleet::decode_args();
  args.insert(args.end(), same_ports.begin(), same_ports.end());
  f.decode_a = std::make_unique<MockFleet>(1, args);
  ASSERT_TRUE(f.decode_a->ready());
  const double restarted_at = now_s();
  sleep_s(6);
  const Outcome o = measure(traffic, f, restarted_at + 3);
  const auto back = watcher.first(url, restarted_at, in_routing);
  std::vector<IndexVsEngine> view;
  const bool exact = wait_index_exact(*f.gw, *f.decode_a, 10, &view);
  const bool passed = o.holds() && back && o.ok_after == o.total_after && exact;
  report("decode worker restarts empty",
         "no hung or unclean request; back in routing; the index holds what the restarted "
         "engine holds",
         "back " + seconds_after(back, restarted_at) + " after restart; index " +
             (view.empty() ? "?" : std::to_string(view[0].index)) + " vs engine " +
             (view.empty() ? "?" : std::to_string(view[0].engine)) + " blocks; " + o.describe(),
         passed);
  (void)killed_at;
  EXPECT_TRUE(o.holds()) << o.describe();
  EXPECT_TRUE(back.has_value()) << "never routable again";
  EXPECT_EQ(o.ok_after, o.total_after) << o.describe();
  EXPECT_TRUE(exact);
}

}  // namespace
}  // namespace kvgate::drills
