// A daemon's stop signals: SIGINT and SIGTERM blocked in the calling thread before it starts any
// other (threads inherit the mask), so only the main thread's sigwait() sees them; SIGPIPE
// ignored (a peer that closes a socket is an error code, not a death).
//
// Threading: call from main before any thread starts.
#pragma once

#include <signal.h>

namespace kvgate {

// Returns the set to sigwait() on.
sigset_t block_stop_signals();

}  // namespace kvgate
