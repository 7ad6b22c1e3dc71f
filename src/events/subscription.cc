#include "kvgate/events/subscription.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <utility>

#include <zmq_addon.hpp>

#include "kvgate/core/log.h"
#include "kvgate/events/encode.h"

namespace kvgate::events {
namespace {

std::span<const uint8_t> bytes_of(const zmq::message_t& m) {
  return {static_cast<const uint8_t*>(m.data()), m.size()};
}

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("events");
  return l;
}

void common_options(zmq::socket_t& s, const SubscriptionOptions& o, int rcvhwm) {
  s.set(zmq::sockopt::linger, 0);
  // A bounded receive queue: past it ZMQ stops reading the connection and the publisher drops
  // what its own queue cannot take (a gap, replayed later), so a flood costs the engine's memory,
  // not ours. An oversized message drops the connection before it is allocated.
  s.set(zmq::sockopt::rcvhwm, rcvhwm);
  s.set(zmq::sockopt::maxmsgsize, o.bounds.max_message_bytes);
  s.set(zmq::sockopt::reconnect_ivl, 100);
  s.set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(o.reconnect_max.count()));
  s.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(o.heartbeat.count()));
  s.set(zmq::sockopt::heartbeat_timeout, static_cast<int>(3 * o.heartbeat.count()));
}

}  // namespace

void configure_context(zmq::context_t& ctx) { ctx.set(zmq::ctxopt::max_sockets, 1 << 16); }

Subscription::Subscription(zmq::context_t& ctx, SubscriptionSpec spec, SubscriptionOptions options,
                           Sink sink, const Clock& clock)
    : ctx_(ctx),
      spec_(std::move(spec)),
      options_(options),
      sink_(std::move(sink)),
      clock_(clock),
      sub_(ctx, zmq::socket_type::sub),
      decoder_(options.limits),
      normalizer_(options.hash_seed),
      checker_(spec_.hash_check),
      quarantine_(options.bounds.quarantine),
      cursor_(Cursor::Options{!spec_.replay_endpoint.empty(), options.max_buffered}),
      pacer_(options.bounds.replay_pacing),
      reconnect_pacer_({.min_interval = std::chrono::milliseconds(100),
                        .max_interval = options.reconnect_max}) {}

Subscription::~Subscription() = default;

Status Subscription::start() {
  try {
    common_options(sub_, options_, options_.bounds.live_hwm);
    sub_.set(zmq::sockopt::subscribe, spec_.topic);
    // Pushed load records travel under a topic of their own (an empty topic already has them).
    if (!spec_.topic.empty()) sub_.set(zmq::sockopt::subscribe, std::string(kLoadTopic));
    open_monitor();
    sub_.connect(spec_.endpoint);
    if (!spec_.replay_endpoint.empty()) open_replay_socket();
  } catch (const zmq::error_t& e) {
    return absl::InvalidArgumentError("cannot connect KV-event sockets (" + spec_.endpoint + ", " +
                                      spec_.replay_endpoint + "): " + e.what());
  }
  // Everything the engine retains, now: a gateway (re)started on a running fleet is not blind
  // until each engine happens to publish.
  cursor_.on_start(&actions_);
  MessageReport r;
  run_actions(&r);
  if (!r.verdict.empty()) {
    r.verdict = "start: " + r.verdict;
    report(r);
  }
  return absl::OkStatus();
}

void Subscription::open_monitor() {
  static std::atomic<uint64_t> next{0};
  const std::string address = "inproc://kvgate-events-monitor-" + std::to_string(next++);
  if (zmq_socket_monitor(sub_.handle(), address.c_str(), ZMQ_EVENT_DISCONNECTED) != 0) return;
  monitor_.emplace(ctx_, zmq::socket_type::pair);
  monitor_->set(zmq::sockopt::linger, 0);
  monitor_->connect(address);
}

