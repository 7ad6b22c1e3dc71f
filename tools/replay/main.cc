// kvgate-replay: replays a Mooncake trace against the gateway (or one worker) and reports what
// users felt (TTFT, inter-token latency, goodput) and what routing achieved against the best any
// router could have done (cached tokens over the oracle's). docs/replay.md has the details.
//
//   kvgate-replay --target http://127.0.0.1:30000 --rows 0:2000 --speedup 6 --out replay-out
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "CLI/CLI.hpp"
#include "kvgate/core/log.h"
#include "kvgate/corpus/mooncake_trace.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"
#include "replay/fleet.h"
#include "replay/oracle.h"
#include "replay/progress.h"
#include "replay/prompt.h"
#include "replay/report.h"
#include "replay/runner.h"
#include "replay/schedule.h"

namespace {

using namespace kvgate;
using namespace kvgate::replay;

struct Flags {
  std::string trace;
  std::string rows;
  double speedup = 1;
  std::string target;
  std::vector<std::string> replicas;
  std::string model = "mock-8b";
  std::optional<uint32_t> block_tokens;  // else from --length-factor, else 512
  std::optional<double> length_factor;
  uint64_t token_seed = 0;
  uint32_t vocab = 32'000;
  bool chat = false;
  uint32_t chat_words_per_id = 0;  // 0: from the tokens per id
  std::string tokenizer;
  uint64_t max_output_tokens = 0;
  std::string out = "replay-out";
  double slo_ttft_ms = 2000;
  double slo_itl_ms = 100;
  size_t threads = 2;
  std::string oracle = "auto";
  std::vector<std::string> workers_admin;
  uint32_t oracle_block_size = 0;
  uint64_t hash_seed = kDefaultHashSeed;
  double request_timeout_s = 300;
  double idle_timeout_s = 120;
  bool progress = false;
  bool no_progress = false;
  bool strict = false;
  std::string log_level = "warn";
};

std::string default_trace() {
  const char* dir = std::getenv("KVGATE_TRACES_DIR");
  const std::string base = dir != nullptr && *dir != '\0' ? dir : KVGATE_DEFAULT_TRACES_DIR;
  return base + "/conversation_trace.jsonl";
}

int fail(const std::string& what) {
  std::fprintf(stderr, "kvgate-replay: %s\n", what.c_str());
  return 1;
}

void add_flags(CLI::App& app, Flags& f) {
  app.description(
      "kvgate-replay: replay a Mooncake trace (JSON lines: timestamp, input_length, "
      "output_length,\n"
      "hash_ids) open-loop against the kvgate gateway or one engine worker, and report TTFT, "
      "inter-token\n"
      "latency, goodput, prefix reuse, per-worker share and hit rate over the oracle "
      "(docs/replay.md).\n\n"
      "Each hash id becomes a deterministic block of token ids (equal ids, equal tokens), so the "
      "trace's\n"
      "shared prefixes are shared prompts. Row i is sent at (timestamp_i - first timestamp) / "
      "--speedup\n"
      "as a streamed /v1/completions with the row's output_length as max_tokens.\n\n"
      "Example: kvgate-replay --target http://127.0.0.1:30000 --rows 0:2000 --speedup 6 "
      "--out out/");
  app.get_formatter()->column_width(40);
  f.trace = default_trace();
  const char* in = "Trace";
  app.add_option("--trace", f.trace,
                 "Mooncake JSONL trace (default: conversation_trace.jsonl in $KVGATE_TRACES_DIR, "
                 "else in the build's traces/ folder, unpacked from bench/traces/)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--rows", f.rows,
                 "Rows to replay, A:B = rows A..B-1 (0-based), A: or :B open-ended, N one row; "
                 "default all")
      ->group(in);
  app.add_option("--speedup", f.speedup,
                 "Send row i at its timestamp / S: S > 1 compresses the trace (more load), "
                 "must be positive and finite")
      ->capture_default_str()
      ->group(in);
  app.add_option_function<uint32_t>(
         "--block-tokens", [&f](uint32_t v) { f.block_tokens = v; },
         "Tokens per hash id, 1..512 (the trace's ids name 512-token blocks; fewer "
         "shrinks every prompt by the same factor) [512]")
      ->group(in);
  app.add_option_function<double>(
         "--length-factor", [&f](double v) { f.length_factor = v; },
         "The same as a fraction in (0, 1]: 0.25 gives 128 tokens per id")
      ->group(in);
  app.add_option("--token-seed", f.token_seed, "Seed of the token ids drawn per hash id")
      ->capture_default_str()
      ->group(in);
  app.add_option("--vocab", f.vocab, "Token ids are drawn below this")
      ->capture_default_str()
      ->group(in);
  app.add_flag("--chat", f.chat,
               "Send /v1/chat/completions: one message per hash id (roles alternating from user), "
               "its text words drawn from the id, so turns of a conversation extend each other "
               "as a chat client's do; the engines render and tokenize them")
      ->group(in);
  app.add_option("--chat-words-per-id", f.chat_words_per_id,
                 "Words per message with --chat (0: a third of the tokens per id)")
      ->capture_default_str()
      ->group(in);
  app.add_option("--tokenizer", f.tokenizer,
                 "With --chat: the engines' tokenizer.json or model folder (its chat template "
                 "renders the messages), for the oracle's token ids and prompt lengths; default "
                 "the built-in test tokenizer with --vocab, as kvgate-mock's")
      ->group(in);
  app.add_option("--max-output-tokens", f.max_output_tokens,
                 "Cap each row's output_length (0: no cap)")
      ->capture_default_str()
      ->group(in);

  const char* tgt = "Target";
  app.add_option("--target", f.target,
                 "The gateway or a worker, http://HOST:PORT (a gateway answers GET /workers)")
      ->required()
      ->group(tgt);
  app.add_option("--replica", f.replicas,
                 "Another replica of the gateway at --target, http://HOST:PORT (repeatable): rows "
                 "go round-robin across --target and the replicas, as a load balancer would send "
                 "them; the fleet is read from --target")
      ->group(tgt);
  app.add_option("--model", f.model, "The request's model")->capture_default_str()->group(tgt);
  app.add_option("--threads", f.threads, "I/O threads sending the requests (coroutines on them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->group(tgt);
  app.add_option("--request-timeout-secs", f.request_timeout_s,
                 "Longest wait for an answer's head (the TTFT of a queued request)")
      ->capture_default_str()
      ->group(tgt);
  app.add_option("--stream-idle-timeout-secs", f.idle_timeout_s, "Longest silence inside a stream")
      ->capture_default_str()
      ->group(tgt);

  const char* orc = "Oracle";
  app.add_option("--oracle", f.oracle,
                 "auto: the mock's per-request oracle_tokens when its records have them, else "
                 "the replay's own (events); events: follow every worker's KV events into a "
                 "chain index and look each prompt up right before it is sent; mock: only the "
                 "mock's; off")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "events", "mock", "off"}))
      ->group(orc);
  app.add_option("--workers-admin", f.workers_admin,
                 "Worker URLs (comma-separated) for KV endpoints and request records, instead of "
                 "the gateway's GET /workers")
      ->delimiter(',')
      ->group(orc);
  app.add_option("--oracle-block-size", f.oracle_block_size,
                 "The workers' KV block size (0: as they report it, else 16)")
      ->capture_default_str()
      ->group(orc);
  app.add_option("--hash-seed", f.hash_seed, "Seed of the router's block hashes (as the gateway's)")
      ->capture_default_str()
      ->group(orc);

  const char* rep = "Report";
  app.add_option("--out", f.out, "Directory for summary.json and requests.csv")
      ->capture_default_str()
      ->group(rep);
  app.add_option("--slo-ttft-ms", f.slo_ttft_ms, "Goodput: a good request's TTFT is at most this")
      ->capture_default_str()
      ->group(rep);
  app.add_option("--slo-itl-ms", f.slo_itl_ms,
                 "... and its mean inter-token latency ((e2e - TTFT) / (output tokens - 1)) "
                 "at most this")
      ->capture_default_str()
      ->group(rep);
  app.add_flag("--progress", f.progress,
               "Draw progress on stderr even when it is not a terminal (a line every 10 s)")
      ->group(rep);
  app.add_flag("--no-progress", f.no_progress, "No progress on stderr")->group(rep);
  app.add_flag("--strict", f.strict, "Exit 3 when any request was not answered")->group(rep);
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->group(rep);
}

