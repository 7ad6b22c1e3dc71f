// RelayFollower: the gateway's side of a relay. One Subscribe stream per followed (worker, rank),
// applied to the gateway's index under the holder given for it.
//
// Per stream it keeps (epoch, last applied seq) and resumes from them after any break: a cut
// link, a relay that went silent (no message, not even a heartbeat, for `silence_timeout`), a
// relay restart (then the relay answers OutOfRange: the holder is emptied and rebuilt from the
// snapshot that follows). Anything that does not continue what was applied (a batch of another
// epoch, a seq that skips one, a heartbeat past the last batch received, a snapshot cut short)
// makes the holder start over: emptied, subscribed fresh. Nothing is applied twice or skipped.
//
// Threading: add(), remove(), stats() and stop() from any thread. Streams are read on gRPC's
// callback threads, one message at a time per stream, so a holder's writes never overlap (as
// Indexer::apply requires); one thread of its own reconnects and watches for silence. The index
// must accept writes for different holders at once (Concurrency::writers_per_holder).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/ids.h"
#include "kvgate/core/result.h"
#include "kvgate/index/indexer.h"
#include "kvgate/relay/v1/relay.pb.h"

namespace kvgate::relay {

struct FollowerOptions {
  std::string target;                             // the relay's HOST:PORT
  std::chrono::milliseconds reconnect_min{100};   // backoff after a failed or broken stream,
  std::chrono::milliseconds reconnect_max{2000};  // doubling up to this
  // No message for this long (the relay sends heartbeats every second by default): the link is
  // taken for dead and the stream resumed on a new one.
  std::chrono::milliseconds silence_timeout{3000};
  // Keepalive pings on the connection, spaced as grpc-core servers accept (no too_many_pings).
  std::chrono::milliseconds keepalive{30'000};
};

struct FollowCallbacks {
  // The engine's load, from every batch and heartbeat (on a gRPC thread: store it, never block).
  std::function<void(const v1::Load&)> on_load;
  // After each batch is applied (not snapshot chunks), with the engine's publish time, seconds
  // since the Unix epoch (0: unknown). On a gRPC thread, like on_load.
  std::function<void(double engine_ts)> on_batch;
};

struct FollowStats {
  std::string worker;
  uint32_t rank = 0;
  bool connected = false;  // a stream is open and has delivered something
  uint64_t epoch = 0;
  std::optional<uint64_t> last_seq;
  uint64_t batches = 0;    // batches applied
  uint64_t snapshots = 0;  // snapshots applied (each after an OutOfRange)
  uint64_t streams = 0;    // streams opened
  uint64_t resumes = 0;    // of which resumed from (epoch, seq) after a break
  uint64_t restarts = 0;   // the holder emptied to start over (not counting snapshots)
  uint64_t heartbeats = 0;
  uint64_t blocks = 0;     // block copies the holder holds now (from the index's apply results)
  std::string last_error;  // why the last stream ended, if it failed
};

class RelayFollower {
 public:
  RelayFollower(index::Indexer& index, FollowerOptions options);
  ~RelayFollower();
  RelayFollower(const RelayFollower&) = delete;
  RelayFollower& operator=(const RelayFollower&) = delete;

  // Follows the relay's (worker, rank) into `holder`. ALREADY_EXISTS if followed already.
  Status add(std::string worker, uint32_t rank, HolderId holder, FollowCallbacks callbacks = {});
  // Stops following and removes the holder from the index (after its stream has ended). False if
  // it was not followed.
  bool remove(std::string_view worker, uint32_t rank);
  std::optional<FollowStats> stats(std::string_view worker, uint32_t rank) const;
  // Every followed (worker, rank), ordered by worker then rank.
  std::vector<FollowStats> stats() const;
  // Cuts every open stream as a broken link would (they resume); for tests and drills.
  void cut_links();
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvgate::relay