void Subscription::watch_connection() {
  if (!monitor_) return;
  while (monitor_->get(zmq::sockopt::events) & ZMQ_POLLIN) {
    frames_.clear();
    if (!zmq::recv_multipart(*monitor_, std::back_inserter(frames_), zmq::recv_flags::dontwait)) {
      break;
    }
    uint16_t event = 0;
    if (!frames_.empty() && frames_[0].size() >= sizeof event) {
      std::memcpy(&event, frames_[0].data(), sizeof event);
    }
    if (event != ZMQ_EVENT_DISCONNECTED) continue;
    ++disconnects_;
    reconnect_pending_ = true;
  }
  const MonoTime now = clock_.now();
  if (!reconnect_pending_ || !reconnect_pacer_.ready(now)) return;
  reconnect_pending_ = false;
  reconnect_pacer_.sent(now);
  KVGATE_LOG_EVERY_MS(logger(), spdlog::level::info, 5000,
                      "KV-event connection to {} ({} rank {}) dropped (the engine went away, or a "
                      "message over the size limit): connecting again",
                      spec_.endpoint, spec_.worker_name, spec_.key.rank);
  try {
    sub_.disconnect(spec_.endpoint);
  } catch (const zmq::error_t&) {  // ZMQ had already let it go
  }
  sub_.connect(spec_.endpoint);
}

void Subscription::open_replay_socket() {
  ++sockets_version_;
  replay_.reset();  // closing drops any replies still in flight for an abandoned request
  replay_.emplace(ctx_, zmq::socket_type::dealer);
  common_options(*replay_, options_, options_.bounds.replay_hwm);
  // No ZMQ_IMMEDIATE: a request made before the connection completes waits for it (the first
  // live batch often arrives before the replay connection is up); an absent endpoint times out.
  replay_->connect(spec_.replay_endpoint);
}

Subscription::Descriptors Subscription::descriptors() {
  Descriptors d;
  d.version = sockets_version_;
  try {
    d.sub = sub_.get(zmq::sockopt::fd);
    if (replay_) d.replay = replay_->get(zmq::sockopt::fd);
    if (monitor_) d.monitor = monitor_->get(zmq::sockopt::fd);
  } catch (const zmq::error_t&) {
  }
  return d;
}

bool Subscription::drain(bool replay) {
  const IntakeBounds& b = options_.bounds;
  // While the lane is this far behind, live messages wait in ZMQ (bounded by its high-water
  // mark) instead of here. next_tick() is due while paused: the socket's descriptor will not
  // signal messages it already had, so this must come back by itself.
  const auto paused = [&] { return !replay && backlog_.size() >= b.pause_backlog; };
  if (!replay) live_paused_ = false;
  size_t bytes = 0;
  for (size_t i = 0; i < b.turn_messages && bytes < b.turn_bytes && !paused(); ++i) {
    // Looked up each time: handling a message may replace the replay socket.
    zmq::socket_t* s = socket(replay);
    if (s == nullptr || !(s->get(zmq::sockopt::events) & ZMQ_POLLIN)) return false;
    frames_.clear();
    if (!zmq::recv_multipart(*s, std::back_inserter(frames_), zmq::recv_flags::dontwait)) {
      return false;
    }
    for (const zmq::message_t& f : frames_) bytes += f.size();
    if (replay) {
      on_replay_message(frames_);
    } else {
      on_live_message(frames_);
    }
  }
  if (paused()) {
    live_paused_ = true;
    return false;
  }
  zmq::socket_t* s = socket(replay);
  const bool more = s != nullptr && (s->get(zmq::sockopt::events) & ZMQ_POLLIN);
  if (more) ++turns_capped_;
  return more;
}

bool Subscription::service() {
  drain_backlog();
  bool more = false;
  try {
    watch_connection();
    more |= drain(/*replay=*/false);
    more |= drain(/*replay=*/true);
  } catch (const zmq::error_t& e) {
    KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000, "KV-event socket error ({}): {}",
                        spec_.worker_name, e.what());
  }
  return more;
}

void Subscription::poll_items(std::vector<zmq_pollitem_t>* items) {
  items->push_back({sub_.handle(), 0, ZMQ_POLLIN, 0});
  if (replay_) items->push_back({replay_->handle(), 0, ZMQ_POLLIN, 0});
  if (monitor_) items->push_back({monitor_->handle(), 0, ZMQ_POLLIN, 0});
}

