// A v2 Generate call's request checked and written as the engine request (grpc_generate_v2.h).
#include "app/grpc_common.h"
#include "app/grpc_generate_v2.h"
#include "app/worker_exchange.h"
#include "kvgate/core/json_writer.h"

namespace kvgate::app::gateway_v2 {
namespace {

using rpc::invalid;

bool sglang(const v2::GenerateRequest& r) {
  return r.engine_api() == v2::ENGINE_API_SGLANG_GENERATE;
}

// JSON text the engine gets as it is: refused here unless it parses (as an object where one is
// meant), so a bad field is the client's error, named, not the engine's.
grpc::Status check_json(std::string_view text, std::string_view field, bool object) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text.data(), text.size()).get(doc) != simdjson::SUCCESS) {
    return invalid("GenerateRequest." + std::string(field) + " is not valid JSON");
  }
  if (object && !doc.is_object()) {
    return invalid("GenerateRequest." + std::string(field) + " must be a JSON object");
  }
  return grpc::Status::OK;
}

grpc::Status check_chat(const v2::ChatMessages& chat) {
  if (chat.messages().empty()) return invalid("GenerateRequest.chat holds no messages");
  for (const v2::ChatMessage& m : chat.messages()) {
    if (m.role().empty()) return invalid("GenerateRequest.chat.messages[].role is empty");
  }
  for (const v2::Tool& t : chat.tools()) {
    if (t.function().name().empty()) {
      return invalid("GenerateRequest.chat.tools[].function.name is empty");
    }
    if (t.function().has_parameters_json()) {
      auto s =
          check_json(t.function().parameters_json(), "chat.tools[].function.parameters_json", true);
      if (!s.ok()) return s;
    }
  }
  if (chat.has_chat_template_kwargs_json()) {
    return check_json(chat.chat_template_kwargs_json(), "chat.chat_template_kwargs_json", true);
  }
  return grpc::Status::OK;
}

grpc::Status check_input(const v2::GenerateRequest& r) {
  switch (r.input_case()) {
    case v2::GenerateRequest::INPUT_NOT_SET:
      return invalid("GenerateRequest needs its input: token_ids, text or chat");
    case v2::GenerateRequest::kText:
      return r.text().empty() ? invalid("GenerateRequest.text is empty") : grpc::Status::OK;
    case v2::GenerateRequest::kTokenIds:
      return r.token_ids().ids().empty() ? invalid("GenerateRequest.token_ids is empty")
                                         : grpc::Status::OK;
    case v2::GenerateRequest::kChat:
      if (sglang(r)) return invalid("GenerateRequest.chat: SGLang's /generate takes no chat");
      return check_chat(r.chat());
  }
  return grpc::Status::OK;
}

// What SGLang's /generate cannot be asked through this API.
grpc::Status check_sglang(const v2::GenerateRequest& r) {
  if (r.has_n() && r.n() != 1) return invalid("GenerateRequest.n: SGLang /generate takes 1 here");
  if (r.logprobs()) return invalid("GenerateRequest.logprobs: not with SGLang /generate");
  const auto kind = r.structured_output().kind_case();
  if (kind == v2::StructuredOutput::kJsonObject || kind == v2::StructuredOutput::kChoice) {
    return invalid(
        "GenerateRequest.structured_output: SGLang /generate takes json_schema, regex "
        "or grammar");
  }
  return grpc::Status::OK;
}

grpc::Status check_request(const v2::GenerateRequest& r) {
  if (auto s = check_input(r); !s.ok()) return s;
  if (r.has_max_tokens() && r.max_tokens() == 0) {
    return invalid("GenerateRequest.max_tokens must be at least 1 (absent: until the end)");
  }
  if (r.has_n() && (r.n() == 0 || r.n() > 128)) {
    return invalid("GenerateRequest.n must be between 1 and 128");
  }
  if (r.has_top_logprobs() && !r.logprobs()) {
    return invalid("GenerateRequest.top_logprobs needs logprobs");
  }
  if (r.top_logprobs() > 20) return invalid("GenerateRequest.top_logprobs must be at most 20");
  if (r.structured_output().has_json_schema()) {
    auto s = check_json(r.structured_output().json_schema(), "structured_output.json_schema", true);
    if (!s.ok()) return s;
  }
  return sglang(r) ? check_sglang(r) : grpc::Status::OK;
}

void write_ids(JsonWriter& w, std::string_view key,
               const google::protobuf::RepeatedField<uint32_t>& ids) {
  w.key(key).begin_array();
  for (uint32_t id : ids) w.value(id);
  w.end_array();
}

void write_strings(JsonWriter& w, std::string_view key,
                   const google::protobuf::RepeatedPtrField<std::string>& values) {
  w.key(key).begin_array();
  for (const std::string& v : values) w.value(v);
  w.end_array();
}

