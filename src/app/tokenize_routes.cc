// POST /tokenize and /detokenize in vLLM's request and response shapes. With the request's
// model's tokenizer loaded (--tokenizer) they are answered here, from the same ids routing
// hashes; otherwise (and for chat messages, whose template the engine renders) a worker answers.
//
//   /tokenize    {"model", "prompt", "add_special_tokens" (true)}
//                -> {"count", "max_model_len", "tokens", "token_strs": null}
//   /detokenize  {"model", "tokens"} -> {"prompt"}
#include <simdjson.h>

#include <optional>

#include "app/gateway_impl.h"
#include "kvgate/core/json_writer.h"

namespace kvgate::app {
namespace net = boost::asio;
namespace {

// The answer given here, or nullopt when a worker should answer.
std::optional<http::Response> answer_locally(std::string_view path, const http::Request& req,
                                             const PromptTokenizers& tokenizers,
                                             uint32_t max_model_len) {
  simdjson::dom::parser parser;
  simdjson::dom::element body;
  if (parser.parse(req.body()).get(body) != simdjson::SUCCESS || !body.is_object()) {
    return http::Response::error(400, "the request body must be a JSON object");
  }
  std::string_view model;  // absent: the default tokenizer
  if (body["model"].get_string().get(model) != simdjson::SUCCESS) model = {};
  const tokenizer::Tokenizer* tok = tokenizers.for_model(model).model();
  if (tok == nullptr) return std::nullopt;
  std::string out;
  JsonWriter w(&out);
  if (path == "/detokenize") {
    simdjson::dom::array list;
    if (body["tokens"].get_array().get(list) != simdjson::SUCCESS) {
      return http::Response::error(400, "'tokens' must be a list of token ids");
    }
    std::vector<TokenId> ids;
    for (simdjson::dom::element e : list) {
      uint64_t id = 0;
      if (e.get_uint64().get(id) != simdjson::SUCCESS || id >= tok->vocab_size()) {
        return http::Response::error(400, "'tokens' holds an id outside the vocabulary");
      }
      ids.push_back(static_cast<TokenId>(id));
    }
    w.begin_object().member("prompt", tok->decode(ids, false)).end_object();
    return http::Response::json(200, std::move(out));
  }
  if (body["messages"].error() == simdjson::SUCCESS) return std::nullopt;  // the engine renders
  std::string_view prompt;
  if (body["prompt"].get_string().get(prompt) != simdjson::SUCCESS) {
    return http::Response::error(400, "'prompt' (a string) or 'messages' is required");
  }
  bool special = true;
  if (body["add_special_tokens"].get_bool().get(special) != simdjson::SUCCESS) special = true;
  std::vector<TokenId> ids;
  if (Status s = tok->encode(prompt, special, &ids); !s.ok()) {
    return http::Response::error(400,
                                 "the prompt cannot be tokenized: " + std::string(s.message()));
  }
  w.begin_object().member("count", ids.size()).member("max_model_len", max_model_len);
  w.key("tokens").begin_array();
  for (const TokenId id : ids) w.value(id);
  w.end_array().key("token_strs").null().end_object();
  return http::Response::json(200, std::move(out));
}

}  // namespace

http::Handler GatewayImpl::tokenize_handler(const char* path) {
  return [this, path, forward = worker_answer(path)](const http::Request& req,
                                                     http::Responder& res) -> net::awaitable<void> {
    std::optional<http::Response> local =
        answer_locally(path, req, tokenizers_, workers_.snapshot()->max_model_len);
    if (!local) {
      auto op = forward(req, res);
      co_await std::move(op);
      co_return;
    }
    (void)co_await res.send(std::move(*local));
  };
}

void GatewayImpl::add_tokenize_routes() {
  for (const char* path : {"/tokenize", "/detokenize"}) {
    route(http::Verb::post, path, Access::kClient, tokenize_handler(path));
  }
}

}  // namespace kvgate::app
