// Prefill/decode disaggregation in the mock, SGLang's and vLLM's protocols (docs/mock.md): the
// counters both roles keep, and the prefill's room tables, which its bootstrap server serves to
// decodes.
//
// A room is what a decode needs to take over a prompt the prefill computed: its token ids and the
// number of full blocks. The router names it (bootstrap_room) in the body it sends both workers of
// a pair; the prefill opens it when its request arrives, makes it ready when the prompt's prefill
// is done, and frees it when a decode pulls it or after the room timeout. A vLLM transfer is a
// room too, in a table of its own: the prefill names it by the block ids it issues (the room id
// is the first of them) and makes it ready as it answers.
//
// Threading: none. A worker's RoomTable and PdStats live on the worker's context (its HTTP and
// bootstrap handlers and step timers all run there); every call comes from that thread. The
// Prometheus counters PdStat feeds are atomic and read by /metrics on the same thread anyway.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "kvgate/core/clock.h"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/tokenizer.h"
#include "kvgate/metrics/metrics.h"

namespace kvgate::mock::detail {

// Why a decode could not take over a prefill's work.
enum class PdFailure : uint8_t {
  kUnreachable,     // the bootstrap server could not be reached or cut the answer
  kTimeout,         // the room was not ready within the transfer timeout
  kUnknownRoom,     // the prefill never received the room: a wrong pairing
  kRoomGone,        // already pulled, expired, or the prefill request failed
  kPromptMismatch,  // the room's prompt is not this request's: a wrong pairing
  kBadAnswer,       // the bootstrap server answered something else
  kPoolFull,        // too few free blocks to receive the transfer
  kCount
};
std::string_view pd_failure_name(PdFailure f);

// One counter, kept as a number for /admin/pd and as a Prometheus series for /metrics.
struct PdStat {
  uint64_t n = 0;
  metrics::Counter* series = nullptr;
  void add(uint64_t k = 1) {
    n += k;
    if (series != nullptr) series->Increment(double(k));
  }
};

struct PdStats {
  PdStat rooms_published, rooms_pulled, rooms_expired, rooms_abandoned;
  PdStat transfers, blocks_transferred, blocks_skipped;
  std::array<PdStat, size_t(PdFailure::kCount)> failures;

  // Registers the kvgate_mock_pd_* families in `registry` and ties every counter to its series.
  void register_metrics(metrics::Registry& registry, const std::string& model);
  // {"rooms":{"published":..,"pulled":..,"expired":..,"abandoned":..},"transfers":..,
  //  "blocks_transferred":..,"blocks_skipped":..,"failures":{"<reason>":..}}: members of an
  //  object the caller opened.
  void write_json(JsonWriter& w) const;
};

class RoomTable {
 public:
  struct Room {
    std::vector<TokenId> prompt;
    uint32_t blocks = 0;  // full blocks of the prompt the prefill computed
    uint32_t dp_rank = 0;
  };
  enum class State : uint8_t { kUnknown, kPending, kReady, kGone };

  RoomTable(boost::asio::io_context& ctx, PdStats& stats);
  ~RoomTable();

  // A prefill request took room `id`; false when the room is open already (pending or ready).
  bool open(uint64_t id);
  // The prefill computed the prompt: the room can be pulled until `timeout` has passed.
  void ready(uint64_t id, Room room, Duration timeout);
  // The prefill request ended; a room it never made ready is gone ("abandoned").
  void abandon(uint64_t id);
  State state(uint64_t id) const;
  // Why a gone room went: "pulled", "expired" or "abandoned".
  std::string_view gone_reason(uint64_t id) const;
  // A ready room, still held; nullptr otherwise. Valid until the table next changes.
  const Room* ready_room(uint64_t id) const;
  // Pulls a ready room (it is gone afterwards).
  std::optional<Room> take(uint64_t id);
  size_t open_rooms() const { return rooms_.size(); }

  // A long poll waits on `timer`; any change to room `id` cancels it so the poll looks again.
  void add_waiter(uint64_t id, boost::asio::steady_timer* timer);
  void remove_waiter(uint64_t id, boost::asio::steady_timer* timer);
  // Shutdown: cancels every expiry and wakes every poll.
  void close();

 private:
  struct Entry {
    bool ready = false;
    Room room;
    std::unique_ptr<boost::asio::steady_timer> expiry;
  };
  void bury(uint64_t id, std::string_view reason);
  void wake(uint64_t id);

  boost::asio::io_context& ctx_;
  PdStats& stats_;
  absl::flat_hash_map<uint64_t, Entry> rooms_;
  // The last rooms that went, so a late or second pull learns why (410) instead of "unknown".
  absl::flat_hash_map<uint64_t, std::string_view> gone_;
  std::deque<uint64_t> gone_order_;
  absl::flat_hash_map<uint64_t, std::vector<boost::asio::steady_timer*>> waiters_;
};

}  // namespace kvgate::mock::detail
