// A v2 Generate call: the gRPC stream on one side, the generation pipeline's Responder on the
// other (grpc_generate_v2.h).
#include <deque>

#include "app/grpc_common.h"
#include "app/grpc_generate_v2.h"
#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core/string.hpp"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/http/sse.h"

namespace kvgate::app::gateway_v2 {
namespace net = boost::asio;
namespace {

// gRPC takes one write at a time; the handler never waits for it: chunks that arrive while a
// write is in flight queue, a choice's tokens joined into its last queued chunk (so a slow client
// gets fewer, larger chunks and the call holds at most the generation's own tokens). The end of
// the call (Complete and OK, or an error status) goes out after the last chunk.
class GenerateCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                           public http::ResponseSink,
                           public std::enable_shared_from_this<GenerateCall> {
 public:
  GenerateCall(net::io_context& ctx, const v2::GenerateRequest& r)
      : executor_(ctx.get_executor()),
        reader_(r.stream(), r.return_text(), r.engine_api() == v2::ENGINE_API_SGLANG_GENERATE) {}

  // Runs the pipeline; the call owns itself until gRPC is done with it.
  void run(GenerationPipeline& generation, EngineCall call) {
    self_ = shared_from_this();
    auto body = [](std::shared_ptr<GenerateCall> self, GenerationPipeline& pipeline,
                   EngineCall c) -> net::awaitable<void> {
      {
        http::Responder responder(*self);
        co_await pipeline.serve(c.route, c.request, responder, nullptr, /*name_worker=*/true);
      }
      self->complete();
    };
    net::co_spawn(executor_, body(shared_from_this(), generation, std::move(call)), net::detached);
  }

  // ---- gRPC's side ----
  void OnWriteDone(bool ok) override {
    Next next;
    {
      MutexLock lock(&mu_);
      if (!ok) gone_ = true;
      next = next_write();
    }
    start(next);
  }
  void OnCancel() override {
    std::function<void()> on_gone;
    {
      MutexLock lock(&mu_);
      gone_ = true;
      on_gone = std::move(on_gone_);
    }
    if (on_gone) net::post(executor_, std::move(on_gone));
  }
  void OnDone() override { self_.reset(); }

  // ---- the handler's side (ResponseSink) ----
  net::any_io_executor executor() const override { return executor_; }

  net::awaitable<Status> send(http::Response response) override {
    status_ = response.status;
    read_headers(response.headers);
    if (response.status == 200) {
      std::vector<v2::Chunk> chunks;
      reader_.take(response.body, &chunks);  // a worker that answered whole
      if (!queue(std::move(chunks))) co_return absl::CancelledError("the client went away");
    } else {
      error_ = rpc::error_message(response.body);
    }
    co_return Status();
  }
  net::awaitable<Status> start(unsigned status, std::string_view /*content_type*/,
                               std::span<const http::Header> headers) override {
    status_ = status;
    read_headers(headers);
    co_return Status();
  }
  net::awaitable<Status> write(std::string_view data) override {
    std::vector<v2::Chunk> chunks;
    sse_.feed(data, [&](std::string_view event) {
      if (event != "[DONE]") reader_.take(event, &chunks);
    });
    if (!queue(std::move(chunks))) co_return absl::CancelledError("the client went away");
    co_return Status();
  }
  net::awaitable<Status> finish() override { co_return Status(); }
  void watch(std::function<void()> on_gone) override {
    MutexLock lock(&mu_);
    if (gone_) {
      net::post(executor_, std::move(on_gone));
    } else {
      on_gone_ = std::move(on_gone);
    }
  }
  void unwatch() override {
    MutexLock lock(&mu_);
    on_gone_ = nullptr;
  }

 private:
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
  void start(Next next) {
    switch (next) {
      case Next::kNothing:
        break;
      case Next::kChunk:
        rpc::encode_message(in_flight_, &in_flight_bytes_);
        StartWrite(&in_flight_bytes_);
        break;
      case Next::kLast:
        rpc::encode_message(in_flight_, &in_flight_bytes_);
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

  // Queues `chunks` and starts a write when none is in flight; false once the client is gone.
  bool queue(std::vector<v2::Chunk> chunks) {
    if (chunks.empty()) return true;
    Next next = Next::kNothing;
    {
      MutexLock lock(&mu_);
      if (gone_) return false;
      for (v2::Chunk& c : chunks) {
        const bool joins = !queued_.empty() && queued_.back().index() == c.index() &&
                           queued_.back().finish_reason() == v2::FINISH_REASON_UNSPECIFIED;
        if (joins) {
          merge_chunk(queued_.back(), c);
        } else {
          queued_.push_back(std::move(c));
        }
      }
      if (!writing_) next = next_write();
    }
    start(next);
    return true;
  }

  void read_headers(std::span<const http::Header> headers) {
    for (const auto& [name, value] : headers) {
      if (boost::beast::iequals(name, kWorkerHeader)) worker_ = value;
      if (boost::beast::iequals(name, kRequestIdHeader)) request_id_ = value;
      if (boost::beast::iequals(name, kRankAnswerHeader)) dp_rank_ = std::atoi(value.c_str());
    }
  }

  // The status the call ends with: the handler's or the engine's error, or OK once every
  // choice finished.
  grpc::Status outcome() const {
    const std::string& error = error_.empty() ? reader_.error() : error_;
    if (status_ != 200 || !error.empty()) {
      unsigned code = status_ == 200 ? reader_.error_status() : status_;
      if (code == 0 || code == 200) code = 502;
      return grpc::Status(rpc::code_for(code), error.empty() ? "the generation failed" : error);
    }
    if (!reader_.finished()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "the worker's stream ended before the generation finished");
    }
    return grpc::Status::OK;
  }

  // The handler has returned: the call ends after whatever is still being written.
  void complete() {
    grpc::Status status = outcome();
    v2::Complete done = reader_.complete();
    done.set_worker(worker_);
    done.set_request_id(request_id_);
    done.set_dp_rank(dp_rank_);
    Next next = Next::kNothing;
    {
      MutexLock lock(&mu_);
      final_ = std::move(done);
      final_status_ = std::move(status);
      ending_ = true;
      if (!writing_) next = next_write();
    }
    start(next);
  }

  const net::any_io_executor executor_;
  std::shared_ptr<GenerateCall> self_;  // until OnDone
  // The handler's side: only its coroutine touches these.
  AnswerReader reader_;
  unsigned status_ = 0;
  std::string error_;
  http::SseParser sse_;
  std::string worker_;
  std::string request_id_;
  int32_t dp_rank_ = -1;  // the handler named none: the engine chose
  // Shared with gRPC's reactions.
  Mutex mu_;
  bool gone_ KVGATE_GUARDED_BY(mu_) = false;
  bool ended_ KVGATE_GUARDED_BY(mu_) = false;    // the last message or status was handed over
  bool writing_ KVGATE_GUARDED_BY(mu_) = false;  // in_flight_ is gRPC's until OnWriteDone
  bool ending_ KVGATE_GUARDED_BY(mu_) = false;   // final_ and final_status_ are set
  std::deque<v2::Chunk> queued_ KVGATE_GUARDED_BY(mu_);
  v2::Complete final_ KVGATE_GUARDED_BY(mu_);
  grpc::Status final_status_ KVGATE_GUARDED_BY(mu_);
  v2::GenerateResponse in_flight_;
  grpc::ByteBuffer in_flight_bytes_;  // in_flight_ serialized, gRPC's until OnWriteDone
  std::function<void()> on_gone_ KVGATE_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* start_generate(const GrpcFrontParts& gw,
                                                           grpc::CallbackServerContext* ctx,
                                                           const grpc::ByteBuffer* bytes) {
  v2::GenerateRequest request;
  if (!rpc::decode_message(bytes, &request)) return new rpc::Refused(rpc::not_a(request));
  EngineCall call;
  if (auto s = engine_call(gw, ctx, request, &call); !s.ok()) return new rpc::Refused(s);
  if (auto refused = rpc::refusal_of(gw.access, call.request)) {
    return new rpc::Refused(*refused);
  }
  auto reactor = std::make_shared<GenerateCall>(gw.io.next(), request);
  reactor->run(gw.generation, std::move(call));
  return reactor.get();
}

}  // namespace kvgate::app::gateway_v2