void Subscription::handle(const zmq_pollitem_t* items) {
  drain_backlog();
  try {
    // zmq_poll is level-triggered: what the turn's budget leaves makes the next poll return.
    watch_connection();
    if (items[0].revents & ZMQ_POLLIN) drain(/*replay=*/false);
    // The replay socket may have been replaced while handling live messages: reading the new one
    // is harmless either way.
    if (replay_ && (items[1].revents & ZMQ_POLLIN)) drain(/*replay=*/true);
  } catch (const zmq::error_t& e) {
    KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000, "KV-event socket error ({}): {}",
                        spec_.worker_name, e.what());
  }
}

std::optional<MonoTime> Subscription::next_tick() const {
  if (!backlog_.empty() || live_paused_) return MonoTime{};  // due already
  std::optional<MonoTime> due;
  const auto at = [&](MonoTime t) { due = due ? std::min(*due, t) : t; };
  if (reconnect_pending_) at(reconnect_pacer_.ready_at());
  if (pending_replay_) {
    at(pacer_.ready_at());
  } else if (cursor_.awaiting_replay()) {
    at(replay_deadline_);
  }
  return due;
}

void Subscription::tick() {
  drain_backlog();
  try {
    watch_connection();
  } catch (const zmq::error_t& e) {
    KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000, "KV-event socket error ({}): {}",
                        spec_.worker_name, e.what());
  }
  if (pending_replay_) {
    send_replay_when_due();
    if (!actions_.empty()) {  // it could not be sent: the cursor moved on
      MessageReport r;
      run_actions(&r);
      report(r);
    }
  }
  if (cursor_.awaiting_replay() && !pending_replay_ && clock_.now() >= replay_deadline_) {
    KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000,
                        "KV-event replay from {} timed out; resyncing {} rank {}",
                        spec_.replay_endpoint, spec_.worker_name, spec_.key.rank);
    cursor_.on_replay_failed(ResyncReason::kReplayTimeout, &actions_);
    try {
      open_replay_socket();
    } catch (const zmq::error_t&) {
    }
    MessageReport r;
    run_actions(&r);
    r.verdict = "replay timed out: " + r.verdict;
    report(r);
  }
}

std::unique_ptr<NormalizedBatch> Subscription::prepare(const zmq::message_t& payload,
                                                       MessageReport* report) {
  auto batch = std::make_unique<NormalizedBatch>();
  if (!decoder_.decode(bytes_of(payload), &decoded_)) {
    ++rejected_payloads_;
    KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000,
                        "undecodable KV-event payload from {} rank {} ({} bytes): {}",
                        spec_.worker_name, spec_.key.rank, payload.size(),
                        drop_reason_name(*decoded_.rejected));
  }
  report->batch = &decoded_;
  // A batch seen twice (live and replayed, or a duplicate) is checked and counted once.
  const bool first_sight = !report->seq || !checked_through_ || *report->seq > *checked_through_;
  if (first_sight) {
    checker_.check(decoded_);
    if (report->seq) checked_through_ = report->seq;
    judge_hashes();
  }
  normalizer_.normalize(decoded_, batch.get());
  if (decoded_.rejected) ++batch->dropped[static_cast<size_t>(*decoded_.rejected)];
  if (first_sight) {
    for (size_t i = 0; i < kDropReasonCount; ++i) dropped_[i] += batch->dropped[i];
  }
  report->dropped = batch->dropped;
  if (decoded_.dropped_total() > 0 || decoded_.rejected) {
    KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000,
                        "dropped unreadable KV events from {} rank {}", spec_.worker_name,
                        spec_.key.rank);
  }
  batch->key = spec_.key;
  batch->holder = spec_.holder;
  batch->ts = decoded_.ts_valid ? decoded_.ts : 0;
  return batch;
}

void Subscription::on_live_message(std::vector<zmq::message_t>& frames) {
  MessageReport r;
  if (frames.size() == 2 && frames[0].to_string_view() == kLoadTopic) {
    if (auto load = decode_load_record(bytes_of(frames[1]))) {
      ++load_records_;
      if (spec_.on_load) spec_.on_load(*load);
      return;
    }
    ++bad_frames_;
    r.verdict = "bad load record";
    report(r);
    return;
  }
  std::optional<uint64_t> seq;
  if (frames.size() == 3) seq = decode_seq(bytes_of(frames[1]));
  if (!seq) {
    ++bad_frames_;
    r.verdict = "bad frames";
    report(r);
    return;
  }
  r.seq = seq;
  auto batch = prepare(frames[2], &r);
  const uint64_t dups = cursor_.stats().duplicates;
  cursor_.on_live(*seq, std::move(batch), &actions_);
  if (actions_.empty()) {
    r.verdict = cursor_.stats().duplicates != dups ? "duplicate" : "buffered";
  }
  run_actions(&r);
  report(r);
}

