// Series made only when they have something to say, so that a fleet of many workers, each with
// many reasons to count, exports the series that happened and no others.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "kvgate/metrics/metrics.h"

namespace kvgate::metrics {

// A counter series made at its first increment: a reason that never happens costs no series
// (twenty drop reasons per rank, all at zero, would be most of a fleet's series).
//
// Threading: add() from any thread: two first increments at once both ask the family, which hands
// both the one series of those labels. remove() after every writer let go of it.
class LazyCounter {
 public:
  LazyCounter() = default;
  LazyCounter(Family<Counter>& family, Labels labels)
      : family_(&family), labels_(std::move(labels)) {}
  LazyCounter& operator=(LazyCounter&& other) noexcept {
    family_ = other.family_;
    labels_ = std::move(other.labels_);
    series_.store(other.series_.exchange(nullptr), std::memory_order_relaxed);
    return *this;
  }
  void add(uint64_t n) {
    if (n == 0) return;
    Counter* series = series_.load(std::memory_order_acquire);
    if (series == nullptr) {
      series = &family_->Add(labels_);
      series_.store(series, std::memory_order_release);
    }
    series->Increment(static_cast<double>(n));
  }
  void remove() {
    if (Counter* series = series_.exchange(nullptr)) family_->Remove(series);
  }

 private:
  Family<Counter>* family_ = nullptr;
  Labels labels_;
  std::atomic<Counter*> series_{nullptr};
};

// A 0/1 gauge whose series exists only while it is 1 (say, a holder degraded or quarantined): an
// alert on it is the same, and a healthy fleet pays no series for it.
//
// Threading: one writer at a time.
class PresenceGauge {
 public:
  PresenceGauge() = default;
  PresenceGauge(Family<Gauge>& family, Labels labels)
      : family_(&family), labels_(std::move(labels)) {}
  void set(bool on) {
    if (on && series_ == nullptr) {
      series_ = &family_->Add(labels_);
      series_->Set(1);
    } else if (!on) {
      remove();
    }
  }
  void remove() {
    if (series_ != nullptr) family_->Remove(series_);
    series_ = nullptr;
  }

 private:
  Family<Gauge>* family_ = nullptr;
  Labels labels_;
  Gauge* series_ = nullptr;
};

}  // namespace kvgate::metrics
