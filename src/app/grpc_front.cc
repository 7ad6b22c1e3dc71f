#include "app/grpc_front.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <simdjson.h>

#include <fstream>
#include <sstream>

#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core/string.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/core/log.h"
#include "kvgate/core/thread_annotations.h"
#include "kvgate/v1/gateway.grpc.pb.h"

namespace kvgate::app {
namespace net = boost::asio;

namespace {

constexpr std::string_view kServiceName = "kvgate.v1.Gateway";

// What an HTTP status of the generation handler means to a gRPC client.
grpc::StatusCode code_for(unsigned status) {
  switch (status) {
    case 400:
    case 413:
    case 422:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case 401:
      return grpc::StatusCode::UNAUTHENTICATED;
    case 403:
      return grpc::StatusCode::PERMISSION_DENIED;
    case 404:
      return grpc::StatusCode::NOT_FOUND;
    case 408:
    case 504:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case 429:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 499:
      return grpc::StatusCode::CANCELLED;
    case 501:
      return grpc::StatusCode::UNIMPLEMENTED;
    case 502:
    case 503:
      return grpc::StatusCode::UNAVAILABLE;
    case 508:
      return grpc::StatusCode::FAILED_PRECONDITION;
    default:
      return status >= 500 ? grpc::StatusCode::INTERNAL : grpc::StatusCode::UNKNOWN;
  }
}

// The message of an OpenAI-shaped error body ({"error": {"message": ...}}), else the body.
std::string error_message(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view message;
  if (parser.parse(body.data(), body.size()).get(doc) == simdjson::SUCCESS &&
      doc["error"]["message"].get_string().get(message) == simdjson::SUCCESS) {
    return std::string(message);
  }
  return std::string(body.substr(0, 512));
}

// The /v1/completions (or, for a conversation, /v1/chat/completions) body a Generate call stands
// for: streamed, with usage and token ids.
std::string completions_body(const v1::GenerateRequest& r) {
  std::string body;
  JsonWriter w(&body);
  w.begin_object();
  if (!r.model().empty()) w.member("model", r.model());
  if (r.has_chat()) {
    w.key("messages").begin_array();
    for (const v1::ChatMessage& m : r.chat().messages()) {
      w.begin_object().member("role", m.role()).member("content", m.content()).end_object();
    }
    w.end_array();
  } else if (r.has_token_ids()) {
    w.key("prompt").begin_array();
    for (uint32_t id : r.token_ids().ids()) w.value(id);
    w.end_array();
  } else {
    w.member("prompt", r.text());
  }
  w.member("max_tokens", r.max_tokens() == 0 ? 16u : r.max_tokens());
  w.member("stream", true);
  w.key("stream_options").begin_object().member("include_usage", true).end_object();
  w.member("return_token_ids", true);
  const v1::SamplingParams& s = r.sampling();
  if (s.has_temperature()) w.member("temperature", static_cast<double>(s.temperature()));
  if (s.has_top_p()) w.member("top_p", static_cast<double>(s.top_p()));
  if (s.has_top_k()) w.member("top_k", static_cast<int64_t>(s.top_k()));
  if (s.has_min_p()) w.member("min_p", static_cast<double>(s.min_p()));
  if (s.has_presence_penalty()) {
    w.member("presence_penalty", static_cast<double>(s.presence_penalty()));
  }
  if (s.has_frequency_penalty()) {
    w.member("frequency_penalty", static_cast<double>(s.frequency_penalty()));
  }
  if (s.has_repetition_penalty()) {
    w.member("repetition_penalty", static_cast<double>(s.repetition_penalty()));
  }
  if (s.has_seed()) w.member("seed", s.seed());
  if (r.stop_size() > 0) {
    w.key("stop").begin_array();
    for (const std::string& stop : r.stop()) w.value(stop);
    w.end_array();
  }
  if (r.stop_token_ids_size() > 0) {
    w.key("stop_token_ids").begin_array();
    for (uint32_t id : r.stop_token_ids()) w.value(id);
    w.end_array();
  }
  if (r.ignore_eos()) w.member("ignore_eos", true);
  w.end_object();
  return body;
}

// The pipeline's view of a call's request (`messages` holds the views of its conversation). The
// engine is always asked for a stream with its usage: that is how a call learns its tokens.
TypedRequest typed_request(const v1::GenerateRequest& r, std::vector<ChatMessage>* messages) {
  TypedRequest typed{.model = r.model(), .stream = true, .include_usage = true};
  if (r.has_chat()) {
    for (const v1::ChatMessage& m : r.chat().messages())
      messages->push_back({m.role(), m.content()});
    typed.messages = *messages;
  } else if (r.has_token_ids()) {
    const auto& ids = r.token_ids().ids();
    typed.token_ids = std::span<const TokenId>(ids.data(), static_cast<size_t>(ids.size()));
  } else {
    typed.text = r.text();
  }
  return typed;
}

// "ipv4:127.0.0.1:5000" / "ipv6:[::1]:5000" as an endpoint (unspecified when it is neither).
net::ip::tcp::endpoint peer_endpoint(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t kind = peer.find(':');
  if (colon == std::string::npos || kind == colon) return {};
  std::string host = peer.substr(kind + 1, colon - kind - 1);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return {};
  return {address, static_cast<uint16_t>(std::atoi(peer.c_str() + colon + 1))};
}

// What the access rules read of a call, as of an HTTP request: the caller's authorization
// metadata and address.
http::Request caller_of(grpc::CallbackServerContext* ctx) {
  http::Request req;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    req.fields.add("authorization", std::string_view(it->second.data(), it->second.size()));
  }
  req.remote = peer_endpoint(ctx->peer());
  return req;
}

// The generation request an HTTP client would have sent for this call.
http::Request as_http_request(const GrpcFrontParts& gw, grpc::CallbackServerContext* ctx,
                              const v1::GenerateRequest& r) {
  http::Request req = caller_of(ctx);
  req.verb = http::Verb::post;
  req.request_target = r.has_chat() ? "/v1/chat/completions" : "/v1/completions";
  req.fields.add("content-type", "application/json");
  if (!r.request_id().empty()) req.fields.add(kRequestIdHeader, r.request_id());
  if (!r.routing_key().empty()) req.fields.add(gw.config.routing_key_header, r.routing_key());
  req.payload = completions_body(r);
  return req;
}

// A request's bytes decoded; false when they are not such a message.
template <class Message>
bool decode_message(const grpc::ByteBuffer* bytes, Message* out) {
  grpc::ByteBuffer copy(*bytes);  // shares the slices; Deserialize consumes its buffer
  return grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok();
}
// An answer's bytes.
template <class Message>
void encode_message(const Message& message, grpc::ByteBuffer* out) {
  out->Clear();  // the serializer writes into an empty buffer only
  bool own = false;
  (void)grpc::SerializationTraits<Message>::Serialize(message, out, &own);
}
// The status for request bytes that are not a `Message`.
template <class Message>
grpc::Status not_a(const Message& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "the request is not a valid " + message.GetTypeName() + " message");
}

