// Versioned<T> under readers racing a writer: every read sees a whole version (no torn value),
// versions only move forward, and ThreadSanitizer sees no race (the tsan preset runs this).
#include "kvgate/core/versioned.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace kvgate {
namespace {

// Two fields a torn read would disagree on.
struct Knobs {
  uint64_t serial = 0;
  std::string text;  // "v<serial>"
};

TEST(Versioned, GetSeesTheLastPublishedVersion) {
  Versioned<Knobs> v(Knobs{0, "v0"});
  EXPECT_EQ(v.get().serial, 0u);
  v.publish(Knobs{1, "v1"});
  EXPECT_EQ(v.get().text, "v1");
  EXPECT_EQ(v.versions(), 2u);
}

TEST(Versioned, ReadersRacingAWriterSeeWholeVersionsInOrder) {
  Versioned<Knobs> v(Knobs{0, "v0"});
  constexpr uint64_t kVersions = 2000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<int> started{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      started.fetch_add(1);
      uint64_t last = 0;
      uint64_t n = 0;
      // At least one read after the writer finished, so each reader sees the last version.
      for (bool finished = false; !finished;) {
        finished = done.load(std::memory_order_acquire);
        const Knobs& k = v.get();
        if (k.text != "v" + std::to_string(k.serial) || k.serial < last) bad.fetch_add(1);
        last = k.serial;
        ++n;
      }
      if (last != kVersions) bad.fetch_add(1);
      reads.fetch_add(n);
    });
  }
  while (started.load() < 3) std::this_thread::yield();  // every reader reads while it writes
  for (uint64_t i = 1; i <= kVersions; ++i) v.publish(Knobs{i, "v" + std::to_string(i)});
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GE(reads.load(), 3u);
  EXPECT_EQ(v.versions(), kVersions + 1);
}

}  // namespace
}  // namespace kvgate
