#include "relayd/relay_metrics.h"

#include <string>

namespace kvgate::relayd {
namespace {

metrics::Labels with(metrics::Labels l, const char* key, std::string value) {
  l.emplace(key, std::move(value));
  return l;
}

}  // namespace

RelayMetrics::RelayMetrics(metrics::Registry& registry)
    : batches_(metrics::counter_family(
          registry, "kvgate_relay_engine_batches_total",
          "KV-event batches the relay admitted from an engine rank, by disposition: applied "
          "(live, in order), replayed (refilled from the engine's replay socket), duplicate "
          "(dropped as already admitted).")),
      gaps_(metrics::counter_family(registry, "kvgate_relay_engine_gaps_total",
                                    "Sequence gaps seen on an engine rank's live stream.")),
      replays_(metrics::counter_family(registry, "kvgate_relay_engine_replays_total",
                                       "Replay requests sent to an engine rank's replay socket.")),
      restarts_(metrics::counter_family(registry, "kvgate_relay_engine_publisher_restarts_total",
                                        "Engine publisher restarts detected (seq going back).")),
      resyncs_(metrics::counter_family(
          registry, "kvgate_relay_engine_resyncs_total",
          "Engine ranks cleared and rebuilt after a gap the replay could not refill, by reason "
          "(their subscribers are moved to a snapshot of a new epoch).")),
      degraded_(metrics::gauge_family(
          registry, "kvgate_relay_rank_degraded",
          "1 while the relay holds only part of what an engine rank holds (since a resync, until "
          "the engine clears or restarts).")),
      history_batches_(metrics::gauge_family(registry, "kvgate_relay_history_batches",
                                             "Batches kept per engine rank for resuming "
                                             "subscribers (--relay-history-batches).")),
      history_bytes_(metrics::gauge_family(
          registry, "kvgate_relay_history_bytes",
          "Memory the history holds per engine rank (--relay-history-bytes).")),
      blocks_(metrics::gauge_family(registry, "kvgate_relay_rank_blocks",
                                    "Block copies an engine rank holds as the relay sees it "
                                    "(what a snapshot sends).")),
      subscribes_(metrics::counter_family(registry, "kvgate_relay_subscribes_total",
                                          "Subscribe calls accepted.")
                      .Add({})),
      refusals_(metrics::counter_family(
                    registry, "kvgate_relay_subscribe_refusals_total",
                    "Subscribe calls refused (unknown worker or rank, malformed request).")
                    .Add({})),
      streams_(
          metrics::gauge_family(registry, "kvgate_relay_streams", "Subscribe streams open now.")
              .Add({})),
      messages_(metrics::counter_family(registry, "kvgate_relay_messages_total",
                                        "Messages written to subscribers (batches, snapshot "
                                        "chunks, heartbeats).")
                    .Add({})),
      heartbeats_(metrics::counter_family(registry, "kvgate_relay_heartbeats_total",
                                          "Heartbeats written to subscribers.")
                      .Add({})),
      snapshots_(metrics::counter_family(
                     registry, "kvgate_relay_snapshots_total",
                     "Streams moved to a snapshot (an OutOfRange answer: a fresh subscriber, a "
                     "seq before the history, another epoch, a subscriber that fell behind).")
                     .Add({})),
      series_(
          [this](const metrics::Labels& l) {
            Series s{.applied = &batches_.Add(with(l, "disposition", "applied")),
                     .replayed = &batches_.Add(with(l, "disposition", "replayed")),
                     .duplicates = &batches_.Add(with(l, "disposition", "duplicate")),
                     .gaps = &gaps_.Add(l),
                     .replays = &replays_.Add(l),
                     .restarts = &restarts_.Add(l),
                     .resyncs = {},
                     .degraded = &degraded_.Add(l),
                     .history_batches = &history_batches_.Add(l),
                     .history_bytes = &history_bytes_.Add(l),
                     .blocks = &blocks_.Add(l)};
            for (size_t r = 0; r < events::kResyncReasonCount; ++r) {
              const auto name = events::resync_reason_name(static_cast<events::ResyncReason>(r));
              s.resyncs[r] = &resyncs_.Add(with(l, "reason", std::string(name)));
            }
            return s;
          },
          [this](Series& s) {
            for (metrics::Counter* c : {s.applied, s.replayed, s.duplicates}) batches_.Remove(c);
            gaps_.Remove(s.gaps);
            replays_.Remove(s.replays);
            restarts_.Remove(s.restarts);
            for (metrics::Counter* c : s.resyncs) resyncs_.Remove(c);
            degraded_.Remove(s.degraded);
            history_batches_.Remove(s.history_batches);
            history_bytes_.Remove(s.history_bytes);
            blocks_.Remove(s.blocks);
          }) {}

void RelayMetrics::sync(const std::vector<relay::FeedRankStats>& feed,
                        const relay::v1::ListWorkersResponse& kept,
                        const relay::ServerStats& server) {
  MutexLock lock(&mu_);
  for (const relay::FeedRankStats& f : feed) {
    Series& s = series_.at(f.worker, f.rank);
    metrics::advance(*s.applied, f.cursor.applied);
    metrics::advance(*s.replayed, f.cursor.replayed);
    metrics::advance(*s.duplicates, f.cursor.duplicates);
    metrics::advance(*s.gaps, f.cursor.gaps);
    metrics::advance(*s.replays, f.cursor.replays);
    metrics::advance(*s.restarts, f.cursor.restarts);
    for (size_t r = 0; r < events::kResyncReasonCount; ++r) {
      metrics::advance(*s.resyncs[r], f.cursor.resyncs[r]);
    }
    s.degraded->Set(f.degraded ? 1 : 0);
  }
  for (const relay::v1::WorkerInfo& w : kept.workers()) {
    for (const relay::v1::RankInfo& r : w.ranks()) {
      Series& s = series_.at(w.name(), r.rank());
      s.history_batches->Set(static_cast<double>(r.history_batches()));
      s.history_bytes->Set(static_cast<double>(r.history_bytes()));
      s.blocks->Set(static_cast<double>(r.blocks()));
    }
  }
  series_.sweep();
  metrics::advance(subscribes_, server.subscribes);
  metrics::advance(refusals_, server.rejected);
  streams_.Set(static_cast<double>(server.active));
  metrics::advance(messages_, server.messages);
  metrics::advance(heartbeats_, server.heartbeats);
  metrics::advance(snapshots_, server.out_of_range);
}

}  // namespace kvgate::relayd
