// A v2 Generate call: the gRPC stream on one side, the generation pipeline's Responder on the
// other (grpc_generate_v2.h).
#include "app/grpc_common.h"
#include "app/grpc_generate_v2.h"
#include "app/grpc_stream_call.h"
#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/beast/core/string.hpp"
#include "kvgate/http/sse.h"

namespace kvgate::app::gateway_v2 {
namespace net = boost::asio;
namespace {

// A choice's tokens join its last queued chunk while that chunk waits for a write
// (rpc::StreamCall).
class GenerateCall final : public rpc::StreamCall<v2::GenerateResponse>,
                           public std::enable_shared_from_this<GenerateCall> {
 public:
  GenerateCall(net::io_context& ctx, const v2::GenerateRequest& r)
      : StreamCall(ctx.get_executor()),
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
    net::co_spawn(executor(), body(shared_from_this(), generation, std::move(call)), net::detached);
  }

  // ---- gRPC's side ----
  void OnDone() override { self_.reset(); }

  // ---- the handler's side (ResponseSink) ----
  net::awaitable<Status> send(http::Response response) override {
    status_ = response.status;
    read_headers(response.headers);
    if (response.status == 200) {
      std::vector<v2::Chunk> chunks;
      reader_.take(response.body, &chunks);  // a worker that answered whole
      if (!queue(chunks)) co_return absl::CancelledError("the client went away");
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
    if (!queue(chunks)) co_return absl::CancelledError("the client went away");
    co_return Status();
  }
  net::awaitable<Status> finish() override { co_return Status(); }

 private:
  bool join(v2::Chunk& last, const v2::Chunk& next) const override {
    if (last.index() != next.index() || last.finish_reason() != v2::FINISH_REASON_UNSPECIFIED) {
      return false;
    }
    merge_chunk(last, next);
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
    end(std::move(done), std::move(status));
  }

  std::shared_ptr<GenerateCall> self_;  // until OnDone
  // The handler's side: only its coroutine touches these.
  AnswerReader reader_;
  unsigned status_ = 0;
  std::string error_;
  http::SseParser sse_;
  std::string worker_;
  std::string request_id_;
  int32_t dp_rank_ = -1;  // the handler named none: the engine chose
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
