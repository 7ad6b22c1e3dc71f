#include "app/grpc_gateway_v1.h"

#include <simdjson.h>

#include "app/grpc_common.h"
#include "app/grpc_stream_call.h"
#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/beast/core/string.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/http/sse.h"
#include "kvgate/v1/gateway.grpc.pb.h"

namespace kvgate::app {
namespace net = boost::asio;
using rpc::code_for;
using rpc::decode_message;
using rpc::encode_message;
using rpc::error_message;
using rpc::not_a;
using rpc::Refused;
using rpc::StreamCall;

namespace gateway_v1 {

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

// The generation request an HTTP client would have sent for this call.
http::Request as_http_request(const GrpcFrontParts& gw, grpc::CallbackServerContext* ctx,
                              const v1::GenerateRequest& r) {
  http::Request req = rpc::caller_of(ctx);
  req.verb = http::Verb::post;
  req.request_target = r.has_chat() ? "/v1/chat/completions" : "/v1/completions";
  req.fields.add("content-type", "application/json");
  if (!r.request_id().empty()) req.fields.add(kRequestIdHeader, r.request_id());
  if (!r.routing_key().empty()) req.fields.add(gw.config.routing_key_header, r.routing_key());
  req.payload = completions_body(r);
  return req;
}

// One Generate call: the gRPC stream on one side, the generation handler's Responder on the
// other. Tokens that arrive while a write is in flight join the one queued chunk
// (rpc::StreamCall).
class GenerateCall final : public StreamCall<v1::GenerateResponse>,
                           public std::enable_shared_from_this<GenerateCall> {
 public:
  GenerateCall(net::io_context& ctx, v1::GenerateRequest r)
      : StreamCall(ctx.get_executor()),
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
    net::co_spawn(executor(), body(shared_from_this(), generation, std::move(request)),
                  net::detached);
  }

  // ---- gRPC's side ----
  void OnDone() override { self_.reset(); }

  // ---- the handler's side (ResponseSink) ----
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
    sse_.feed(data, [this](std::string_view event) {
      if (event != "[DONE]") take_event(event);
    });
    if (stream_ && (!chunk_.token_ids().empty() || !chunk_.text().empty())) {
      if (!send_chunk()) co_return absl::CancelledError("the client went away");
    }
    co_return Status();
  }
  net::awaitable<Status> finish() override { co_return Status(); }

 private:
  bool join(v1::Chunk& last, const v1::Chunk& next) const override {
    last.mutable_token_ids()->Add(next.token_ids().begin(), next.token_ids().end());
    last.mutable_text()->append(next.text());
    return true;
  }

  // Queues chunk_ (joined to one still waiting); false once the client is gone.
  bool send_chunk() {
    const bool queued = queue(std::span(&chunk_, 1));
    chunk_.Clear();
    return queued;
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
    end(std::move(complete_), std::move(status));
  }

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
  http::SseParser sse_;
  simdjson::dom::parser parser_;
  v1::Chunk chunk_;        // tokens of the events parsed last
  v1::Complete complete_;  // the end, as it fills in
};

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

  std::optional<grpc::Status> refusal(grpc::CallbackServerContext* ctx) const {
    return rpc::refusal_of(gw_.access, rpc::caller_of(ctx));
  }
  std::optional<grpc::Status> refusal_of(const http::Request& req) const {
    return rpc::refusal_of(gw_.access, req);
  }
  static grpc::Status no_tokenizer(const std::string& model) { return rpc::no_tokenizer(model); }

  const GrpcFrontParts& gw_;
};

}  // namespace gateway_v1

std::unique_ptr<grpc::Service> make_gateway_v1(const GrpcFrontParts& gw) {
  return std::make_unique<gateway_v1::GatewayService>(gw);
}

}  // namespace kvgate::app
