// kvgate-corpus: builds the Mooncake index corpus that kvgate-bench-index replays, or checks one.
//
//   kvgate-corpus build --out mooncake.kvgc      (the shipped conversation trace, published
//   setting) kvgate-corpus info mooncake.kvgc
//
// The expansion is in corpus_builder.h, the file format in corpus_file.h, both summarised in
// docs/index.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "CLI/CLI.hpp"
#include "kvgate/corpus/corpus_builder.h"
#include "kvgate/corpus/corpus_file.h"
#include "kvgate/corpus/mooncake_trace.h"

namespace {

using kvgate::corpus::BuildOptions;

int fail(const kvgate::Status& s) {
  std::fprintf(stderr, "kvgate-corpus: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Builds a deterministic stream of KV-index lookups and engine events from a Mooncake\n"
      "request trace, for kvgate-bench-index and the index tests.\n\n"
      "Each trace row is a request naming its prompt's 512-token blocks by hash id. The builder\n"
      "splits every block into --length-factor smaller ones, replays the trace --duplication\n"
      "times over disjoint id spaces, sends each request to one of --workers simulated engines\n"
      "(seeded draw), and records the router's lookup of the request's chain followed by that\n"
      "engine's events: a prefix-caching pool of --pool-blocks blocks that keeps the cached\n"
      "prefix, stores the rest and evicts least-recently-used blocks (tail first).\n\n"
      "The defaults are the published setting: conversation trace, 128 workers, duplication 20,\n"
      "length factor 4, 128-token blocks, 16,384 blocks per worker.",
      "kvgate-corpus"};
  app.require_subcommand(1);

  auto* build =
      app.add_subcommand("build", "expand a trace into a corpus file and print its totals");
  std::string trace_path, traces_dir, trace_name = "conversation_trace.jsonl", out;
  BuildOptions o;
  size_t max_rows = 0;
  build->add_option("--trace", trace_path, "the trace file (JSON lines)");
  build->add_option("--traces-dir", traces_dir,
                    "folder holding the traces, used with --trace-name when --trace is not given "
                    "(default: $KVGATE_TRACES_DIR, else the build's traces/ folder, unpacked from "
                    "bench/traces/)");
  build->add_option("--trace-name", trace_name, "trace file inside --traces-dir")
      ->capture_default_str();
  build->add_option("--out,-o", out, "corpus file to write")->required();
  build->add_option("--workers", o.workers, "simulated engine workers (holders)")
      ->capture_default_str();
  build
      ->add_option("--duplication", o.duplication,
                   "copies of the trace over disjoint id spaces (more write pressure)")
      ->capture_default_str();
  build
      ->add_option("--length-factor", o.length_factor,
                   "blocks each 512-token trace block is split into")
      ->capture_default_str();
  build
      ->add_option("--block-tokens", o.block_tokens,
                   "tokens per block; must equal 512 / --length-factor (recorded in the header)")
      ->capture_default_str();
  build->add_option("--pool-blocks", o.pool_blocks, "KV pool capacity per worker, in blocks")
      ->capture_default_str();
  build->add_option("--seed", o.seed, "seed of the per-request worker draw")->capture_default_str();
  build
      ->add_option("--hash-seed", o.hash_seed,
                   "BlockHasher seed of the local and sequence hashes (the indexers' default)")
      ->capture_default_str();
  build->add_option("--max-rows", max_rows, "use only the trace's first N rows (0: all)")
      ->capture_default_str();

  auto* info = app.add_subcommand("info", "check a corpus file completely and print its totals");
  std::string info_path;
  info->add_option("file", info_path, "corpus file")->required();

  CLI11_PARSE(app, argc, argv);

  if (info->parsed()) {
    auto corpus = kvgate::corpus::Corpus::load(info_path);
    if (!corpus.ok()) return fail(corpus.status());
    std::printf("%s: %llu bytes, checksums and records OK\n%s", info_path.c_str(),
                static_cast<unsigned long long>(corpus->file_bytes()),
                kvgate::corpus::describe(corpus->header()).c_str());
    return 0;
  }

  if (trace_path.empty()) {
    if (traces_dir.empty()) {
      const char* env = std::getenv("KVGATE_TRACES_DIR");
      traces_dir = env != nullptr && *env != '\0' ? env : KVGATE_DEFAULT_TRACES_DIR;
    }
    trace_path = (std::filesystem::path(traces_dir) / trace_name).string();
  }
  if (kvgate::Status s = kvgate::corpus::validate(o); !s.ok()) return fail(s);
  const auto start = std::chrono::steady_clock::now();
  auto trace = kvgate::corpus::read_trace(trace_path, max_rows);
  if (!trace.ok()) return fail(trace.status());
  const std::string name = std::filesystem::path(trace_path).filename().string();
  auto header = kvgate::corpus::build_corpus(*trace, name, o, out);
  if (!header.ok()) return fail(header.status());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu trace rows, built in %.1f s\n%s", out.c_str(), trace->rows.size(), secs,
              kvgate::corpus::describe(*header).c_str());
  return 0;
}
