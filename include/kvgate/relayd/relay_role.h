// relayd: `kvgate relay`, the KV-event relay's process role in the kvgate binary: its flags, engine
// discovery through /server_info, the relay module's feed and gRPC server, and its own /metrics.
// `kvgate relay --help` lists its flags.
//
// Threading: call run_relay() on main's thread before any other thread starts (every thread must
// inherit the stop-signal mask, core/stop_signals.h); it returns after SIGINT or SIGTERM.
#pragma once

namespace kvgate::relayd {

// argv[0] is "relay". Returns the process's exit code (after SIGINT or SIGTERM).
int run_relay(int argc, char** argv);

}  // namespace kvgate::relayd
