// RankSeries: per (worker, rank) metric series kept in step with a component's stats listing at
// scrape time: made when a (worker, rank) first appears, removed from their families when it is
// no longer listed (a removed engine leaves no stale series behind).
//
// Threading: not synchronized; its owner serializes scrapes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "kvgate/metrics/metrics.h"

namespace kvgate::metrics {

template <class Series>
class RankSeries {
 public:
  // make: the series of one (worker, rank) from its labels; drop: removes them from their families.
  RankSeries(std::function<Series(const Labels&)> make, std::function<void(Series&)> drop)
      : make_(std::move(make)), drop_(std::move(drop)) {}

  // The series of (worker, rank), made if new; marks it listed in this scrape.
  Series& at(const std::string& worker, uint32_t rank) {
    auto key = std::make_pair(worker, rank);
    auto it = series_.find(key);
    if (it == series_.end()) {
      it = series_.emplace(key, Entry{make_({{"worker", worker}, {"rank", std::to_string(rank)}})})
               .first;
    }
    it->second.seen = scrape_;
    return it->second.series;
  }
  // Ends a scrape: drops the series of every (worker, rank) not listed since the last sweep().
  void sweep() {
    for (auto it = series_.begin(); it != series_.end();) {
      if (it->second.seen != scrape_) {
        drop_(it->second.series);
        it = series_.erase(it);
      } else {
        ++it;
      }
    }
    ++scrape_;
  }

 private:
  struct Entry {
    Series series;
    uint64_t seen = 0;
  };
  std::function<Series(const Labels&)> make_;
  std::function<void(Series&)> drop_;
  std::map<std::pair<std::string, uint32_t>, Entry> series_;
  uint64_t scrape_ = 0;
};

}  // namespace kvgate::metrics
