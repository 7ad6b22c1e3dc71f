// StreamCall: a server-streaming gRPC call fed by a generation handler that never waits for gRPC
// (the Generate calls of kvgate.v1 and kvgate.v2).
//
// gRPC takes one write at a time. Chunks that arrive while a write is in flight queue, and a chunk
// the call's join() accepts is merged into the last queued one, so a slow client gets fewer,
// larger chunks and the call holds at most the generation's own tokens. The end (the last message
// and OK, or an error status) goes out after the last chunk; a client that cancelled gets
// CANCELLED and its handler hears of it through watch().
//
// `Response` is the method's response message: a oneof of `chunk` and `complete`.
//
// Threading: queue() and end() from the handler's coroutine (on `executor`); OnWriteDone and
// OnCancel on gRPC's threads; watch() and unwatch() from the handler. What both sides touch is
// under mu_.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>

#include "app/grpc_common.h"
#include "boost/asio/any_io_executor.hpp"
#include "boost/asio/post.hpp"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/server.h"

namespace kvgate::app::rpc {

template <class Response>
class StreamCall : public grpc::ServerWriteReactor<grpc::ByteBuffer>, public http::ResponseSink {
 public:
  using Chunk = std::remove_pointer_t<decltype(std::declval<Response&>().mutable_chunk())>;
  using Complete = std::remove_pointer_t<decltype(std::declval<Response&>().mutable_complete())>;

  explicit StreamCall(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

  // ---- gRPC's side ----
  void OnWriteDone(bool ok) override {
    Next next;
    {
      MutexLock lock(&mu_);
      if (!ok) gone_ = true;
      next = next_write();
    }
    hand_over(next);
  }
  void OnCancel() override {
    std::function<void()> on_gone;
    {
      MutexLock lock(&mu_);
      gone_ = true;
      on_gone = std::move(on_gone_);
    }
    if (on_gone) boost::asio::post(executor_, std::move(on_gone));
  }

  // ---- the handler's side (the rest of http::ResponseSink is the call's) ----
  boost::asio::any_io_executor executor() const override { return executor_; }
  void watch(std::function<void()> on_gone) override {
    MutexLock lock(&mu_);
    if (gone_) {
      boost::asio::post(executor_, std::move(on_gone));
    } else {
      on_gone_ = std::move(on_gone);
    }
  }
  void unwatch() override {
    MutexLock lock(&mu_);
    on_gone_ = nullptr;
  }

 protected:
  // Whether `next` joins `last` (a queued chunk no write has taken yet); if so, merges it in.
  virtual bool join(Chunk& last, const Chunk& next) const = 0;

  // Queues `chunks` (their elements moved) and starts a write when none is in flight; false once
  // the client is gone.
  bool queue(std::span<Chunk> chunks) {
    if (chunks.empty()) return true;
    Next next = Next::kNothing;
    {
      MutexLock lock(&mu_);
      if (gone_) return false;
      for (Chunk& c : chunks) {
        if (queued_.empty() || !join(queued_.back(), c)) queued_.push_back(std::move(c));
      }
      if (!writing_) next = next_write();
    }
    hand_over(next);
    return true;
  }

  // The handler has returned: the call ends with `last` and OK (`status` OK) or with `status`,
  // after whatever is still being written.
  void end(Complete last, grpc::Status status) {
    Next next = Next::kNothing;
    {
      MutexLock lock(&mu_);
      final_ = std::move(last);
      final_status_ = std::move(status);
      ending_ = true;
      if (!writing_) next = next_write();
    }
    hand_over(next);
  }

 private:
  // What to hand gRPC next: a chunk, the last message with the status, or the status alone.
  enum class Next { kNothing, kChunk, kLast, kFinish };

  // Under mu_, with no write in flight: the next queued chunk, else the end if it is ready.
  Next next_write() KVGATE_REQUIRES(mu_) {
    writing_ = false;
    if (ended_) return Next::kNothing;
    if (gone_ && ending_) {
      ended_ = true;
      return Next::kFinish;
    }
    if (!queued_.empty() && !gone_) {
      *in_flight_.mutable_chunk() = std::move(queued_.front());
      queued_.pop_front();
      writing_ = true;
      return Next::kChunk;
    }
    if (!ending_) return Next::kNothing;
    ended_ = true;
    if (final_status_.ok() && !gone_) {
      *in_flight_.mutable_complete() = std::move(final_);
      return Next::kLast;
    }
    return Next::kFinish;
  }
  // (Outside mu_: gRPC may react on this thread.)
  void hand_over(Next next) {
    switch (next) {
      case Next::kNothing:
        break;
      case Next::kChunk:
        encode_message(in_flight_, &in_flight_bytes_);
        StartWrite(&in_flight_bytes_);
        break;
      case Next::kLast:
        encode_message(in_flight_, &in_flight_bytes_);
        StartWriteAndFinish(&in_flight_bytes_, grpc::WriteOptions(), grpc::Status::OK);
        break;
      case Next::kFinish:
        Finish(end_status());
        break;
    }
  }
  grpc::Status end_status() {
    MutexLock lock(&mu_);
    return gone_ ? grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the call")
                 : final_status_;
  }

  const boost::asio::any_io_executor executor_;
  Mutex mu_;
  bool gone_ KVGATE_GUARDED_BY(mu_) = false;
  bool ended_ KVGATE_GUARDED_BY(mu_) = false;    // the last message or status was handed over
  bool writing_ KVGATE_GUARDED_BY(mu_) = false;  // in_flight_ is gRPC's until OnWriteDone
  bool ending_ KVGATE_GUARDED_BY(mu_) = false;   // final_ and final_status_ are set
  std::deque<Chunk> queued_ KVGATE_GUARDED_BY(mu_);
  Complete final_ KVGATE_GUARDED_BY(mu_);
  grpc::Status final_status_ KVGATE_GUARDED_BY(mu_);
  Response in_flight_;
  grpc::ByteBuffer in_flight_bytes_;  // in_flight_ serialized, gRPC's until OnWriteDone
  std::function<void()> on_gone_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace kvgate::app::rpc