// The mock's records joined to ours: the answering worker's by the response id, a pair's
// prefill's by request id (its answer went to the decode, not here). Per worker, the count of our
// requests it recorded; per request, the figures of the worker that computed the prompt: its
// oracle_tokens where it reports them and, for a pair, the prefill's cached tokens (the decode's
// usage counts the blocks it received as cached).
void join_mock_records(const std::vector<std::string>& worker_urls, bool take_oracle,
                       std::vector<RequestRecord>& records, Summary* summary, bool* any_oracle) {
  std::unordered_map<std::string, RequestRecord*> answered_by, prefilled_by;
  for (RequestRecord& r : records) {
    if (!r.answered) continue;
    if (!r.response_id.empty()) answered_by[r.worker + " " + r.response_id] = &r;
    if (!r.prefill_worker.empty() && !r.request_id.empty()) {
      prefilled_by[r.prefill_worker + " " + r.request_id] = &r;
    }
  }
  for (const std::string& url : worker_urls) {
    auto recs = fetch_records(url);
    if (!recs.ok()) {
      std::fprintf(stderr, "kvgate-replay: note: no request records from %s: %s\n", url.c_str(),
                   std::string(message_of(recs.status())).c_str());
      continue;
    }
    uint64_t ours = 0;
    for (const MockRecord& m : *recs) {
      RequestRecord* r = nullptr;
      bool computed_here = false;  // this worker computed the prompt
      if (auto it = answered_by.find(url + " " + m.id); it != answered_by.end()) {
        r = it->second;
        computed_here = r->prefill_worker.empty();
      } else if (auto pf = prefilled_by.find(url + " " + m.request_id);
                 !m.request_id.empty() && pf != prefilled_by.end()) {
        r = pf->second;
        computed_here = true;
        r->cached_tokens = m.cached_tokens;
      } else {
        continue;
      }
      ++ours;
      if (computed_here && take_oracle && m.oracle_tokens) {
        r->oracle_tokens = *m.oracle_tokens;
        r->oracle_source = OracleSource::kMock;
        *any_oracle = true;
      }
    }
    summary->workers[url].mock_records = ours;
  }
}

