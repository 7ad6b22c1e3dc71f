// The relay bench's one statistic: the p-quantile of samples (nearest rank).
#pragma once

#include <algorithm>
#include <vector>

namespace kvgate::relay {

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace kvgate::relay