// One Generate call: the gRPC stream on one side, the generation handler's Responder on the
// other. gRPC takes one write at a time; the handler never waits for it: tokens that arrive while
// a write is in flight join one queued chunk, sent when the write completes (so a slow client
// gets fewer, larger chunks and the call holds at most the generation's own tokens). The end of
// the call (Complete and OK, or an error status) goes out after the last chunk.
class GenerateCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                           public http::ResponseSink,
                           public std::enable_shared_from_this<GenerateCall> {
 public:
  GenerateCall(net::io_context& ctx, v1::GenerateRequest r)
      : executor_(ctx.get_executor()),
        stream_(r.stream()),
        return_text_(r.return_text()),
        request_(std::move(r)) {
    typed_ = typed_request(request_, &messages_);
  }

  // Runs the handler; the call owns itself until gRPC is done with it.
  void run(GenerationPipeline& generation, http::Request request) {
    self_ = shared_from_this();
    auto body = [](std::shared_ptr<GenerateCall> call, GenerationPipeline& pipeline,
                   http::Request req) -> net::awaitable<void> {
      {
        http::Responder responder(*call);
        const ApiRoute route = req.path() == "/v1/chat/completions" ? ApiRoute::kChatCompletions
                                                                    : ApiRoute::kCompletions;
        co_await pipeline.serve(route, req, responder, &call->typed_);
      }
      call->complete();
    };
    net::co_spawn(executor_, body(shared_from_this(), generation, std::move(request)),
                  net::detached);
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
      take_event(response.body);  // a worker that answered whole: one completion object
    } else {
      error_ = error_message(response.body);
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
    sse_.append(data);
    size_t end;
    while ((end = sse_.find("\n\n")) != std::string::npos) {
      for (size_t at = 0; at < end;) {
        const size_t eol = std::min(sse_.find('\n', at), end);
        std::string_view line(sse_.data() + at, eol - at);
        at = eol + 1;
        if (line.rfind("data:", 0) != 0) continue;
        line.remove_prefix(line.size() > 5 && line[5] == ' ' ? 6 : 5);
        if (line != "[DONE]") take_event(line);
      }
      sse_.erase(0, end + 2);
    }
    if (stream_ && (!chunk_.token_ids().empty() || !chunk_.text().empty())) {
      if (!send_chunk()) co_return absl::CancelledError("the client went away");
    }
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
  // What to hand gRPC next: a chunk, the last message with the status, or the status alone.
  struct Next {
    enum Kind { kNothing, kChunk, kLast, kFinish } kind = kNothing;
  };

  // Under mu_, with no write in flight: takes the queued chunk, else the end if it is ready.
  Next next_write() KVGATE_REQUIRES(mu_) {
    writing_ = false;
    if (ended_) return {};
    if (gone_ && ending_) {
      ended_ = true;
      return {Next::kFinish};
    }
    if (has_queued_ && !gone_) {
      *in_flight_.mutable_chunk() = std::move(queued_);
      queued_.Clear();
      has_queued_ = false;
      writing_ = true;
      return {Next::kChunk};
    }
    if (!ending_) return {};
    ended_ = true;
    if (final_status_.ok() && !gone_) {
      *in_flight_.mutable_complete() = std::move(final_);
      return {Next::kLast};
    }
    return {Next::kFinish};
  }
  void start(const Next& next) {
    switch (next.kind) {
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
        Finish(gone_status());
        break;
    }
  }
  grpc::Status gone_status() {
    MutexLock lock(&mu_);
    return gone_ ? grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the call")
                 : final_status_;
  }

  // Queues chunk_ (joined to one still waiting) and starts a write when none is in flight;
  // false once the client is gone.
  bool send_chunk() {
    Next next;
    {
      MutexLock lock(&mu_);
      if (gone_) return false;
      queued_.mutable_token_ids()->Add(chunk_.token_ids().begin(), chunk_.token_ids().end());
      queued_.mutable_text()->append(chunk_.text());
      has_queued_ = true;
      if (!writing_) next = next_write();
    }
    chunk_.Clear();
    start(next);
    return true;
  }

  void read_headers(std::span<const http::Header> headers) {
    for (const auto& [name, value] : headers) {
      if (boost::beast::iequals(name, kWorkerHeader)) complete_.set_worker(value);
      if (boost::beast::iequals(name, kRequestIdHeader)) complete_.set_request_id(value);
      if (boost::beast::iequals(name, kRankAnswerHeader)) {
        complete_.set_dp_rank(std::atoi(value.c_str()));
        rank_known_ = true;
      }
    }
  }

  // One completion chunk (or whole completion): its tokens, text, finish reason, usage, or error.
  void take_event(std::string_view json) {
    simdjson::dom::element doc;
    if (parser_.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) return;
    simdjson::dom::element err;
    if (doc["error"].get(err) == simdjson::SUCCESS) {
      std::string_view message;
      error_ = err["message"].get_string().get(message) == simdjson::SUCCESS
                   ? std::string(message)
                   : std::string("the worker failed");
      uint64_t code = 0;
      if (err["code"].get_uint64().get(code) == simdjson::SUCCESS) status_ = unsigned(code);
      if (status_ == 200) status_ = 502;
      return;
    }
    simdjson::dom::array choices;
    if (doc["choices"].get_array().get(choices) == simdjson::SUCCESS) {
      for (simdjson::dom::element c : choices) {
        std::string_view text, reason;
        // A completion's text, a chat chunk's delta, or a whole chat answer's message.
        if (return_text_ && (c["text"].get_string().get(text) == simdjson::SUCCESS ||
                             c["delta"]["content"].get_string().get(text) == simdjson::SUCCESS ||
                             c["message"]["content"].get_string().get(text) == simdjson::SUCCESS)) {
          chunk_.mutable_text()->append(text);
          if (!stream_) complete_.mutable_text()->append(text);
        }
        simdjson::dom::array ids;
        if (c["token_ids"].get_array().get(ids) == simdjson::SUCCESS) {
          for (simdjson::dom::element id : ids) {
            uint64_t v = 0;
            if (id.get_uint64().get(v) != simdjson::SUCCESS) continue;
            chunk_.add_token_ids(static_cast<uint32_t>(v));
            if (!stream_) complete_.add_token_ids(static_cast<uint32_t>(v));
          }
        }
        if (c["finish_reason"].get_string().get(reason) == simdjson::SUCCESS) {
          complete_.set_finish_reason(std::string(reason));
        }
        break;  // one prompt, one choice
      }
    }
    simdjson::dom::element usage;
    if (doc["usage"].get(usage) == simdjson::SUCCESS && usage.is_object()) {
      uint64_t v = 0;
      v1::Usage* u = complete_.mutable_usage();
      if (usage["prompt_tokens"].get_uint64().get(v) == simdjson::SUCCESS) u->set_prompt_tokens(v);
      if (usage["completion_tokens"].get_uint64().get(v) == simdjson::SUCCESS) {
        u->set_completion_tokens(static_cast<uint32_t>(v));
      }
      if (usage["prompt_tokens_details"]["cached_tokens"].get_uint64().get(v) ==
          simdjson::SUCCESS) {
        u->set_cached_tokens(static_cast<uint32_t>(v));
      }
    }
    if (!stream_) chunk_.Clear();
  }

  // The handler has returned: the call ends after whatever is still being written.
  void complete() {
    grpc::Status status = grpc::Status::OK;
    if (status_ != 200 || !error_.empty()) {
      const unsigned code = status_ == 200 ? 502 : status_;
      status = grpc::Status(code_for(code), error_.empty() ? "the generation failed" : error_);
    } else if (complete_.finish_reason().empty()) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the worker's stream ended before the generation finished");
    }
    if (!complete_.has_usage()) complete_.mutable_usage();
    if (!rank_known_) complete_.set_dp_rank(-1);
    Next next;
    {
      MutexLock lock(&mu_);
      final_ = std::move(complete_);
      final_status_ = std::move(status);
      ending_ = true;
      if (!writing_) next = next_write();
    }
    start(next);
  }

  const net::any_io_executor executor_;
  const bool stream_;
  const bool return_text_;
  // The call's request, read by the pipeline as a TypedRequest (views into it).
  const v1::GenerateRequest request_;
  std::vector<ChatMessage> messages_;
  TypedRequest typed_;
  std::shared_ptr<GenerateCall> self_;  // until OnDone
  // The handler's side: only its coroutine touches these.
  unsigned status_ = 0;
  bool rank_known_ = false;  // the handler named the rank (it pinned one)
  std::string error_;
  std::string sse_;
  simdjson::dom::parser parser_;
  v1::Chunk chunk_;        // tokens of the events parsed last
  v1::Complete complete_;  // the end, as it fills in
  // Shared with gRPC's reactions.
  Mutex mu_;
  bool gone_ KVGATE_GUARDED_BY(mu_) = false;
  bool ended_ KVGATE_GUARDED_BY(mu_) = false;    // the last message or status was handed over
  bool writing_ KVGATE_GUARDED_BY(mu_) = false;  // in_flight_ is gRPC's until OnWriteDone
  bool has_queued_ KVGATE_GUARDED_BY(mu_) = false;
  bool ending_ KVGATE_GUARDED_BY(mu_) = false;  // final_ and final_status_ are set
  v1::Chunk queued_ KVGATE_GUARDED_BY(mu_);
  v1::Complete final_ KVGATE_GUARDED_BY(mu_);
  grpc::Status final_status_ KVGATE_GUARDED_BY(mu_);
  v1::GenerateResponse in_flight_;
  grpc::ByteBuffer in_flight_bytes_;  // in_flight_ serialized, gRPC's until OnWriteDone
  std::function<void()> on_gone_ KVGATE_GUARDED_BY(mu_);
};

