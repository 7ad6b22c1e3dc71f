// The apply lag the relay adds: one engine rank publishing on a real ZMQ socket, read at once
// directly (the subscription a gateway's event lane runs) and through the relay (its feed, its
// history, gRPC, a follower applying to a chain index); publish-to-delivery p50 / p99 of each.
#pragma once

namespace kvgate::relay {

// Publishes `batches` one-block batches at `rate` per second after a warm-up, then prints the two
// paths' delays and their difference.
void bench_lag(int batches, double rate);

}  // namespace kvgate::relay
