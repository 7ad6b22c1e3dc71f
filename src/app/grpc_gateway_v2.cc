#include "app/grpc_gateway_v2.h"

#include "app/grpc_common.h"
#include "app/grpc_generate_v2.h"
#include "app/worker_exchange.h"
#include "boost/asio/co_spawn.hpp"
#include "boost/asio/detached.hpp"
#include "boost/beast/core/string.hpp"
#include "kvgate/core/json_writer.h"
#include "kvgate/v2/gateway.grpc.pb.h"

namespace kvgate::app {
namespace net = boost::asio;
namespace gateway_v2 {
namespace {

using rpc::invalid;

// An HTTP handler's whole answer, for a unary call that runs one: its status, headers and body
// (a streamed body gathered).
class WholeAnswer final : public http::ResponseSink {
 public:
  explicit WholeAnswer(net::any_io_executor executor) : executor_(std::move(executor)) {}

  net::any_io_executor executor() const override { return executor_; }
  net::awaitable<Status> send(http::Response response) override {
    status = response.status;
    headers = std::move(response.headers);
    body = std::move(response.body);
    co_return Status();
  }
  net::awaitable<Status> start(unsigned s, std::string_view /*content_type*/,
                               std::span<const http::Header> h) override {
    status = s;
    headers.assign(h.begin(), h.end());
    co_return Status();
  }
  net::awaitable<Status> write(std::string_view data) override {
    body.append(data);
    co_return Status();
  }
  net::awaitable<Status> finish() override { co_return Status(); }
  // A unary answer is short: the client leaving is not watched for.
  void watch(std::function<void()> /*on_gone*/) override {}
  void unwatch() override {}

  // The header's value ("" when absent).
  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (boost::beast::iequals(n, name)) return v;
    }
    return {};
  }
  // The gRPC status an answer other than 200 stands for.
  grpc::Status failure() const {
    return grpc::Status(rpc::code_for(status), rpc::error_message(body));
  }

  unsigned status = 0;
  std::vector<http::Header> headers;
  std::string body;

 private:
  const net::any_io_executor executor_;
};

// Runs `handler` on one of the gateway's executors with `req`, then `finish` with its answer,
// then finishes the call with `finish`'s status and encoded response.
template <class Response, class Handler, class Finish>
void answer_through(const GrpcFrontParts& gw, grpc::ServerUnaryReactor* reactor,
                    grpc::ByteBuffer* out, http::Request req, Handler handler, Finish finish) {
  net::io_context& ctx = gw.io.next();
  auto run = [](net::any_io_executor ex, grpc::ServerUnaryReactor* call, grpc::ByteBuffer* bytes,
                http::Request q, Handler h, Finish f) -> net::awaitable<void> {
    WholeAnswer answer(ex);
    {
      http::Responder responder(answer);
      co_await h(q, responder);
    }
    Response response;
    grpc::Status status = answer.status == 200 ? f(answer, &response) : answer.failure();
    if (status.ok()) rpc::encode_message(response, bytes);
    call->Finish(status);
  };
  net::co_spawn(
      ctx,
      run(ctx.get_executor(), reactor, out, std::move(req), std::move(handler), std::move(finish)),
      net::detached);
}

// The HTTP request a handler is given for a call: the caller's credentials and `body`.
http::Request post(grpc::CallbackServerContext* ctx, std::string_view path, std::string body) {
  http::Request req = rpc::caller_of(ctx);
  req.verb = http::Verb::post;
  req.request_target = std::string(path);
  req.fields.add("content-type", "application/json");
  req.payload = std::move(body);
  return req;
}

grpc::Status embed_body(const v2::EmbedRequest& r, std::string* body) {
  if (r.inputs().empty()) return invalid("EmbedRequest.inputs is empty");
  const bool ids = r.inputs(0).has_token_ids();
  JsonWriter w(body);
  w.begin_object();
  if (!r.model().empty()) w.member("model", r.model());
  if (r.has_dimensions()) w.member("dimensions", r.dimensions());
  w.key("input");
  if (r.inputs_size() > 1) w.begin_array();
  for (const v2::EmbedInput& in : r.inputs()) {
    if (in.input_case() == v2::EmbedInput::INPUT_NOT_SET || in.has_token_ids() != ids) {
      return invalid("EmbedRequest.inputs must be all texts or all token_ids");
    }
    if (in.has_text()) {
      w.value(in.text());
      continue;
    }
    w.begin_array();
    for (uint32_t id : in.token_ids().ids()) w.value(id);
    w.end_array();
  }
  if (r.inputs_size() > 1) w.end_array();
  w.end_object();
  return grpc::Status::OK;
}

// The engine's embeddings answer ({"data": [{"index", "embedding"}], "usage"}) as the response.
grpc::Status read_embeddings(const WholeAnswer& answer, v2::EmbedResponse* out) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array data;
  if (parser.parse(answer.body).get(doc) != simdjson::SUCCESS ||
      doc["data"].get_array().get(data) != simdjson::SUCCESS) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "the worker's embeddings did not parse");
  }
  for (simdjson::dom::element e : data) {
    v2::Embedding* embedding = out->add_embeddings();
    uint64_t index = 0;
    if (e["index"].get_uint64().get(index) != simdjson::SUCCESS) index = out->embeddings_size() - 1;
    embedding->set_index(static_cast<uint32_t>(index));
    simdjson::dom::array values;
    if (e["embedding"].get_array().get(values) != simdjson::SUCCESS) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "an embedding is not a list of numbers");
    }
    for (simdjson::dom::element v : values) {
      double x = 0;
      if (v.get_double().get(x) != simdjson::SUCCESS) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "an embedding holds a non-number");
      }
      embedding->add_values(static_cast<float>(x));
    }
  }
  uint64_t prompt = 0;
  if (doc["usage"]["prompt_tokens"].get_uint64().get(prompt) == simdjson::SUCCESS) {
    out->set_prompt_tokens(static_cast<uint32_t>(prompt));
  }
  out->set_worker(answer.header(kWorkerHeader));
  out->set_request_id(answer.header(kRequestIdHeader));
  return grpc::Status::OK;
}