void write_content(JsonWriter& w, const v2::ChatMessage& m) {
  w.key("content");
  if (m.has_text()) {
    w.value(m.text());
    return;
  }
  if (!m.has_parts()) {
    w.null();
    return;
  }
  w.begin_array();
  for (const v2::ContentPart& p : m.parts().parts()) {
    w.begin_object();
    if (p.has_image_url()) {
      w.member("type", "image_url").key("image_url").begin_object();
      w.member("url", p.image_url().url());
      if (p.image_url().has_detail()) w.member("detail", p.image_url().detail());
      w.end_object();
    } else {
      w.member("type", "text").member("text", p.text());
    }
    w.end_object();
  }
  w.end_array();
}

void write_message(JsonWriter& w, const v2::ChatMessage& m) {
  w.begin_object().member("role", m.role());
  write_content(w, m);
  if (m.has_name()) w.member("name", m.name());
  if (m.has_tool_call_id()) w.member("tool_call_id", m.tool_call_id());
  if (m.tool_calls_size() > 0) {
    w.key("tool_calls").begin_array();
    for (const v2::ToolCall& c : m.tool_calls()) {
      w.begin_object().member("id", c.id());
      w.member("type", c.type().empty() ? std::string("function") : c.type());
      w.key("function").begin_object().member("name", c.function().name());
      w.member("arguments", c.function().arguments()).end_object().end_object();
    }
    w.end_array();
  }
  w.end_object();
}

void write_tools(JsonWriter& w, const v2::ChatMessages& chat) {
  if (chat.tools_size() > 0) {
    w.key("tools").begin_array();
    for (const v2::Tool& t : chat.tools()) {
      const v2::FunctionDefinition& f = t.function();
      w.begin_object().member("type", t.type().empty() ? std::string("function") : t.type());
      w.key("function").begin_object().member("name", f.name());
      if (f.has_description()) w.member("description", f.description());
      if (f.has_parameters_json()) w.key("parameters").raw(f.parameters_json());
      if (f.has_strict()) w.member("strict", f.strict());
      w.end_object().end_object();
    }
    w.end_array();
  }
  if (chat.tool_choice().has_function_name()) {
    w.key("tool_choice").begin_object().member("type", "function");
    w.key("function").begin_object().member("name", chat.tool_choice().function_name());
    w.end_object().end_object();
  } else if (chat.tool_choice().has_mode()) {
    w.member("tool_choice", chat.tool_choice().mode());
  }
}

void write_chat(JsonWriter& w, const v2::ChatMessages& chat) {
  w.key("messages").begin_array();
  for (const v2::ChatMessage& m : chat.messages()) write_message(w, m);
  w.end_array();
  write_tools(w, chat);
  if (chat.has_add_generation_prompt()) {
    w.member("add_generation_prompt", chat.add_generation_prompt());
  }
  if (chat.has_continue_final_message()) {
    w.member("continue_final_message", chat.continue_final_message());
  }
  if (chat.has_chat_template_kwargs_json()) {
    w.key("chat_template_kwargs").raw(chat.chat_template_kwargs_json());
  }
}

// The sampling fields both APIs spell alike.
void write_sampling(JsonWriter& w, const v2::SamplingParams& s) {
  if (s.has_temperature()) w.member("temperature", s.temperature());
  if (s.has_top_p()) w.member("top_p", s.top_p());
  if (s.has_top_k()) w.member("top_k", static_cast<int64_t>(s.top_k()));
  if (s.has_min_p()) w.member("min_p", s.min_p());
  if (s.has_presence_penalty()) w.member("presence_penalty", s.presence_penalty());
  if (s.has_frequency_penalty()) w.member("frequency_penalty", s.frequency_penalty());
  if (s.has_repetition_penalty()) w.member("repetition_penalty", s.repetition_penalty());
  if (!s.logit_bias().empty()) {
    // Sorted, so one request always makes the same body.
    std::map<uint32_t, double> sorted(s.logit_bias().begin(), s.logit_bias().end());
    w.key("logit_bias").begin_object();
    for (const auto& [id, bias] : sorted) w.member(std::to_string(id), bias);
    w.end_object();
  }
}

void write_stops(JsonWriter& w, const v2::GenerateRequest& r) {
  if (r.stop_size() > 0) write_strings(w, "stop", r.stop());
  if (r.stop_token_ids_size() > 0) write_ids(w, "stop_token_ids", r.stop_token_ids());
  if (r.ignore_eos()) w.member("ignore_eos", true);
  if (r.has_skip_special_tokens()) w.member("skip_special_tokens", r.skip_special_tokens());
}

// vLLM's guided decoding fields (response_format for a JSON object).
void write_structured_openai(JsonWriter& w, const v2::StructuredOutput& so) {
  switch (so.kind_case()) {
    case v2::StructuredOutput::kJsonSchema:
      w.key("guided_json").raw(so.json_schema());
      break;
    case v2::StructuredOutput::kJsonObject:
      if (so.json_object()) {
        w.key("response_format").begin_object().member("type", "json_object").end_object();
      }
      break;
    case v2::StructuredOutput::kRegex:
      w.member("guided_regex", so.regex());
      break;
    case v2::StructuredOutput::kChoice:
      write_strings(w, "guided_choice", so.choice().values());
      break;
    case v2::StructuredOutput::kGrammar:
      w.member("guided_grammar", so.grammar());
      break;
    case v2::StructuredOutput::KIND_NOT_SET:
      break;
  }
}

