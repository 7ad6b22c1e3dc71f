#include "kvgate/core/stop_signals.h"

#include <pthread.h>

#include "kvgate/core/log.h"

namespace kvgate {

sigset_t block_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

int await_stop_signal(const sigset_t& signals, const char* name,
                      const std::function<void()>& on_reload) {
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) return sig;
    if (on_reload) {
      on_reload();
      continue;
    }
    log::get(name)->warn(
        "SIGHUP: there is no configuration to reload; still serving (SIGTERM or SIGINT stop)");
  }
}

}  // namespace kvgate
