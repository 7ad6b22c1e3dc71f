// RelayMetrics: `kvgate relay`'s stats table, served on its --metrics-listen port. Per engine rank
// what the relay's admission cursor saw (batches by disposition, gaps, replays, publisher
// restarts, resyncs by reason, degraded) and what it keeps (history batches and bytes, blocks);
// for the gRPC service its subscribers (accepted, refused, open), messages, heartbeats and the
// streams moved to a snapshot. Filled from the components' own stats at scrape time.
//
// Threading: sync() from any thread (scrapes take turns).
#pragma once

#include <array>
#include <vector>

#include "kvgate/core/thread_annotations.h"
#include "kvgate/events/admission.h"
#include "kvgate/metrics/metrics.h"
#include "kvgate/metrics/rank_series.h"
#include "kvgate/relay/engine_feed.h"
#include "kvgate/relay/server.h"
#include "kvgate/relay/v1/relay.pb.h"

namespace kvgate::relayd {

class RelayMetrics {
 public:
  explicit RelayMetrics(metrics::Registry& registry);

  // At scrape time: the engine feed's per-rank stats, what the relay keeps per rank (ListWorkers'
  // answer) and the gRPC service's totals.
  void sync(const std::vector<relay::FeedRankStats>& feed,
            const relay::v1::ListWorkersResponse& kept, const relay::ServerStats& server);

 private:
  struct Series {
    metrics::Counter* applied;
    metrics::Counter* replayed;
    metrics::Counter* duplicates;
    metrics::Counter* gaps;
    metrics::Counter* replays;
    metrics::Counter* restarts;
    std::array<metrics::Counter*, events::kResyncReasonCount> resyncs;
    metrics::Gauge* degraded;
    metrics::Gauge* history_batches;
    metrics::Gauge* history_bytes;
    metrics::Gauge* blocks;
  };
  metrics::Family<metrics::Counter>& batches_;
  metrics::Family<metrics::Counter>& gaps_;
  metrics::Family<metrics::Counter>& replays_;
  metrics::Family<metrics::Counter>& restarts_;
  metrics::Family<metrics::Counter>& resyncs_;
  metrics::Family<metrics::Gauge>& degraded_;
  metrics::Family<metrics::Gauge>& history_batches_;
  metrics::Family<metrics::Gauge>& history_bytes_;
  metrics::Family<metrics::Gauge>& blocks_;
  metrics::Counter& subscribes_;
  metrics::Counter& refusals_;
  metrics::Gauge& streams_;
  metrics::Counter& messages_;
  metrics::Counter& heartbeats_;
  metrics::Counter& snapshots_;
  Mutex mu_;
  metrics::RankSeries<Series> series_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate::relayd