void Subscription::on_replay_message(std::vector<zmq::message_t>& frames) {
  MessageReport r;
  r.from_replay = true;
  // ["", seq, payload] (older vLLM, SGLang) or ["", topic, seq, payload] (vLLM >= 0.26).
  std::optional<uint64_t> seq;
  if ((frames.size() == 3 || frames.size() == 4) && frames[0].size() == 0) {
    seq = decode_seq(bytes_of(frames[frames.size() - 2]));
  }
  if (!seq) {
    ++bad_frames_;
    r.verdict = "bad frames";
    report(r);
    return;
  }
  if (!pending_replay_) replay_deadline_ = clock_.now() + options_.replay_timeout;
  const zmq::message_t& payload = frames.back();
  if (*seq == kReplayEndSeq && payload.size() == 0) {
    r.replay_end = true;
    cursor_.on_replay_end(&actions_);
    run_actions(&r);
    if (r.verdict.empty()) r.verdict = "replay end";
    report(r);
    return;
  }
  r.seq = seq;
  auto batch = prepare(payload, &r);
  const uint64_t dups = cursor_.stats().duplicates;
  cursor_.on_replay(*seq, std::move(batch), &actions_);
  if (actions_.empty()) r.verdict = cursor_.stats().duplicates != dups ? "duplicate" : "stray";
  run_actions(&r);
  report(r);
}

void Subscription::run_actions(MessageReport* r) {
  auto note = [&](std::string_view s) {
    if (!r->verdict.empty()) r->verdict += ", ";
    r->verdict.append(s);
  };
  while (!actions_.empty()) {
    Cursor::Actions actions;
    actions.swap(actions_);
    bool clear_next = false;  // a clear travels with the batch after it (one queue slot)
    for (size_t i = 0; i < actions.size(); ++i) {
      auto& a = actions[i];
      switch (a.kind) {
        case Cursor::Action::Kind::kApply: {
          auto batch = std::move(a.payload);
          batch->seq = a.seq;
          batch->replayed = a.replayed;
          batch->clear_first = std::exchange(clear_next, false);
          note(a.replayed ? "replayed " + std::to_string(a.seq)
                          : "applied " + std::to_string(a.seq));
          // An engine's AllBlocksCleared, applied in order: the holder is exact from here.
          const bool engine_cleared = std::any_of(
              batch->events.begin(), batch->events.end(),
              [](const index::Event& e) { return e.kind == index::EventKind::kCleared; });
          if (quarantine_.quarantined() && !batch->events.empty()) {
            batch->events.clear();
            batch->stored_blocks = 0;
            ++quarantined_batches_;
            note("quarantined");
          }
          deliver(std::move(batch));
          if (engine_cleared) cursor_.on_engine_cleared();
          break;
        }
        case Cursor::Action::Kind::kClear: {
          // The normalizer's salts and the checker's digests are keyed by engine hash, which
          // names content: they stay right across a clear, so they are kept.
          const bool with_next =
              i + 1 < actions.size() && actions[i + 1].kind == Cursor::Action::Kind::kApply;
          if (a.reason) {
            note("resync (" + std::string(resync_reason_name(*a.reason)) + ")");
            KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000,
                                "KV events of {} rank {} lost ({}): holder cleared and degraded",
                                spec_.worker_name, spec_.key.rank, resync_reason_name(*a.reason));
          } else {
            note("restart");
            KVGATE_LOG_EVERY_MS(logger(), spdlog::level::info, 5000,
                                "KV-event publisher of {} rank {} restarted: holder cleared",
                                spec_.worker_name, spec_.key.rank);
          }
          if (with_next) {
            clear_next = true;
            break;
          }
          deliver_clear();
          break;
        }
        case Cursor::Action::Kind::kRequestReplay:
          note("gap: replay from " + std::to_string(a.seq));
          pending_replay_ = a.seq;
          send_replay_when_due();
          if (pending_replay_) {
            ++replays_deferred_;
            note("held back by the pacer");
          }
          break;
        case Cursor::Action::Kind::kCancelReplay:
          note("replay cancelled");
          // A request the pacer still held was never sent: nothing is in flight to drop.
          if (std::exchange(pending_replay_, std::nullopt)) break;
          try {
            open_replay_socket();
          } catch (const zmq::error_t&) {
          }
          break;
      }
    }
  }
}

