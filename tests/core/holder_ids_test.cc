#include "kvgate/core/holder_ids.h"

#include <gtest/gtest.h>

namespace kvgate {
namespace {

TEST(HolderIdAllocator, DenseStableAndReused) {
  HolderIdAllocator a;
  const HolderKey w0r0{WorkerId(10), 0}, w0r1{WorkerId(10), 1}, w1r0{WorkerId(11), 0};
  EXPECT_EQ(a.acquire(w0r0), HolderId(0));
  EXPECT_EQ(a.acquire(w0r1), HolderId(1));
  EXPECT_EQ(a.acquire(w1r0), HolderId(2));
  EXPECT_EQ(a.acquire(w0r1), HolderId(1));  // same key, same id
  EXPECT_EQ(a.bound(), 3u);
  EXPECT_EQ(a.holders_of(WorkerId(10)), (std::vector<HolderId>{HolderId(0), HolderId(1)}));

  EXPECT_EQ(a.release(w0r0), HolderId(0));
  EXPECT_FALSE(a.find(w0r0).has_value());
  EXPECT_FALSE(a.key_of(HolderId(0)).has_value());
  EXPECT_FALSE(a.release(w0r0).has_value());
  // The lowest free id is reused, so ids stay small under churn.
  const HolderKey w2r0{WorkerId(12), 0};
  EXPECT_EQ(a.acquire(w2r0), HolderId(0));
  EXPECT_EQ(a.key_of(HolderId(0))->worker, WorkerId(12));
  EXPECT_EQ(a.bound(), 3u);
}

TEST(HolderIdAllocator, WithClassesAWorkersIdsShareItsClass) {
  HolderIdAllocator a(2);  // two NUMA nodes: worker w's holders in shard w % 2
  const HolderKey w0r0{WorkerId(0), 0}, w0r1{WorkerId(0), 1}, w1r0{WorkerId(1), 0},
      w2r0{WorkerId(2), 0}, w3r0{WorkerId(3), 0};
  EXPECT_EQ(a.acquire(w0r0), HolderId(0));
  EXPECT_EQ(a.acquire(w0r1), HolderId(2));
  EXPECT_EQ(a.acquire(w1r0), HolderId(1));
  EXPECT_EQ(a.acquire(w2r0), HolderId(4));
  EXPECT_EQ(a.acquire(w3r0), HolderId(3));
  EXPECT_EQ(a.bound(), 5u);
  EXPECT_FALSE(a.key_of(HolderId(5)).has_value());
  // A freed id goes back to its class only.
  EXPECT_EQ(a.release(w0r1), HolderId(2));
  EXPECT_EQ(a.acquire(HolderKey{WorkerId(5), 0}), HolderId(5));
  EXPECT_EQ(a.acquire(HolderKey{WorkerId(6), 0}), HolderId(2));
}

}  // namespace
}  // namespace kvgate
