// `kvgate relay`: the KV-event relay role of the kvgate binary (the relay module's feed and gRPC
// server, with engine discovery through /server_info). `kvgate relay --help` lists its flags.
#pragma once

namespace kvgate::app {

// argv[0] is "relay". Returns the process's exit code (after SIGINT or SIGTERM).
int run_relay(int argc, char** argv);

}  // namespace kvgate::app