// A Generate refused before it starts.
class Refused final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit Refused(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

// Every method takes its request as bytes and decodes it here: gRPC's own decoding answers a
// message that does not parse with UNIMPLEMENTED (gRPC 1.51's callback API), which tells a client
// the method is missing, not that its message is broken (INVALID_ARGUMENT).
using RawGatewayService =
    v1::Gateway::WithRawCallbackMethod_Generate<v1::Gateway::WithRawCallbackMethod_Tokenize<
        v1::Gateway::WithRawCallbackMethod_Detokenize<v1::Gateway::WithRawCallbackMethod_ListModels<
            v1::Gateway::WithRawCallbackMethod_ListWorkers<v1::Gateway::Service>>>>>;

class GatewayService final : public RawGatewayService {
 public:
  explicit GatewayService(const GrpcFrontParts& gw) : gw_(gw) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* bytes) override {
    v1::GenerateRequest request;
    if (!decode_message(bytes, &request)) return new Refused(not_a(request));
    if (auto invalid = invalid_input(request)) return new Refused(*invalid);
    http::Request req = as_http_request(gw_, ctx, request);
    if (auto refused = refusal_of(req)) return new Refused(*refused);
    auto call = std::make_shared<GenerateCall>(gw_.io.next(), std::move(request));
    call->run(gw_.generation, std::move(req));
    return call.get();
  }

  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                     grpc::ByteBuffer* out) override {
    return unary<v1::TokenizeRequest, v1::TokenizeResponse>(ctx, in, out,
                                                            &GatewayService::tokenize);
  }
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                       grpc::ByteBuffer* out) override {
    return unary<v1::DetokenizeRequest, v1::DetokenizeResponse>(ctx, in, out,
                                                                &GatewayService::detokenize);
  }
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                       grpc::ByteBuffer* out) override {
    return unary<v1::ListModelsRequest, v1::ListModelsResponse>(ctx, in, out,
                                                                &GatewayService::list_models);
  }
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* in,
                                        grpc::ByteBuffer* out) override {
    return unary<v1::ListWorkersRequest, v1::ListWorkersResponse>(ctx, in, out,
                                                                  &GatewayService::list_workers);
  }

 private:
  // A unary call: the caller's key checked, the request decoded, `method` run, its answer encoded.
  template <class Request, class Response>
  grpc::ServerUnaryReactor* unary(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                  grpc::ByteBuffer* out,
                                  grpc::Status (GatewayService::*method)(const Request&, Response*)
                                      const) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Request request;
    Response response;
    grpc::Status status;
    if (auto refused = refusal(ctx)) {
      status = *refused;
    } else if (!decode_message(in, &request)) {
      status = not_a(request);
    } else {
      status = (this->*method)(request, &response);
      if (status.ok()) encode_message(response, out);
    }
    reactor->Finish(status);
    return reactor;
  }

  static std::optional<grpc::Status> invalid_input(const v1::GenerateRequest& request) {
    if (request.input_case() == v1::GenerateRequest::INPUT_NOT_SET ||
        (request.has_text() && request.text().empty())) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "GenerateRequest needs its input: token_ids, text or chat");
    }
    if (request.has_chat() && request.chat().messages().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "GenerateRequest.chat holds no messages");
    }
    if (request.has_token_ids() && request.token_ids().ids().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "GenerateRequest.token_ids is empty");
    }
    return std::nullopt;
  }

  grpc::Status tokenize(const v1::TokenizeRequest& request, v1::TokenizeResponse* response) const {
    const tokenizer::Tokenizer* tok = gw_.tokenizers.for_model(request.model()).model();
    if (tok == nullptr) return no_tokenizer(request.model());
    std::vector<TokenId> ids;
    const bool special = !request.has_add_special_tokens() || request.add_special_tokens();
    if (Status s = tok->encode(request.text(), special, &ids); !s.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the text cannot be tokenized: " + std::string(s.message()));
    }
    for (TokenId id : ids) response->add_token_ids(id);
    return grpc::Status::OK;
  }

  grpc::Status detokenize(const v1::DetokenizeRequest& request,
                          v1::DetokenizeResponse* response) const {
    const tokenizer::Tokenizer* tok = gw_.tokenizers.for_model(request.model()).model();
    if (tok == nullptr) return no_tokenizer(request.model());
    std::vector<TokenId> ids;
    for (uint32_t id : request.token_ids()) {
      if (id >= tok->vocab_size()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(tok->vocab_size()));
      }
      ids.push_back(static_cast<TokenId>(id));
    }
    response->set_text(tok->decode(ids, false));
    return grpc::Status::OK;
  }

  grpc::Status list_models(const v1::ListModelsRequest& /*request*/,
                           v1::ListModelsResponse* response) const {
    const auto fleet = gw_.workers.snapshot();
    for (const std::string& name : fleet->models) {
      v1::Model* m = response->add_models();
      m->set_id(name);
      const std::vector<uint64_t>* servers = fleet->servers_of(name);
      for (size_t i = 0; i < fleet->infos.size(); ++i) {
        if (servers != nullptr && !workers::FleetSnapshot::serves(*servers, i)) continue;
        m->set_workers(m->workers() + 1);
        m->set_max_model_len(std::max(m->max_model_len(), fleet->infos[i]->max_model_len));
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status list_workers(const v1::ListWorkersRequest& /*request*/,
                            v1::ListWorkersResponse* response) const {
    const auto fleet = gw_.workers.snapshot();
    for (size_t i = 0; i < fleet->workers.size(); ++i) {
      const workers::Worker& w = *fleet->workers[i];
      v1::Worker* out = response->add_workers();
      out->set_url(w.url());
      for (const std::string& m : fleet->infos[i]->models) out->add_models(m);
      out->set_routable(w.routable());
      out->set_health(workers::health_name(w.health().state()));
      out->set_circuit_breaker(workers::breaker_state_name(w.breaker().state()));
      out->set_liveness(workers::liveness_name(w.liveness().state()));
      out->set_in_flight(w.in_flight());
      out->set_index_blocks(w.index_blocks());
      out->set_dp_size(fleet->infos[i]->dp_size);
    }
    return grpc::Status::OK;
  }

  // UNAUTHENTICATED without the gateway's --api-key, as HTTP answers 401.
  std::optional<grpc::Status> refusal(grpc::CallbackServerContext* ctx) const {
    return refusal_of(caller_of(ctx));
  }
  std::optional<grpc::Status> refusal_of(const http::Request& req) const {
    auto refused = gw_.access.check(Access::kClient, req);
    if (!refused) return std::nullopt;
    return grpc::Status(code_for(refused->status), error_message(refused->body));
  }
  static grpc::Status no_tokenizer(const std::string& model) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the gateway has no tokenizer for model '" + model +
                            "': start it with --tokenizer (or ask a worker's /tokenize)");
  }

  const GrpcFrontParts& gw_;
};

