// The prefill/decode pieces shared by both roles: roles' names, failure reasons, the counters and
// the prefill's room table (detail/pd.h).
#include "mock/detail/pd.h"

#include "kvgate/mock/fleet.h"

namespace kvgate::mock {

std::string_view pd_role_name(PdRole role) {
  switch (role) {
    case PdRole::kPrefill:
      return "prefill";
    case PdRole::kDecode:
      return "decode";
    case PdRole::kRegular:
      break;
  }
  return "regular";
}

std::optional<PdRole> parse_pd_role(std::string_view name) {
  if (name == "regular") return PdRole::kRegular;
  if (name == "prefill") return PdRole::kPrefill;
  if (name == "decode") return PdRole::kDecode;
  return std::nullopt;
}

namespace detail {
namespace {

// Gone rooms remembered for a 410: enough for every room a second pull could plausibly name.
constexpr size_t kGoneRemembered = 4096;

}  // namespace

std::string_view pd_failure_name(PdFailure f) {
  switch (f) {
    case PdFailure::kUnreachable:
      return "unreachable";
    case PdFailure::kTimeout:
      return "timeout";
    case PdFailure::kUnknownRoom:
      return "unknown_room";
    case PdFailure::kRoomGone:
      return "room_gone";
    case PdFailure::kPromptMismatch:
      return "prompt_mismatch";
    case PdFailure::kBadAnswer:
      return "bad_answer";
    case PdFailure::kPoolFull:
      return "pool_full";
    case PdFailure::kCount:
      break;
  }
  return "unknown";
}

void PdStats::register_metrics(metrics::Registry& registry, const std::string& model) {
  auto& room_family = metrics::counter_family(
      registry, "kvgate_mock_pd_rooms_total",
      "Prefill rooms by event: published (prompt computed), pulled by a decode, expired "
      "unpulled, abandoned (the prefill request failed first).");
  auto& transfer_family = metrics::counter_family(registry, "kvgate_mock_pd_transfers_total",
                                                  "KV transfers a decode worker completed.");
  auto& block_family = metrics::counter_family(
      registry, "kvgate_mock_pd_transfer_blocks_total",
      "Blocks of the rooms a decode pulled: transferred, or skipped because it held them.");
  auto& failure_family =
      metrics::counter_family(registry, "kvgate_mock_pd_transfer_failures_total",
                              "Decode requests failed before generating, by reason.");
  metrics::Labels l = {{"model_name", model}};
  auto with = [&l](const char* key, std::string_view value) {
    metrics::Labels out = l;
    out[key] = std::string(value);
    return out;
  };
  rooms_published.series = &room_family.Add(with("event", "published"));
  rooms_pulled.series = &room_family.Add(with("event", "pulled"));
  rooms_expired.series = &room_family.Add(with("event", "expired"));
  rooms_abandoned.series = &room_family.Add(with("event", "abandoned"));
  transfers.series = &transfer_family.Add(l);
  blocks_transferred.series = &block_family.Add(with("kind", "transferred"));
  blocks_skipped.series = &block_family.Add(with("kind", "skipped"));
  for (size_t i = 0; i < failures.size(); ++i) {
    failures[i].series =
        &failure_family.Add(with("reason", pd_failure_name(static_cast<PdFailure>(i))));
  }
}

void PdStats::write_json(JsonWriter& w) const {
  w.key("rooms").begin_object();
  w.member("published", rooms_published.n).member("pulled", rooms_pulled.n);
  w.member("expired", rooms_expired.n).member("abandoned", rooms_abandoned.n).end_object();
  w.member("transfers", transfers.n).member("blocks_transferred", blocks_transferred.n);
  w.member("blocks_skipped", blocks_skipped.n);
  w.key("failures").begin_object();
  for (size_t i = 0; i < failures.size(); ++i) {
    w.member(pd_failure_name(static_cast<PdFailure>(i)), failures[i].n);
  }
  w.end_object();
}

RoomTable::RoomTable(boost::asio::io_context& ctx, PdStats& stats) : ctx_(ctx), stats_(stats) {}
RoomTable::~RoomTable() = default;

bool RoomTable::open(uint64_t id) {
  if (rooms_.contains(id)) return false;
  // A room id used again (a router's random draw, or a retried request) starts afresh.
  gone_.erase(id);
  rooms_.try_emplace(id);
  wake(id);
  return true;
}

void RoomTable::ready(uint64_t id, Room room, Duration timeout) {
  auto it = rooms_.find(id);
  if (it == rooms_.end() || it->second.ready) return;
  Entry& e = it->second;
  e.ready = true;
  e.room = std::move(room);
  e.expiry = std::make_unique<boost::asio::steady_timer>(ctx_);
  e.expiry->expires_after(timeout);
  boost::asio::steady_timer* expiry = e.expiry.get();
  e.expiry->async_wait([this, id, expiry](const boost::system::error_code& ec) {
    if (ec) return;  // pulled (the timer went with the room) or closed
    auto entry = rooms_.find(id);
    if (entry == rooms_.end() || entry->second.expiry.get() != expiry) return;
    rooms_.erase(entry);
    stats_.rooms_expired.add();
    bury(id, "expired");
  });
  stats_.rooms_published.add();
  wake(id);
}

void RoomTable::abandon(uint64_t id) {
  auto it = rooms_.find(id);
  if (it == rooms_.end() || it->second.ready) return;
  rooms_.erase(it);
  stats_.rooms_abandoned.add();
  bury(id, "abandoned");
  wake(id);
}

RoomTable::State RoomTable::state(uint64_t id) const {
  if (auto it = rooms_.find(id); it != rooms_.end()) {
    return it->second.ready ? State::kReady : State::kPending;
  }
  return gone_.contains(id) ? State::kGone : State::kUnknown;
}

std::string_view RoomTable::gone_reason(uint64_t id) const {
  auto it = gone_.find(id);
  return it == gone_.end() ? std::string_view() : it->second;
}

const RoomTable::Room* RoomTable::ready_room(uint64_t id) const {
  auto it = rooms_.find(id);
  return it == rooms_.end() || !it->second.ready ? nullptr : &it->second.room;
}

std::optional<RoomTable::Room> RoomTable::take(uint64_t id) {
  auto it = rooms_.find(id);
  if (it == rooms_.end() || !it->second.ready) return std::nullopt;
  Room room = std::move(it->second.room);
  rooms_.erase(it);  // destroys the expiry timer, whose wait then ends with operation_aborted
  stats_.rooms_pulled.add();
  bury(id, "pulled");
  return room;
}

void RoomTable::bury(uint64_t id, std::string_view reason) {
  if (gone_.insert_or_assign(id, reason).second) gone_order_.push_back(id);
  while (gone_order_.size() > kGoneRemembered) {
    gone_.erase(gone_order_.front());
    gone_order_.pop_front();
  }
}

void RoomTable::add_waiter(uint64_t id, boost::asio::steady_timer* timer) {
  waiters_[id].push_back(timer);
}

void RoomTable::remove_waiter(uint64_t id, boost::asio::steady_timer* timer) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  std::erase(it->second, timer);
  if (it->second.empty()) waiters_.erase(it);
}

void RoomTable::wake(uint64_t id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (boost::asio::steady_timer* t : it->second) t->cancel();
}

void RoomTable::close() {
  for (auto& [id, e] : rooms_) {
    if (e.expiry) e.expiry->cancel();
  }
  for (auto& [id, timers] : waiters_) {
    for (boost::asio::steady_timer* t : timers) t->cancel();
  }
}

}  // namespace detail
}  // namespace kvgate::mock
