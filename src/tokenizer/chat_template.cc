#include "tokenizer/chat_template.h"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvgate/core/json_writer.h"

namespace kvgate::tokenizer {
namespace {

namespace fs = std::filesystem;

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + path.string());
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

Result<jinja::Template> parse(std::string_view source, const std::string& origin) {
  auto t = jinja::Template::parse(source, origin);
  if (!t.ok())
    return absl::InvalidArgumentError("chat template " + std::string(t.status().message()));
  return t;
}

// A special token in tokenizer_config.json: a string or an AddedToken object.
std::optional<std::string> token_text(simdjson::dom::element e) {
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  if (e.is_object() && e["content"].get_string().get(s) == simdjson::SUCCESS) {
    return std::string(s);
  }
  return std::nullopt;
}

// Hugging Face's special_tokens_map, which apply_chat_template passes to every template.
constexpr std::string_view kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                               "pad_token", "cls_token", "mask_token"};
// Variables a request's chat_template_kwargs may not replace.
constexpr std::string_view kFixedVariables[] = {"messages", "tools", "documents",
                                                "add_generation_prompt", "continue_final_message"};

bool is_one_of(std::string_view name, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The fields of tokenizer_config.json read here, as a JSON object of their own. The file may
// hold integers no 64-bit type holds (model_max_length: 1000000000000000019884624838656), which
// a full parse refuses; the on-demand parser skips what is not read.
Result<std::string> used_fields(const std::string& config) {
  namespace od = simdjson::ondemand;
  const simdjson::padded_string padded(config);
  od::parser parser;
  od::document doc;
  od::object obj;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(obj) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(v) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("not JSON");
    }
    if (key != "chat_template" && key != "additional_special_tokens" &&
        !is_one_of(key, kSpecialTokens)) {
      continue;
    }
    od::json_type t;
    std::string_view raw;
    od::object o;
    od::array a;
    const bool read = v.type().get(t) == simdjson::SUCCESS &&
                      (t == od::json_type::object ? v.get_object().get(o) == simdjson::SUCCESS &&
                                                        o.raw_json().get(raw) == simdjson::SUCCESS
                       : t == od::json_type::array ? v.get_array().get(a) == simdjson::SUCCESS &&
                                                         a.raw_json().get(raw) == simdjson::SUCCESS
                                                   : (raw = v.raw_json_token(), true));
    if (!read) return absl::InvalidArgumentError(std::string(key) + " is not JSON");
    w.key(key).raw(raw);
  }
  w.end_object();
  return out;
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}
std::string_view lstrip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view strip(std::string_view s) {
  s = lstrip(s);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::optional<ChatTemplate>> ChatTemplate::load(const std::string& folder,
                                                       const std::string& override_path) {
  ChatTemplate out;
  const fs::path config_path = fs::path(folder) / "tokenizer_config.json";
  std::error_code ec;
  simdjson::dom::parser parser;
  simdjson::dom::element config;
  std::string config_text;
  if (fs::exists(config_path, ec)) {
    auto text = read_file(config_path);
    if (!text.ok()) return text.status();
    auto used = used_fields(*text);
    if (!used.ok()) {
      return absl::InvalidArgumentError(config_path.string() + ": " +
                                        std::string(used.status().message()));
    }
    config_text = std::move(*used);
    if (auto err = parser.parse(config_text).get(config); err != simdjson::SUCCESS) {
      return absl::InvalidArgumentError(config_path.string() + ": not JSON (" +
                                        simdjson::error_message(err) + ")");
    }
    for (std::string_view name : kSpecialTokens) {
      simdjson::dom::element e;
      if (config[name].get(e) != simdjson::SUCCESS || e.is_null()) continue;
      auto t = token_text(e);
      if (!t) {
        return absl::InvalidArgumentError(config_path.string() + ": " + std::string(name) +
                                          " must be a string or an object with \"content\"");
      }
      out.special_tokens_.emplace_back(std::string(name), std::move(*t));
    }
    simdjson::dom::array more;
    if (config["additional_special_tokens"].get_array().get(more) == simdjson::SUCCESS &&
        more.size() > 0) {
      std::string list;
      JsonWriter w(&list);
      w.begin_array();
      for (simdjson::dom::element e : more) {
        auto t = token_text(e);
        if (!t) {
          return absl::InvalidArgumentError(config_path.string() +
                                            ": additional_special_tokens must hold strings");
        }
        w.value(*t);
      }
      w.end_array();
      out.additional_special_tokens_json_ = std::move(list);
    }
  }

  const fs::path jinja_path = fs::path(folder) / "chat_template.jinja";
  if (!override_path.empty() || fs::exists(jinja_path, ec)) {
    const fs::path path = override_path.empty() ? jinja_path : fs::path(override_path);
    auto source = read_file(path);
    if (!source.ok()) return source.status();
    auto t = parse(*source, path.string());
    if (!t.ok()) return t.status();
    out.default_ = std::move(*t);
    return std::optional<ChatTemplate>(std::move(out));
  }
  if (config_text.empty()) return std::optional<ChatTemplate>();
  simdjson::dom::element field;
  if (config["chat_template"].get(field) != simdjson::SUCCESS || field.is_null()) {
    return std::optional<ChatTemplate>();
  }
  const std::string origin = config_path.string() + " chat_template";
  std::string_view source;
  if (field.get_string().get(source) == simdjson::SUCCESS) {
    auto t = parse(source, origin);
    if (!t.ok()) return t.status();
    out.default_ = std::move(*t);
  } else if (simdjson::dom::array named; field.get_array().get(named) == simdjson::SUCCESS) {
    for (simdjson::dom::element e : named) {
      std::string_view name, text;
      if (e["name"].get_string().get(name) != simdjson::SUCCESS ||
          e["template"].get_string().get(text) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError(origin + ": each entry needs a name and a template");
      }
      auto t = parse(text, origin + "[" + std::string(name) + "]");
      if (!t.ok()) return t.status();
      if (name == "default") out.default_ = std::move(*t);
      if (name == "tool_use") out.tool_use_ = std::move(*t);
    }
    if (!out.default_) {
      return absl::InvalidArgumentError(origin + ": a list of templates without \"default\"");
    }
  } else {
    return absl::InvalidArgumentError(origin + ": must be a string or a list of templates");
  }
  return std::optional<ChatTemplate>(std::move(out));
}

Status ChatTemplate::context_of(const ChatPrompt& chat, std::string* out) const {
  JsonWriter w(out);
  w.begin_object();
  w.key("messages");
  if (!chat.messages_json.empty()) {
    w.raw(chat.messages_json);
  } else {
    w.begin_array();
    for (const ChatMessage& m : chat.messages) {
      w.begin_object().member("role", m.role).member("content", m.content).end_object();
    }
    w.end_array();
  }
  w.key("tools");
  if (chat.tools_json.empty()) {
    w.null();
  } else {
    w.raw(chat.tools_json);
  }
  w.key("documents").null();
  w.member("add_generation_prompt", chat.add_generation_prompt);
  w.member("continue_final_message", chat.continue_final_message);
  std::vector<std::string_view> given;
  simdjson::dom::parser parser;
  if (!chat.template_kwargs_json.empty()) {
    simdjson::dom::object kwargs;
    if (parser.parse(chat.template_kwargs_json).get_object().get(kwargs) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("'chat_template_kwargs' must be an object");
    }
    for (auto [key, value] : kwargs) {
      if (is_one_of(key, kFixedVariables)) continue;
      given.push_back(key);
      w.key(key).raw(simdjson::minify(value));
    }
  }
  const auto not_given = [&](std::string_view name) {
    return std::find(given.begin(), given.end(), name) == given.end();
  };
  for (const auto& [name, text] : special_tokens_) {
    if (not_given(name)) w.member(name, text);
  }
  if (!additional_special_tokens_json_.empty() && not_given("additional_special_tokens")) {
    w.key("additional_special_tokens").raw(additional_special_tokens_json_);
  }
  w.end_object();
  return absl::OkStatus();
}

Result<std::string> ChatTemplate::render(const ChatPrompt& chat) const {
  std::string context;
  if (Status s = context_of(chat, &context); !s.ok()) return s;
  const bool tools = !chat.tools_json.empty() && chat.tools_json != "null";
  const jinja::Template& t = tools && tool_use_ ? *tool_use_ : *default_;
  auto text = t.render(context);
  if (!text.ok()) {
    return absl::InvalidArgumentError("the chat template cannot render these messages: " +
                                      std::string(text.status().message()));
  }
  if (chat.continue_final_message) {
    if (Status s = end_at_final_message(chat, &*text); !s.ok()) return s;
  }
  return text;
}

Status ChatTemplate::end_at_final_message(const ChatPrompt& chat, std::string* text) {
  // As Hugging Face does it: the prompt ends where the final message's text does, so the model
  // continues that message instead of starting a new turn. The text is the final message's
  // content, or the last content part with a text.
  std::string final_text;
  simdjson::dom::parser parser;
  simdjson::dom::array messages;
  if (!chat.messages_json.empty() &&
      parser.parse(chat.messages_json).get_array().get(messages) == simdjson::SUCCESS &&
      messages.size() > 0) {
    simdjson::dom::element content = messages.at(messages.size() - 1)["content"];
    std::string_view s;
    simdjson::dom::array parts;
    if (content.get_string().get(s) == simdjson::SUCCESS) {
      final_text = s;
    } else if (content.get_array().get(parts) == simdjson::SUCCESS) {
      bool found = false;
      for (size_t i = parts.size(); i-- > 0 && !found;) {
        found = parts.at(i)["text"].get_string().get(s) == simdjson::SUCCESS;
        if (found) final_text = s;
      }
      if (!found) {
        return absl::InvalidArgumentError(
            "continue_final_message is set but the final message has no text to continue");
      }
    }
  } else if (!chat.messages.empty()) {
    final_text = chat.messages.back().content;
  }
  const std::string_view stripped = strip(final_text);
  const size_t at = text->rfind(stripped);
  if (at == std::string::npos) {
    return absl::InvalidArgumentError(
        "continue_final_message is set but the final message does not appear in the chat after "
        "applying the chat template");
  }
  const std::string_view lstripped = lstrip(final_text);
  if (std::string_view(*text).substr(at, lstripped.size()) == final_text) {
    text->resize(at + lstripped.size());
  } else {
    text->resize(at + stripped.size());
  }
  return absl::OkStatus();
}

}  // namespace kvgate::tokenizer