void Subscription::send_replay_when_due() {
  const MonoTime now = clock_.now();
  if (!pacer_.ready(now)) {
    // The replay's deadline counts from when the request can go.
    replay_deadline_ = pacer_.ready_at() + options_.replay_timeout;
    return;
  }
  const uint64_t from = *std::exchange(pending_replay_, std::nullopt);
  pacer_.sent(now);  // a failed send counts too: each reopens the socket
  replay_deadline_ = now + options_.replay_timeout;
  bool sent = false;
  if (replay_) {
    const auto seq = encode_seq(from);
    try {
      sent = replay_->send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait)
                 .has_value() &&
             replay_->send(zmq::buffer(seq), zmq::send_flags::dontwait).has_value();
    } catch (const zmq::error_t&) {
      sent = false;
    }
  }
  if (sent) {
    ++replays_sent_;
    return;
  }
  // Not connected (or not reachable): the replay fails now rather than at the timeout.
  cursor_.on_replay_failed(ResyncReason::kReplayTimeout, &actions_);
  try {
    open_replay_socket();
  } catch (const zmq::error_t&) {
  }
}

// A holder whose engine hashes stopped agreeing is emptied and skipped (hash_check.h says why).
void Subscription::judge_hashes() {
  const HashScheme scheme = checker_.scheme();
  const bool known = scheme != HashScheme::kAuto && scheme != HashScheme::kOff;
  switch (quarantine_.update(checker_.counts(), known)) {
    case HashQuarantine::Change::kNone:
      return;
    case HashQuarantine::Change::kEntered: {
      KVGATE_LOG_EVERY_MS(logger(), spdlog::level::warn, 5000,
                          "{} rank {}: {:.0f}% of its engine hashes do not match scheme {}: not "
                          "indexed until they agree again (kvgate_events_hash_quarantined)",
                          spec_.worker_name, spec_.key.rank, 100 * quarantine_.last_ratio(),
                          hash_scheme_name(scheme));
      deliver_clear();
      return;
    }
    case HashQuarantine::Change::kLeft:
      cursor_.on_holder_emptied();
      KVGATE_LOG_EVERY_MS(logger(), spdlog::level::info, 5000,
                          "{} rank {}: engine hashes agree again; indexed from here (degraded "
                          "until the engine clears or restarts)",
                          spec_.worker_name, spec_.key.rank);
      return;
  }
}

void Subscription::deliver_clear() {
  auto clear = std::make_unique<NormalizedBatch>();
  clear->key = spec_.key;
  clear->holder = spec_.holder;
  clear->clear_first = true;
  clear->clear_only = true;
  deliver(std::move(clear));
}

void Subscription::deliver(std::unique_ptr<NormalizedBatch> batch) {
  // Order: while older batches wait, a newer one waits behind them.
  if (backlog_.empty() && sink_(batch)) return;
  if (!batch) return;  // the sink took it after all
  if (backlog_.size() >= options_.max_backlog) {
    // The lanes have fallen this far behind: a real loss, the holder resyncs.
    lost_ += backlog_.size() + 1;
    backlog_.clear();
    cursor_.on_lost_downstream();
    return;
  }
  backlog_.push_back(std::move(batch));
  ++backlogged_;
}

void Subscription::drain_backlog() {
  while (!backlog_.empty()) {
    if (!sink_(backlog_.front())) return;
    backlog_.pop_front();
  }
}

void Subscription::report(MessageReport& r) {
  if (observer_) observer_(r);
}

}  // namespace kvgate::events