GrpcFront::GrpcFront(GrpcFrontParts parts)
    : parts_(std::move(parts)), service_(std::make_unique<GatewayService>(parts_)) {}

GrpcFront::~GrpcFront() { stop(); }

namespace {

Result<std::string> read_pem(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::InvalidArgumentError("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Status GrpcFront::start() {
  const GatewayConfig& c = parts_.config;
  const std::string host = c.grpc_host.empty() ? c.host : c.grpc_host;
  const std::string address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                              ":" + std::to_string(c.grpc_port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!c.tls_cert_path.empty()) {
    auto cert = read_pem(c.tls_cert_path);
    auto key = read_pem(c.tls_key_path);
    if (!cert.ok()) return cert.status();
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(tls);
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, &port_);
  builder.RegisterService(service_.get());
  // What calls may hold: a message past grpc_max_message_bytes is refused (RESOURCE_EXHAUSTED),
  // but gRPC reads it whole first, and with its default windows (grown by its bandwidth probe)
  // ten concurrent 100 MB messages grew the process by about 1 GB. A memory quota for the
  // transport, a fixed per-stream window and no bandwidth probe keep what such calls hold to
  // about twice the quota (requests are small: the windows cost a legitimate call nothing).
  builder.SetMaxReceiveMessageSize(static_cast<int>(c.grpc_max_message_bytes));
  grpc::ResourceQuota quota("kvgate-grpc");
  quota.Resize(c.grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
  // Clients' keepalive pings are welcome (a long generation is quiet between chunks).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return absl::UnavailableError("--grpc-port: cannot listen on " + address);
  }
  health_thread_ = std::thread([this] { watch_readiness(); });
  return Status();
}

void GrpcFront::watch_readiness() {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const bool serving = parts_.ready();
    if (health != nullptr) {
      health->SetServingStatus(serving);
      health->SetServingStatus(std::string(kServiceName), serving);
    }
    cv_.wait_for(lock, std::chrono::milliseconds(500));
  }
}

void GrpcFront::drain_began() { cv_.notify_all(); }

void GrpcFront::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (health_thread_.joinable()) health_thread_.join();
  if (server_) {
    // Calls still running are cancelled after a second: their handlers see the client gone.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
  }
}

}  // namespace kvgate::app