// The fleet behind the target: the workers --workers-admin names, else what the target lists
// (a gateway's GET /workers, waited on for a few seconds until each worker has its KV event
// streams). A target that cannot be listed leaves the fleet unknown (noted on stderr).
Status list_fleet(const Flags& f, const std::string& target, Fleet* fleet, bool* known) {
  if (!f.workers_admin.empty()) {
    for (const std::string& url : f.workers_admin) {
      auto w = describe_worker(url);
      if (!w.ok()) return w.status();
      fleet->workers.push_back(std::move(*w));
    }
    *known = true;
    auto d = discover(target);
    fleet->through_gateway = d.ok() && d->through_gateway;
  } else {
    auto d = discover(target);
    // A gateway lists a worker before it has read the worker's /server_info: give discovery a
    // few seconds to fill in the KV event endpoints the oracle follows.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (f.oracle != "off" && d.ok() && d->through_gateway &&
           std::chrono::steady_clock::now() < deadline &&
           std::any_of(d->workers.begin(), d->workers.end(),
                       [](const FleetWorker& w) { return w.streams.empty(); })) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      d = discover(target);
    }
    if (d.ok()) {
      *fleet = std::move(*d);
      *known = true;
    } else {
      std::fprintf(stderr, "kvgate-replay: note: cannot list the fleet (%s)\n",
                   std::string(message_of(d.status())).c_str());
    }
  }
  return absl::OkStatus();
}

// The summary of `records`, joined first to the mock's own records: its oracle (preferred where
// present) and its per-worker counts of our requests.
Summary summarize_with_mock_records(const Flags& f, const std::vector<std::string>& urls,
                                    const ReportConfig& rc, double wall_s,
                                    std::vector<RequestRecord>& records) {
  // The mock's records: its oracle (preferred when present) and its own request counts.
  Summary probe = summarize(records, rc, wall_s);
  bool mock_oracle = false;
  if (!urls.empty()) {
    join_mock_records(urls, f.oracle == "auto" || f.oracle == "mock", records, &probe,
                      &mock_oracle);
  }
  if (mock_oracle) {
    // The mock's figure replaces the replay's own wherever it exists.
    for (RequestRecord& r : records) {
      if (r.oracle_source == OracleSource::kEvents) {
        r.oracle_tokens.reset();
        r.oracle_source = OracleSource::kNone;
      }
    }
    // (records that the mock reported carry kMock already)
  } else if (f.oracle == "mock") {
    std::fprintf(stderr, "kvgate-replay: note: the mock's records carry no oracle_tokens\n");
  }
  Summary summary = summarize(records, rc, wall_s);
  for (auto& [url, w] : probe.workers) {
    // (Only workers the report counts: a disaggregated fleet's decode workers that computed
    // nothing alone are not among them.)
    auto it = summary.workers.find(url);
    if (w.mock_records && it != summary.workers.end()) it->second.mock_records = w.mock_records;
  }
  return summary;
}