// The /tokenize body: a text's "prompt" or a conversation's "messages" (rendered by the engine).
std::string tokenize_body(const v2::TokenizeRequest& r) {
  std::string body;
  JsonWriter w(&body);
  w.begin_object();
  if (!r.model().empty()) w.member("model", r.model());
  if (r.has_chat()) {
    w.key("messages").raw(chat_messages_json(r.chat()));  // as Generate writes them
  } else {
    w.member("prompt", r.text());
  }
  if (r.has_add_special_tokens()) w.member("add_special_tokens", r.add_special_tokens());
  w.end_object();
  return body;
}

grpc::Status read_tokens(const WholeAnswer& answer, v2::TokenizeResponse* out) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array tokens;
  if (parser.parse(answer.body).get(doc) != simdjson::SUCCESS ||
      doc["tokens"].get_array().get(tokens) != simdjson::SUCCESS) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "the tokenize answer did not parse");
  }
  for (simdjson::dom::element t : tokens) {
    uint64_t id = 0;
    if (t.get_uint64().get(id) == simdjson::SUCCESS) out->add_token_ids(static_cast<uint32_t>(id));
  }
  uint64_t len = 0;
  if (doc["max_model_len"].get_uint64().get(len) == simdjson::SUCCESS) {
    out->set_max_model_len(static_cast<uint32_t>(len));
  }
  return grpc::Status::OK;
}

v2::Health health_of(workers::Health h) {
  switch (h) {
    case workers::Health::kHealthy:
      return v2::HEALTH_HEALTHY;
    case workers::Health::kUnhealthy:
      return v2::HEALTH_UNHEALTHY;
    case workers::Health::kUnknown:
      break;
  }
  return v2::HEALTH_UNSPECIFIED;
}

v2::Liveness liveness_of(workers::Liveness l) {
  switch (l) {
    case workers::Liveness::kLive:
      return v2::LIVENESS_LIVE;
    case workers::Liveness::kUnreachable:
      return v2::LIVENESS_UNREACHABLE;
    case workers::Liveness::kWedged:
      return v2::LIVENESS_WEDGED;
  }
  return v2::LIVENESS_UNSPECIFIED;
}

v2::CircuitBreaker breaker_of(workers::BreakerState b) {
  switch (b) {
    case workers::BreakerState::kClosed:
      return v2::CIRCUIT_BREAKER_CLOSED;
    case workers::BreakerState::kOpen:
      return v2::CIRCUIT_BREAKER_OPEN;
    case workers::BreakerState::kHalfOpen:
      return v2::CIRCUIT_BREAKER_HALF_OPEN;
  }
  return v2::CIRCUIT_BREAKER_UNSPECIFIED;
}

}  // namespace

// Every method takes its request as bytes and decodes it itself: gRPC 1.51's callback API answers
// a message that does not parse with UNIMPLEMENTED, which tells a client the method is missing.
using RawService = v2::Gateway::WithRawCallbackMethod_Generate<
    v2::Gateway::WithRawCallbackMethod_Embed<v2::Gateway::WithRawCallbackMethod_Tokenize<
        v2::Gateway::WithRawCallbackMethod_Detokenize<v2::Gateway::WithRawCallbackMethod_ListModels<
            v2::Gateway::WithRawCallbackMethod_ListWorkers<v2::Gateway::Service>>>>>>;

