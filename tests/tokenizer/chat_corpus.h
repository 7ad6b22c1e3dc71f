// Chat requests that exercise a chat template's every branch: with and without a system message,
// one turn to many, tool definitions, assistant tool calls (arguments as a JSON string or an
// object) and tool results, reasoning in <think> blocks, assistant prefill (the final message
// continued), chat_template_kwargs (enable_thinking), non-ASCII and special-token strings in the
// texts, content as a list of parts, and conversations a template refuses (roles that do not
// alternate). Deterministic: the same seed gives the same requests.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "kvgate/core/json_writer.h"
#include "tokenizer/corpus.h"

namespace kvgate::tokenizer::testing {

struct ChatCase {
  std::string messages_json;
  std::string tools_json;   // empty: none
  std::string kwargs_json;  // empty: none
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

inline std::vector<ChatCase> make_chat_corpus(size_t count, uint64_t seed = 11) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> texts = make_corpus(400, seed);
  const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const auto chance = [&](unsigned percent) { return rng() % 100 < percent; };
  const auto text = [&]() -> std::string {
    std::string t = texts[pick(texts.size())];
    if (chance(40)) t += " " + texts[pick(texts.size())];
    return t;
  };
  static const char* const kTools[] = {"get_weather", "search_flights", "run_sql", "translate"};

  std::vector<ChatCase> out;
  for (size_t c = 0; c < count; ++c) {
    ChatCase cc;
    const bool tools = chance(30);
    const bool system = chance(50);
    const bool irregular = chance(5);  // two user messages in a row
    const bool parts = chance(6);      // user contents as lists of parts
    const size_t turns = 1 + pick(8);
    JsonWriter m(&cc.messages_json);
    m.begin_array();
    if (system) m.begin_object().member("role", "system").member("content", text()).end_object();
    for (size_t t = 0; t < turns; ++t) {
      m.begin_object().member("role", "user");
      if (parts && chance(50)) {
        m.key("content").begin_array();
        m.begin_object().member("type", "text").member("text", text()).end_object();
        m.end_array();
      } else {
        m.member("content", text());
      }
      m.end_object();
      if (irregular && t == 0)
        m.begin_object().member("role", "user").member("content", text()).end_object();
      if (t + 1 == turns) break;
      if (tools && chance(50)) {
        // A tool call and its result, then the assistant's answer.
        const std::string name = kTools[pick(4)];
        m.begin_object().member("role", "assistant");
        if (chance(50)) {
          m.key("content").null();
        } else {
          m.member("content", "");
        }
        m.key("tool_calls").begin_array().begin_object();
        m.member("id", "call_" + std::to_string(c) + "_" + std::to_string(t));
        m.member("type", "function");
        m.key("function").begin_object().member("name", name);
        const std::string args = "{\"city\": \"" + std::string(t % 2 ? "Z\xC3\xBCrich" : "Paris") +
                                 "\", \"days\": " + std::to_string(1 + pick(9)) + "}";
        if (chance(70)) {
          m.member("arguments", args);
        } else {
          m.key("arguments").raw(args);
        }
        m.end_object().end_object().end_array().end_object();
        m.begin_object().member("role", "tool").member("tool_call_id", "call_" + std::to_string(c));
        m.member("content", "{\"result\": \"" + std::to_string(pick(1000)) + " units\"}");
        m.end_object();
      }
      m.begin_object().member("role", "assistant");
      std::string answer = text();
      if (chance(25)) answer = "<think>\n" + text() + "\n</think>\n\n" + answer;
      m.member("content", answer);
      if (chance(10)) m.member("reasoning_content", text());
      m.end_object();
    }
    if (chance(12)) {  // prefill: the assistant's answer begun, to be continued
      m.begin_object().member("role", "assistant").member("content", "Sure, " + text());
      m.end_object();
      cc.add_generation_prompt = false;
      cc.continue_final_message = chance(70);
    } else if (chance(10)) {
      cc.add_generation_prompt = false;
    }
    m.end_array();
    if (tools) {
      JsonWriter w(&cc.tools_json);
      w.begin_array();
      for (size_t k = 0, n = 1 + pick(3); k < n; ++k) {
        w.begin_object().member("type", "function").key("function").begin_object();
        w.member("name", kTools[k]).member("description", "Looks up " + text());
        w.key("parameters")
            .raw(
                R"({"type": "object", "properties": {"city": {"type": "string", "description": "A city, e.g. Paris"}, "days": {"type": "integer"}}, "required": ["city"]})");
        w.end_object().end_object();
      }
      w.end_array();
    }
    if (chance(30))
      cc.kwargs_json =
          chance(50) ? R"({"enable_thinking": false})" : R"({"enable_thinking": true})";
    out.push_back(std::move(cc));
  }
  return out;
}

}  // namespace kvgate::tokenizer::testing
