// A daemon's signals: SIGINT, SIGTERM and SIGHUP blocked in the calling thread before it starts
// any other (threads inherit the mask, libraries' threads included), so only a sigwait() sees
// them and no thread dies of one; SIGPIPE ignored (a peer that closes a socket is an error code,
// not a death).
//
// SIGHUP never ends the process: await_stop_signal() runs the caller's reload for it (the
// gateway reads its configuration again) and waits on; without one, it logs that nothing
// reloads.
//
// Threading: block_stop_signals() from main before any thread starts (the first thing main
// does); await_stop_signal() from any thread, each signal going to one waiter.
#pragma once

#include <signal.h>

#include <functional>

namespace kvgate {

// Returns the set to wait on.
sigset_t block_stop_signals();

// Waits for SIGINT or SIGTERM and returns it; a SIGHUP meanwhile runs `on_reload` (on this
// thread), or without one is logged (logger `name`, at warning: an operator who sent it expected
// something), and is waited past.
int await_stop_signal(const sigset_t& signals, const char* name,
                      const std::function<void()>& on_reload = {});

// The exit status of a process that a second stop signal ended during its drain.
inline constexpr int kExitSecondSignal = 1;

}  // namespace kvgate
