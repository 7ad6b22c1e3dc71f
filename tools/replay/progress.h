// Progress: the replay's counters, and a progress line on stderr drawn by its own thread at most
// twice a second (a bar redrawn in place on a terminal; one plain line every 10 s otherwise).
//
// Threading: the counters are atomics, bumped from any thread; start() and stop() from one
// control thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace kvgate::replay {

struct Counters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> answered{0};
  std::atomic<uint64_t> failed{0};
};

class Progress {
 public:
  Progress(const Counters& counters, uint64_t total, double span_s)
      : counters_(counters), total_(total), span_s_(span_s) {}
  ~Progress() { stop(); }

  // `terminal`: redraw one line in place (stderr is a TTY); else a line every 10 s.
  void start(bool terminal);
  void stop();

  // The line as drawn (for tests): "[=====>    ] 120/400 sent, 100 done, 0 failed, 20 in flight,
  // 12s/40s".
  static std::string line(uint64_t total, uint64_t sent, uint64_t answered, uint64_t failed,
                          double elapsed_s, double span_s, size_t width);

 private:
  void run(bool terminal);

  const Counters& counters_;
  uint64_t total_;
  double span_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvgate::replay