class GatewayService final : public RawService {
 public:
  explicit GatewayService(const GrpcFrontParts& gw) : gw_(gw) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* bytes) override {
    return start_generate(gw_, ctx, bytes);
  }

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                  grpc::ByteBuffer* out) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    v2::EmbedRequest r;
    std::string body;
    grpc::Status s = rpc::decode_message(in, &r) ? embed_body(r, &body) : rpc::not_a(r);
    http::Request req = post(ctx, "/v1/embeddings", std::move(body));
    if (!r.request_id().empty()) req.fields.add(kRequestIdHeader, r.request_id());
    if (!r.routing_key().empty()) req.fields.add(gw_.config.routing_key_header, r.routing_key());
    if (auto refused = rpc::refusal_of(gw_.access, req); s.ok() && refused) s = *refused;
    if (!s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    auto serve = [&pipeline = gw_.generation](const http::Request& q, http::Responder& res) {
      return pipeline.serve(ApiRoute::kEmbeddings, q, res, nullptr, /*name_worker=*/true);
    };
    answer_through<v2::EmbedResponse>(gw_, reactor, out, std::move(req), serve, read_embeddings);
    return reactor;
  }

  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                     grpc::ByteBuffer* out) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    v2::TokenizeRequest r;
    grpc::Status s = rpc::decode_message(in, &r) ? check_tokenize(r) : rpc::not_a(r);
    http::Request req = post(ctx, "/tokenize", s.ok() ? tokenize_body(r) : std::string());
    if (auto refused = rpc::refusal_of(gw_.access, req); s.ok() && refused) s = *refused;
    if (!s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    answer_through<v2::TokenizeResponse>(gw_, reactor, out, std::move(req), gw_.tokenize,
                                         read_tokens);
    return reactor;
  }

  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                       grpc::ByteBuffer* out) override {
    return rpc::unary_call<v2::DetokenizeRequest, v2::DetokenizeResponse>(
        gw_.access, ctx, in, out,
        [this](const auto& r, auto* response) { return detokenize(r, response); });
  }
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                       grpc::ByteBuffer* out) override {
    return rpc::unary_call<v2::ListModelsRequest, v2::ListModelsResponse>(
        gw_.access, ctx, in, out,
        [this](const auto&, auto* response) { return list_models(response); });
  }
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* in,
                                        grpc::ByteBuffer* out) override {
    return rpc::unary_call<v2::ListWorkersRequest, v2::ListWorkersResponse>(
        gw_.access, ctx, in, out,
        [this](const auto&, auto* response) { return list_workers(response); });
  }

 private:
  static grpc::Status check_tokenize(const v2::TokenizeRequest& r) {
    if (r.input_case() == v2::TokenizeRequest::INPUT_NOT_SET) {
      return invalid("TokenizeRequest needs its input: text or chat");
    }
    if (r.has_chat() && r.chat().messages().empty()) {
      return invalid("TokenizeRequest.chat holds no messages");
    }
    return grpc::Status::OK;
  }

  grpc::Status detokenize(const v2::DetokenizeRequest& request,
                          v2::DetokenizeResponse* response) const {
    const tokenizer::Tokenizer* tok = gw_.tokenizers.for_model(request.model()).model();
    if (tok == nullptr) return rpc::no_tokenizer(request.model());
    std::vector<TokenId> ids;
    for (uint32_t id : request.token_ids()) {
      if (id >= tok->vocab_size()) {
        return invalid("DetokenizeRequest.token_ids: " + std::to_string(id) +
                       " is outside the vocabulary of " + std::to_string(tok->vocab_size()));
      }
      ids.push_back(static_cast<TokenId>(id));
    }
    response->set_text(tok->decode(ids, false));
    return grpc::Status::OK;
  }

  grpc::Status list_models(v2::ListModelsResponse* response) const {
    const auto fleet = gw_.workers.snapshot();
    for (const std::string& name : fleet->models) {
      v2::Model* m = response->add_models();
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

  grpc::Status list_workers(v2::ListWorkersResponse* response) const {
    const auto fleet = gw_.workers.snapshot();
    for (size_t i = 0; i < fleet->workers.size(); ++i) {
      const workers::Worker& w = *fleet->workers[i];
      v2::Worker* out = response->add_workers();
      out->set_url(w.url());
      for (const std::string& m : fleet->infos[i]->models) out->add_models(m);
      out->set_routable(w.routable());
      out->set_health(health_of(w.health().state()));
      out->set_circuit_breaker(breaker_of(w.breaker().state()));
      out->set_liveness(liveness_of(w.liveness().state()));
      out->set_in_flight(w.in_flight());
      out->set_index_blocks(w.index_blocks());
      out->set_dp_size(fleet->infos[i]->dp_size);
    }
    return grpc::Status::OK;
  }

  const GrpcFrontParts& gw_;
};

}  // namespace gateway_v2

std::unique_ptr<grpc::Service> make_gateway_v2(const GrpcFrontParts& gw) {
  return std::make_unique<gateway_v2::GatewayService>(gw);
}

}  // namespace kvgate::app
