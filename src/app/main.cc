// kvgate: the gateway binary. `kvgate --help` lists every flag; `kvgate relay --help` the relay
// role's (relayd).
#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "kvgate/app/config.h"
#include "kvgate/app/gateway.h"
#include "kvgate/core/log.h"
#include "kvgate/core/service_notify.h"
#include "kvgate/core/stop_signals.h"
#include "kvgate/relayd/relay_role.h"

int main(int argc, char** argv) {
  // Before anything else can start a thread (the log writer, gRPC, ZMQ): every thread inherits
  // the mask, so a stop signal reaches only the sigwait() below, in any phase of the process.
  const sigset_t stop_signals = kvgate::block_stop_signals();
#ifdef NDEBUG
  // Debian's Abseil is built with its debug checks on, so every Mutex::Lock would also record the
  // lock order in a process-wide graph behind a lock of its own (about a microsecond a request on
  // the proxy path, and a point where every thread meets). Builds with assertions (debug and the
  // sanitizer presets) keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  if (argc > 1 && std::string_view(argv[1]) == "relay") {
    return kvgate::relayd::run_relay(argc - 1, argv + 1);
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto loaded = kvgate::app::load_config(args);
  if (!loaded.ok()) {
    std::fprintf(stderr, "kvgate: %s\n", std::string(kvgate::message_of(loaded.status())).c_str());
    return 2;
  }
  if (loaded->exit_code) return *loaded->exit_code;  // --help, --version
  const kvgate::app::GatewayConfig& config = loaded->config;
  auto format = kvgate::log::parse_format(config.log_format);
  std::string log_file;
  if (!config.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config.log_dir, ec);
    if (ec) {
      std::fprintf(stderr, "kvgate: --log-dir %s: %s\n", config.log_dir.c_str(),
                   ec.message().c_str());
      return 2;
    }
    log_file = config.log_dir + "/kvgate.log";  // the gateway opens DIR/access.log itself
  }
  if (kvgate::Status s =
          kvgate::log::init({.level = config.log_level, .format = *format, .file = log_file});
      !s.ok()) {
    std::fprintf(stderr, "kvgate: %s\n", std::string(kvgate::message_of(s)).c_str());
    return 2;
  }
  auto logger = kvgate::log::get("main");
  for (const auto& flag : config.ignored_flags) {
    logger->warn("{} has no effect: kvgate's index follows the engines' KV events", flag);
  }
  for (const auto& warning : config.launch_warnings) logger->warn("{}", warning);

  // Every client connection holds an upstream one: take every descriptor the system allows.
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }

  auto gateway = kvgate::app::Gateway::create(config);
  if (!gateway.ok()) {
    logger->critical("cannot start: {}", kvgate::message_of(gateway.status()));
    kvgate::log::shutdown();
    return 1;
  }
  if (kvgate::Status s = (*gateway)->start(); !s.ok()) {
    logger->critical("cannot start: {}", kvgate::message_of(s));  // it names the listener
    kvgate::log::shutdown();
    return 1;
  }
  // One line on stdout that scripts can wait for (the port is the bound one, also for --port 0).
  std::printf("kvgate listening on %s:%u\n", config.host.c_str(), (*gateway)->port());
  if ((*gateway)->grpc_port() != 0) {
    std::printf("kvgate gRPC listening on %s:%u\n",
                (config.grpc_host.empty() ? config.host : config.grpc_host).c_str(),
                (*gateway)->grpc_port());
  }
  std::fflush(stdout);
  logger->info("kvgate listening on {}:{} (policy {}, kv index {}, {} workers configured)",
               config.host, (*gateway)->port(), kvgate::policy::policy_kind_name(config.policy),
               kvgate::index::index_kind_name(config.kv_index), config.worker_urls.size());

  // A signal that came while the gateway started is taken here: the drain runs as for any.
  // SIGHUP reads the command line's configuration (its --config file) again.
  (*gateway)->set_config_reader([args] { return kvgate::app::load_config(args); }, loaded->values);
  const std::string serving = "serving on port " + std::to_string((*gateway)->port());
  kvgate::service::ready(serving);
  const int sig = kvgate::await_stop_signal(stop_signals, "main", [&] {
    kvgate::service::reloading();
    const kvgate::app::ReloadOutcome r = (*gateway)->reload();
    kvgate::service::ready(r.ok ? serving : serving + "; last reload refused: " + r.error);
  });
  // A second signal while draining means "now": exit without waiting for anything.
  std::thread([stop_signals, logger] {
    const int again = kvgate::await_stop_signal(stop_signals, "main");
    logger->warn("signal {} while draining: exiting at once with status {}", again,
                 kvgate::kExitSecondSignal);
    kvgate::log::shutdown();
    std::_Exit(kvgate::kExitSecondSignal);
  }).detach();
  kvgate::service::stopping("draining");
  const auto grace = config.shutdown_grace_period;
  logger->info("signal {}: draining (new requests get 503; {} s for those in flight)", sig,
               std::chrono::duration<double>(grace).count());
  const size_t cut = (*gateway)->drain(grace);
  if (cut > 0) {
    logger->warn("grace period over: {} requests still running were ended", cut);
  } else {
    logger->info("drained: every request in flight finished");
  }
  (*gateway)->stop();
  gateway->reset();
  kvgate::log::shutdown();
  return 0;
}