void write_logprobs_openai(JsonWriter& w, const v2::GenerateRequest& r) {
  if (!r.logprobs()) return;
  if (r.has_chat()) {
    w.member("logprobs", true);
    if (r.has_top_logprobs()) w.member("top_logprobs", r.top_logprobs());
  } else {
    w.member("logprobs", r.top_logprobs());  // a completion's logprobs is the top count
  }
}

// The /v1/completions or /v1/chat/completions body: streamed, with usage and token ids.
std::string openai_body(const v2::GenerateRequest& r) {
  std::string body;
  JsonWriter w(&body);
  w.begin_object();
  if (!r.model().empty()) w.member("model", r.model());
  if (r.has_chat()) {
    write_chat(w, r.chat());
    if (r.has_max_tokens()) w.member("max_completion_tokens", r.max_tokens());
  } else {
    if (r.has_token_ids()) {
      write_ids(w, "prompt", r.token_ids().ids());
    } else {
      w.member("prompt", r.text());
    }
    // null, not absent: a completion's absent max_tokens is 16; null is the context's end.
    w.key("max_tokens");
    r.has_max_tokens() ? w.value(r.max_tokens()) : w.null();
  }
  w.member("stream", true);
  w.key("stream_options").begin_object().member("include_usage", true).end_object();
  if (!r.has_return_token_ids() || r.return_token_ids()) w.member("return_token_ids", true);
  if (r.has_n()) w.member("n", r.n());
  write_sampling(w, r.sampling());
  if (r.sampling().has_seed()) w.member("seed", r.sampling().seed());
  if (r.sampling().has_min_tokens()) w.member("min_tokens", r.sampling().min_tokens());
  write_stops(w, r);
  if (r.has_include_stop_str_in_output()) {
    w.member("include_stop_str_in_output", r.include_stop_str_in_output());
  }
  write_logprobs_openai(w, r);
  write_structured_openai(w, r.structured_output());
  w.end_object();
  return body;
}

// SGLang's /generate body: input_ids (or text) and sampling_params, streamed.
std::string sglang_body(const v2::GenerateRequest& r) {
  std::string body;
  JsonWriter w(&body);
  w.begin_object();
  if (!r.model().empty()) w.member("model", r.model());
  if (r.has_token_ids()) {
    write_ids(w, "input_ids", r.token_ids().ids());
  } else {
    w.member("text", r.text());
  }
  w.member("stream", true);
  w.key("sampling_params").begin_object();
  if (r.has_max_tokens()) w.member("max_new_tokens", r.max_tokens());
  write_sampling(w, r.sampling());
  if (r.sampling().has_seed()) w.member("sampling_seed", r.sampling().seed());
  if (r.sampling().has_min_tokens()) w.member("min_new_tokens", r.sampling().min_tokens());
  write_stops(w, r);
  if (r.has_include_stop_str_in_output()) {
    w.member("no_stop_trim", r.include_stop_str_in_output());
  }
  const v2::StructuredOutput& so = r.structured_output();
  if (so.has_json_schema()) w.member("json_schema", so.json_schema());
  if (so.has_regex()) w.member("regex", so.regex());
  if (so.has_grammar()) w.member("ebnf", so.grammar());
  w.end_object().end_object();
  return body;
}

}  // namespace

std::string chat_messages_json(const v2::ChatMessages& chat) {
  std::string out;
  JsonWriter w(&out);
  w.begin_array();
  for (const v2::ChatMessage& m : chat.messages()) write_message(w, m);
  w.end_array();
  return out;
}

grpc::Status engine_call(const GrpcFrontParts& gw, grpc::CallbackServerContext* ctx,
                         const v2::GenerateRequest& r, EngineCall* out) {
  if (auto s = check_request(r); !s.ok()) return s;
  out->route = sglang(r)      ? ApiRoute::kGenerate
               : r.has_chat() ? ApiRoute::kChatCompletions
                              : ApiRoute::kCompletions;
  http::Request& req = out->request;
  req = rpc::caller_of(ctx);
  req.verb = http::Verb::post;
  req.request_target = out->route == ApiRoute::kGenerate          ? "/generate"
                       : out->route == ApiRoute::kChatCompletions ? "/v1/chat/completions"
                                                                  : "/v1/completions";
  req.fields.add("content-type", "application/json");
  if (!r.request_id().empty()) req.fields.add(kRequestIdHeader, r.request_id());
  if (!r.routing_key().empty()) req.fields.add(gw.config.routing_key_header, r.routing_key());
  req.payload = sglang(r) ? sglang_body(r) : openai_body(r);
  return grpc::Status::OK;
}

}  // namespace kvgate::app::gateway_v2
