#include "kvgate/relay/server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvgate/relay/v1/relay.grpc.pb.h"
#include "relay/test_subscriber.h"
#include "support/wait.h"

namespace kvgate::relay {
namespace {

using namespace std::chrono_literals;

// One stored block per batch, numbered from `first`.
void feed(RankStream& s, uint64_t first, uint64_t count) {
  for (uint64_t seq = first; seq < first + count; ++seq) {
    testing::append_block(s, seq, 1000 + seq, 5000 + seq);
  }
}

class RelayServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto added = table_.add({.name = "http://127.0.0.1:8000", .block_size = 16, .ranks = 2});
    ASSERT_TRUE(added.ok());
    ranks_ = *added;
    server_ = std::make_unique<RelayServer>(
        table_, ServerOptions{.listen = "127.0.0.1:0", .heartbeat = 200ms});
    ASSERT_TRUE(server_->start().ok());
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Relay::NewStub(channel_);
  }

  v1::SubscribeRequest request(uint32_t rank, uint64_t epoch = 0, uint64_t from = 0) {
    v1::SubscribeRequest r;
    r.set_worker("http://127.0.0.1:8000");
    r.set_rank(rank);
    r.set_epoch(epoch);
    r.set_from_seq(from);
    return r;
  }

  StreamTable table_{HistoryLimits{.max_batches = 20}};
  std::vector<RankStream*> ranks_;
  std::unique_ptr<RelayServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Relay::Stub> stub_;
};

TEST_F(RelayServerTest, AStreamSendsTheHistoryThenLiveBatchesThenHeartbeatsWhileQuiet) {
  feed(*ranks_[0], 0, 5);
  grpc::ClientContext ctx;
  auto reader = stub_->Subscribe(&ctx, request(0));
  v1::SubscribeResponse m;
  for (uint64_t seq = 0; seq < 5; ++seq) {
    ASSERT_TRUE(reader->Read(&m));
    ASSERT_TRUE(m.has_batch());
    EXPECT_EQ(m.batch().seq(), seq);
    ASSERT_EQ(m.batch().events_size(), 1);
    EXPECT_EQ(m.batch().events(0).engine_hashes(0), 1000 + seq);
  }
  const uint64_t epoch = m.batch().epoch();
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    feed(*ranks_[0], 5, 3);
  });
  for (uint64_t seq = 5; seq < 8; ++seq) {
    ASSERT_TRUE(reader->Read(&m));
    ASSERT_TRUE(m.has_batch()) << m.DebugString();
    EXPECT_EQ(m.batch().seq(), seq);
    EXPECT_EQ(m.batch().epoch(), epoch);
  }
  writer.join();
  ASSERT_TRUE(reader->Read(&m));
  ASSERT_TRUE(m.has_heartbeat()) << m.DebugString();
  EXPECT_EQ(m.heartbeat().epoch(), epoch);
  EXPECT_EQ(m.heartbeat().last_seq(), 7u);
  ctx.TryCancel();
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_GE(server_->stats().heartbeats, 1u);
}

TEST_F(RelayServerTest, ResumingPastTheHistoryGetsOutOfRangeThenTheSnapshotThenTheTail) {
  feed(*ranks_[1], 0, 50);  // the history keeps the last 20
  uint64_t epoch = 0;
  {
    grpc::ClientContext ctx;
    auto reader = stub_->Subscribe(&ctx, request(1));
    v1::SubscribeResponse m;
    ASSERT_TRUE(reader->Read(&m));
    ASSERT_TRUE(m.has_out_of_range()) << m.DebugString();
    EXPECT_EQ(m.out_of_range().reason(), v1::OutOfRange::REASON_FRESH);
    epoch = m.out_of_range().epoch();
    ASSERT_TRUE(reader->Read(&m));
    ASSERT_TRUE(m.has_snapshot());
    EXPECT_TRUE(m.snapshot().last());
    EXPECT_EQ(m.snapshot().seq(), 49u);
    EXPECT_EQ(m.snapshot().blocks(), 50u);
    ctx.TryCancel();
  }
  {  // within the history: the batches from there
    grpc::ClientContext ctx;
    auto reader = stub_->Subscribe(&ctx, request(1, epoch, 45));
    v1::SubscribeResponse m;
    ASSERT_TRUE(reader->Read(&m));
    ASSERT_TRUE(m.has_batch()) << m.DebugString();
    EXPECT_EQ(m.batch().seq(), 45u);
    ctx.TryCancel();
  }
  {  // before it
    grpc::ClientContext ctx;
    auto reader = stub_->Subscribe(&ctx, request(1, epoch, 3));
    v1::SubscribeResponse m;
    ASSERT_TRUE(reader->Read(&m));
    ASSERT_TRUE(m.has_out_of_range());
    EXPECT_EQ(m.out_of_range().reason(), v1::OutOfRange::REASON_BEFORE_HISTORY);
    EXPECT_EQ(m.out_of_range().oldest_seq(), 30u);
    ctx.TryCancel();
  }
  EXPECT_GE(server_->stats().out_of_range, 2u);
}

TEST_F(RelayServerTest, UnknownWorkersRanksAndMalformedRequestsAreRefusedInTheirOwnWords) {
  const auto status_of = [&](const v1::SubscribeRequest& r) {
    grpc::ClientContext ctx;
    auto reader = stub_->Subscribe(&ctx, r);
    v1::SubscribeResponse m;
    EXPECT_FALSE(reader->Read(&m));
    return reader->Finish();
  };
  v1::SubscribeRequest unknown = request(0);
  unknown.set_worker("http://10.9.9.9:1");
  const grpc::Status a = status_of(unknown);
  EXPECT_EQ(a.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(a.error_message().find("no worker http://10.9.9.9:1"), std::string::npos);
  const grpc::Status b = status_of(request(7));
  EXPECT_EQ(b.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(b.error_message().find("has no rank 7"), std::string::npos);
  v1::SubscribeRequest nameless = request(0);
  nameless.clear_worker();
  EXPECT_EQ(status_of(nameless).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status_of(request(0, 0, 12)).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server_->stats().rejected, 4u);
}

TEST_F(RelayServerTest, ListWorkersDescribesEveryRank) {
  feed(*ranks_[0], 10, 4);
  table_.set_state("http://127.0.0.1:8000", "live");
  grpc::ClientContext ctx;
  v1::ListWorkersResponse list;
  ASSERT_TRUE(stub_->ListWorkers(&ctx, v1::ListWorkersRequest(), &list).ok());
  ASSERT_EQ(list.workers_size(), 1);
  const v1::WorkerInfo& w = list.workers(0);
  EXPECT_EQ(w.name(), "http://127.0.0.1:8000");
  EXPECT_EQ(w.state(), "live");
  EXPECT_EQ(w.block_size(), 16u);
  ASSERT_EQ(w.ranks_size(), 2);
  EXPECT_EQ(w.ranks(0).last_seq(), 13u);
  EXPECT_EQ(w.ranks(0).oldest_seq(), 10u);
  EXPECT_EQ(w.ranks(0).blocks(), 4u);
  EXPECT_FALSE(w.ranks(1).has_last_seq());
  EXPECT_NE(w.ranks(0).epoch(), w.ranks(1).epoch());
}

TEST_F(RelayServerTest, StoppingEndsOpenStreamsAsUnavailable) {
  grpc::ClientContext ctx;
  auto reader = stub_->Subscribe(&ctx, request(0));
  EXPECT_TRUE(kvgate::testing::wait_until([&] { return server_->stats().active == 1u; }));
  server_->stop();
  v1::SubscribeResponse m;
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace kvgate::relay
