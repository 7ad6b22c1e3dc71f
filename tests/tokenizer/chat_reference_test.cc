// Chat prompts against Python's jinja2 rendering the same models' chat templates as Hugging Face
// transformers' apply_chat_template does (tests/tokenizer/reference/apply_chat_template.py, run
// here on the same requests): every rendered prompt equal byte for byte, and every conversation
// the template refuses refused by both.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>

#include "kvgate/core/json_writer.h"
#include "kvgate/tokenizer/prompt_tokenizer.h"
#include "support/child_process.h"
#include "support/external.h"
#include "tokenizer/chat_corpus.h"

namespace kvgate::tokenizer {
namespace {

struct Rendered {
  bool ok = false;
  std::string text;  // the prompt, or the error
};

// Runs the reference on `cases`; empty if it could not.
std::vector<Rendered> run_reference(const std::string& folder,
                                    const std::vector<testing::ChatCase>& cases,
                                    std::string* error) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kvgate-chat-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "chats.jsonl").string();
  const std::string out = (dir / "rendered.jsonl").string();
  {
    std::ofstream f(in, std::ios::binary);
    for (const testing::ChatCase& c : cases) {
      std::string line;
      JsonWriter w(&line);
      w.begin_object().key("messages").raw(c.messages_json);
      w.key("tools");
      if (c.tools_json.empty()) {
        w.null();
      } else {
        w.raw(c.tools_json);
      }
      w.key("kwargs").raw(c.kwargs_json.empty() ? "{}" : c.kwargs_json);
      w.member("add_generation_prompt", c.add_generation_prompt);
      w.member("continue_final_message", c.continue_final_message);
      w.end_object();
      f << line << '\n';
    }
  }
  const char* source = std::getenv("KVGATE_SOURCE_DIR");
  kvgate::testing::Child python(
      {"/usr/bin/python3",
       std::string(source ? source : ".") + "/tests/tokenizer/reference/apply_chat_template.py",
       folder, in, out});
  const auto code = python.wait(std::chrono::seconds(300));
  std::vector<Rendered> results;
  if (!code || *code != 0) {
    *error = "the reference failed (is python3-jinja2 installed? run tools/setup.sh): " +
             python.output() + python.errors();
  } else {
    std::ifstream f(out, std::ios::binary);
    simdjson::dom::parser parser;
    for (std::string line; std::getline(f, line);) {
      simdjson::dom::element e = parser.parse(line);
      Rendered r;
      r.ok = e["ok"].get_bool().value();
      r.text = std::string(std::string_view(e[r.ok ? "text" : "error"].get_string().value()));
      results.push_back(std::move(r));
    }
  }
  std::filesystem::remove_all(dir);
  return results;
}

class ChatReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatReferenceTest, RenderedPromptsEqualPythonJinja2) {
  const std::string family = GetParam();
  const std::string folder = kvgate::testing::tokenizer_dir() + "/" + family;
  ASSERT_TRUE(std::filesystem::exists(folder + "/tokenizer_config.json"))
      << folder << " is missing: run tools/setup.sh (make setup)";
  auto tok = load_prompt_tokenizer(folder);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_TRUE((*tok)->has_chat_template()) << family;
  const std::vector<testing::ChatCase> cases = testing::make_chat_corpus(300);
  std::string error;
  const std::vector<Rendered> refs = run_reference(folder, cases, &error);
  ASSERT_EQ(refs.size(), cases.size()) << error;
  size_t mismatches = 0, rendered = 0, refused = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const testing::ChatCase& c = cases[i];
    ChatPrompt prompt{.messages_json = c.messages_json,
                      .tools_json = c.tools_json,
                      .template_kwargs_json = c.kwargs_json,
                      .add_generation_prompt = c.add_generation_prompt,
                      .continue_final_message = c.continue_final_message};
    auto ours = (*tok)->render_chat(prompt);
    const bool same = ours.ok() == refs[i].ok && (!ours.ok() || *ours == refs[i].text);
    (refs[i].ok ? rendered : refused) += 1;
    if (!same && ++mismatches <= 3) {
      ADD_FAILURE() << family << " chat " << i << " " << c.messages_json << "\n  tools "
                    << c.tools_json << " kwargs " << c.kwargs_json << "\n  ours: "
                    << (ours.ok() ? "[" + *ours + "]" : "error " + ours.status().ToString())
                    << "\n  python: " << (refs[i].ok ? "[" : "error [") << refs[i].text << "]";
    }
    if (ours.ok()) {
      std::vector<TokenId> ids;
      EXPECT_TRUE((*tok)->encode_chat(*ours, static_cast<size_t>(-1), &ids).ok());
    }
  }
  std::printf("%s: %zu chats rendered, %zu refused, %zu differ\n", family.c_str(), rendered,
              refused, mismatches);
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size();
  EXPECT_GE(rendered, 200u) << "the corpus must exercise the template, not its refusals";
}

INSTANTIATE_TEST_SUITE_P(Families, ChatReferenceTest,
                         ::testing::Values("qwen3", "llama3_1", "deepseek_v3", "gemma3"));

}  // namespace
}  // namespace kvgate::tokenizer
