#include "replay/progress.h"

#include <cstdio>

namespace kvgate::replay {

std::string Progress::line(uint64_t total, uint64_t sent, uint64_t answered, uint64_t failed,
                           double elapsed_s, double span_s, size_t width) {
  const uint64_t ended = answered + failed;
  const size_t filled = total == 0 ? width : static_cast<size_t>(width * ended / total);
  std::string bar(width, ' ');
  for (size_t i = 0; i < filled && i < width; ++i) bar[i] = '=';
  if (filled < width) bar[filled] = '>';
  char buf[160];
  std::snprintf(
      buf, sizeof(buf),
      "] %llu/%llu sent, %llu done, %llu failed, %llu in flight, %.0f s (arrivals end at %.0f s)",
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(total),
      static_cast<unsigned long long>(answered), static_cast<unsigned long long>(failed),
      static_cast<unsigned long long>(sent >= ended ? sent - ended : 0), elapsed_s, span_s);
  return "[" + bar + buf;
}

void Progress::start(bool terminal) {
  thread_ = std::thread([this, terminal] { run(terminal); });
}

void Progress::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::run(bool terminal) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto every = terminal ? std::chrono::milliseconds(500) : std::chrono::milliseconds(10'000);
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    const bool stopping = cv_.wait_for(l, every, [this] { return stopping_; });
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string s = line(total_, counters_.sent.load(), counters_.answered.load(),
                               counters_.failed.load(), elapsed, span_s_, 30);
    if (terminal) {
      std::fprintf(stderr, "\r%s\033[K%s", s.c_str(), stopping ? "\n" : "");
    } else if (!stopping) {
      std::fprintf(stderr, "%s\n", s.c_str());
    }
    std::fflush(stderr);
    if (stopping) return;
  }
}

}  // namespace kvgate::replay