// The report's configuration: the run's flags and what the fleet listing found.
ReportConfig report_config(const Flags& f, const std::string& target,
                           const std::vector<std::string>& replica_urls, size_t rows_selected,
                           uint32_t block_tokens, const Fleet& fleet,
                           const std::vector<std::string>& urls, bool disaggregated) {
  ReportConfig rc;
  rc.target = target;
  for (const std::string& r : replica_urls) rc.target += " " + r;
  rc.trace = f.trace;
  rc.rows = f.rows.empty() ? ":" : f.rows;
  rc.rows_selected = rows_selected;
  rc.speedup = f.speedup;
  rc.block_tokens = block_tokens;
  rc.max_output_tokens = f.max_output_tokens;
  rc.model = f.model;
  rc.slo_ttft_ms = f.slo_ttft_ms;
  rc.slo_itl_ms = f.slo_itl_ms;
  rc.through_gateway = fleet.through_gateway;
  rc.oracle_mode = f.oracle;
  rc.fleet_workers = urls;
  // A disaggregated fleet's shares are its prefill workers' (a decode worker counts only for
  // requests it computed alone).
  if (disaggregated) {
    rc.disaggregated = true;
    rc.fleet_workers.clear();
    for (const FleetWorker& w : fleet.workers) {
      if (w.role == "prefill") rc.fleet_workers.push_back(w.url);
    }
  }
  if (!fleet.through_gateway && urls.empty()) rc.fleet_workers.push_back(target);
  return rc;
}

int run(const Flags& f) {
  if (Status s = validate_speedup(f.speedup); !s.ok()) return fail(std::string(message_of(s)));
  PromptOptions po;
  po.seed = f.token_seed;
  po.vocab = f.vocab;
  po.block_tokens = corpus::kTraceBlockTokens;
  if (f.length_factor) {
    auto t = block_tokens_for_length_factor(*f.length_factor);
    if (!t.ok()) return fail(std::string(message_of(t.status())));
    if (f.block_tokens && *f.block_tokens != *t) {
      return fail("--block-tokens and --length-factor disagree; give one of them");
    }
    po.block_tokens = *t;
  } else if (f.block_tokens) {
    po.block_tokens = *f.block_tokens;
  }
  if (Status s = validate(po); !s.ok()) return fail(std::string(message_of(s)));
  auto range = parse_rows(f.rows);
  if (!range.ok()) return fail(std::string(message_of(range.status())));
  if (!(f.slo_ttft_ms > 0) || !(f.slo_itl_ms > 0)) return fail("SLOs must be positive");
  if (!(f.request_timeout_s > 0) || !(f.idle_timeout_s > 0))
    return fail("timeouts must be positive");
  const std::string target = canonical_url(f.target);
  if (auto ep = parse_http_url(target); !ep.ok()) return fail(std::string(message_of(ep.status())));

  const size_t max_rows = range->end == std::numeric_limits<size_t>::max() ? 0 : range->end;
  auto trace = corpus::read_trace(f.trace, max_rows);
  if (!trace.ok()) {
    return fail(std::string(message_of(trace.status())) +
                " (pass --trace; a small excerpt: tools/replay/testdata/conversation_head.jsonl)");
  }
  RunInput input;
  std::vector<uint64_t> stamps;
  for (size_t i = range->begin; i < trace->rows.size() && i < range->end; ++i) {
    input.rows.push_back(&trace->rows[i]);
    input.row_numbers.push_back(i);
    stamps.push_back(trace->rows[i].timestamp_ms);
  }
  if (input.rows.empty()) {
    return fail("--rows " + f.rows + " selects no row of " + f.trace + " (" +
                std::to_string(trace->rows.size()) + " rows)");
  }
  input.schedule = make_schedule(stamps, f.speedup);

  // The fleet: for the per-worker shares, the oracle's event streams and the mock's records.
  Fleet fleet;
  bool fleet_known = false;
  if (Status st = list_fleet(f, target, &fleet, &fleet_known); !st.ok()) {
    return fail(std::string(message_of(st)));
  }
  std::vector<KvStream> streams;
  std::vector<std::string> urls;
  uint32_t block_size = f.oracle_block_size;
  // A disaggregated fleet is judged where prompts are computed: the oracle follows its prefill
  // workers (its decode workers also hold each prompt's answer, which no prefill can reuse).
  const bool disaggregated = std::any_of(fleet.workers.begin(), fleet.workers.end(),
                                         [](const FleetWorker& w) { return w.role == "prefill"; });
  for (const FleetWorker& w : fleet.workers) {
    urls.push_back(w.url);
    if (!disaggregated || w.role == "prefill") {
      streams.insert(streams.end(), w.streams.begin(), w.streams.end());
    }
    if (block_size == 0) block_size = w.block_size;
  }
  if (block_size == 0) block_size = 16;

  std::unique_ptr<EventOracle> oracle;
  if (f.oracle == "auto" || f.oracle == "events") {
    auto o =
        streams.empty()
            ? Result<std::unique_ptr<EventOracle>>(
                  absl::NotFoundError(fleet_known ? "the fleet advertises no KV event streams"
                                                  : "the fleet is unknown"))
            : EventOracle::start(streams, {.block_size = block_size, .hash_seed = f.hash_seed});
    if (o.ok()) {
      oracle = std::move(*o);
    } else if (f.oracle == "events") {
      return fail("--oracle events: " + std::string(message_of(o.status())));
    } else {
      std::fprintf(stderr, "kvgate-replay: note: no event oracle: %s\n",
                   std::string(message_of(o.status())).c_str());
    }
  }

  RunnerOptions ro;
  ro.target_url = target;
  for (const std::string& r : f.replicas) {
    const std::string url = canonical_url(r);
    if (auto ep = parse_http_url(url); !ep.ok())
      return fail("--replica: " + std::string(message_of(ep.status())));
    ro.replica_urls.push_back(url);
  }
  ro.model = f.model;
  ro.max_output_tokens = f.max_output_tokens;
  ro.threads = f.threads;
  ro.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.request_timeout_s * 1e3));
  ro.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.idle_timeout_s * 1e3));
  std::shared_ptr<const tokenizer::PromptTokenizer> chat_tokenizer;
  if (f.chat) {
    if (f.tokenizer.empty()) {
      chat_tokenizer = tokenizer::test_prompt_tokenizer(f.vocab);
    } else {
      auto loaded = tokenizer::load_prompt_tokenizer(f.tokenizer);
      if (!loaded.ok()) return fail("--tokenizer: " + std::string(message_of(loaded.status())));
      chat_tokenizer = std::move(*loaded);
    }
    ro.chat_tokenizer = chat_tokenizer.get();
    ro.chat_words_per_id =
        f.chat_words_per_id > 0 ? f.chat_words_per_id : std::max<uint32_t>(1, po.block_tokens / 3);
  } else if (!f.tokenizer.empty()) {
    return fail("--tokenizer goes with --chat (token-id prompts need no tokenizer)");
  }
  PromptBuilder prompts(po);
  Runner runner(ro, prompts, oracle.get());
  Counters counters;
  const double span_s = std::chrono::duration<double>(input.schedule.span).count();
  std::fprintf(stderr,
               "kvgate-replay: %zu rows of %s at %gx (%.1f s of arrivals) to %s, %zu workers, "
               "oracle %s\n",
               input.rows.size(), f.trace.c_str(), f.speedup, span_s, target.c_str(),
               fleet.workers.size(), oracle ? "events" : f.oracle.c_str());
  Progress progress(counters, input.rows.size(), span_s);
  const bool tty = isatty(STDERR_FILENO) == 1;
  if (!f.no_progress && (tty || f.progress)) progress.start(tty);
  auto records = runner.run(input, &counters);
  progress.stop();
  if (!records.ok()) return fail(std::string(message_of(records.status())));

  const ReportConfig rc = report_config(f, target, ro.replica_urls, input.rows.size(),
                                        po.block_tokens, fleet, urls, disaggregated);
  Summary summary = summarize_with_mock_records(f, urls, rc, runner.wall_seconds(), *records);
  if (oracle) summary.oracle_stats = oracle->stats();
  oracle.reset();

  if (Status s = write_outputs(f.out, summary, *records); !s.ok()) {
    return fail(std::string(message_of(s)));
  }
  std::fputs(text_report(summary).c_str(), stdout);
  std::printf("  outputs        %s/summary.json, %s/requests.csv\n", f.out.c_str(), f.out.c_str());
  std::fflush(stdout);
  if (f.strict && summary.answered != summary.requests) return 3;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app;
  add_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (Status s = log::init({.level = flags.log_level}); !s.ok()) {
    std::fprintf(stderr, "kvgate-replay: %s\n", std::string(message_of(s)).c_str());
    return 2;
  }
  const int rc = run(flags);
  log::shutdown();
  return rc;
}
