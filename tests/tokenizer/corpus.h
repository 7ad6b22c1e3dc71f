// A corpus of texts that exercise a tokenizer's every stage: English prose, code, JSON, CJK,
// Arabic, Cyrillic, emoji with ZWJ sequences and modifiers, combining marks, whitespace and
// newline runs, digit runs, contractions and case, special-token strings, and the empty string.
// Deterministic: the same seed gives the same texts.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace kvgate::tokenizer::testing {

inline const std::vector<std::string>& corpus_fragments() {
  static const std::vector<std::string> f = {
      // prose and case
      "The quick brown fox jumps over the lazy dog.",
      " Hello",
      "hello",
      "HELLO",
      "Hello, World!",
      "It's",
      " they're",
      " we've",
      " I'M",
      " you'll",
      " he'd",
      "don't",
      "O'Neil's",
      " The gateway routes each request to the worker that holds its prefix.",
      "e.g.",
      "Mr. Smith",
      "caf\xC3\xA9",
      "na\xC3\xAFve",
      "\xC3\x85ngstr\xC3\xB6m",
      // code
      "int main() {\n  return 0;\n}\n",
      "def f(x):\n    return x ** 2\n",
      "\tif (a && b) {",
      "for (size_t i = 0; i < n; ++i) sum += v[i];",
      "#include <vector>",
      "x->y",
      "a::b::c",
      "console.log(`${name}`);",
      "SELECT * FROM t WHERE id = 42;",
      "// comment\n",
      "/* */",
      "<div class=\"a\">text</div>",
      "https://example.com/path?q=1&r=2#frag",
      // JSON
      "{\"key\": \"value\", \"n\": [1, 2, 3], \"ok\": true}",
      "{\"a\":{\"b\":null}}",
      "[]",
      // digits
      "1",
      "12",
      "123",
      "1234",
      "12345678901234567890",
      "3.14159",
      "1,000,000",
      "2026-12-02",
      " 42",
      "v1.2.3",
      "0x1F",
      "\xEF\xBC\x91\xEF\xBC\x92\xEF\xBC\x93" /* fullwidth 123 */,
      "\xD9\xA1\xD9\xA2\xD9\xA3" /* Arabic-Indic digits */,
      "\xE2\x85\xAB" /* Roman twelve */,
      // CJK
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81",
      "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE6\x97\xA5\xE6\x9C\xAC\xE3\x81\xAE\xE9\xA6\x96"
      "\xE9\x83\xBD\xE3\x81\xA7\xE3\x81\x99\xE3\x80\x82",
      "\xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB\xE3\x83\x8A",
      "\xEC\x95\x88\xEB\x85\x95\xED\x95\x98"
      "\xEC\x84\xB8\xEC\x9A\x94",
      "\xE9\xBE\x8D\xE9\xBE\x98",
      "\xF0\xA0\x80\x80" /* CJK extension B */,
      // Arabic, Hebrew, Cyrillic, Greek, Thai, Devanagari
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84"
      "\xD9\x85",
      "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
      "\xCE\x9A\xCE\xB1\xCE\xBB\xCE\xB7\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1 \xCE\xA3\xCE\x95",
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5",
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      // emoji: plain, ZWJ family, skin tone, flag, keycap, variation selector
      "\xF0\x9F\x98\x80",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91"
      "\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6",
      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
      "\xF0\x9F\x87\xBA\xF0\x9F\x87\xB8",
      "1\xEF\xB8\x8F\xE2"
      "\x83\xA3",
      "\xE2\x9D\xA4\xEF\xB8\x8F",
      "\xF0\x9F\xA7\x91\xE2\x80\x8D\xF0\x9F\x92\xBB",
      // combining marks and normalization forms
      "e\xCC\x81",
      "A\xCC\x8A",
      "Vi\xE1\xBB\x87t Nam",
      "Vie\xCC\xA3\xCC\x82t",
      "\xEF\xAC\x81",
      "\xE2\x84\xAB",
      "\xE2\x91\xA0",
      "\xE3\x8E\x8F",
      "x\xCD\x8F\xCC\x81",
      // whitespace and newlines
      " ",
      "  ",
      "    ",
      "\t",
      "\n",
      "\n\n",
      "\n\n\n\n",
      "\r\n",
      " \n ",
      "\t\t\n  \n",
      "\xC2\xA0",
      "\xE3\x80\x80",
      "\xE2\x80\x83",
      "\xE2\x80\x8B",
      "end.   ",
      "   start",
      // punctuation and symbols
      "...",
      "!!!",
      "?!",
      "---",
      "\xE2\x80\x94",
      "\xE2\x80\x9Cquoted\xE2\x80\x9D",
      "\xC2\xA9",
      "$100",
      "\xE2\x82\xAC"
      "5",
      "50%",
      "a_b_c",
      "__init__",
      "@user",
      "#tag",
      "~/.bashrc",
      // SentencePiece-style spaces and the byte-fallback range
      "\xE2\x96\x81",
      "\xE2\x96\x81\xE2\x96\x81word",
      "\x01",
      "\x7F",
      "\xEF\xBF\xBD",
  };
  return f;
}

// Special-token strings of the families under test, so the corpus contains them in running text.
inline const std::vector<std::string>& special_fragments() {
  static const std::vector<std::string> f = {
      "<|im_start|>",
      "<|im_end|>",
      "<|endoftext|>",
      "<think>",
      "</think>",
      "<|begin_of_text|>",
      "<|eot_id|>",
      "<|start_header_id|>",
      "<|end_header_id|>",
      "<s>",
      "</s>",
      "<unk>",
      "<bos>",
      "<eos>",
      "<start_of_turn>",
      "<end_of_turn>",
      "[INST]",
      "[/INST]",
      "<\xEF\xBD\x9C"
      "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
      "<\xEF\xBD\x9C"
      "User\xEF\xBD\x9C>",
      "<\xEF\xBD\x9C"
      "Assistant\xEF\xBD\x9C>",
      "<|fim_prefix|>",
      "<tool_call>",
      "<|python_tag|>",
      "<start_of_image>",
  };
  return f;
}

// `count` texts: hand-picked edge cases first, then random mixtures of fragments.
inline std::vector<std::string> make_corpus(size_t count, uint64_t seed = 7) {
  std::vector<std::string> out = {"",
                                  " ",
                                  "a",
                                  "\n",
                                  "  leading",
                                  "trailing  ",
                                  "<s>",
                                  "<|im_start|>user\nhi<|im_end|>\n",
                                  "x<|endoftext|>y",
                                  " <|endoftext|> ",
                                  "<s> <s>",
                                  "</s>text"};
  const auto& frags = corpus_fragments();
  const auto& specials = special_fragments();
  std::mt19937_64 rng(seed);
  const auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  static const char* kJoiners[] = {"", " ", "", "  ", "\n", "", " "};
  while (out.size() < count) {
    std::string text;
    const size_t parts = 1 + pick(12);
    for (size_t i = 0; i < parts; ++i) {
      if (i > 0) text += kJoiners[pick(7)];
      const size_t kind = pick(100);
      if (kind < 6) {
        text += specials[pick(specials.size())];
      } else if (kind < 9) {
        text += std::string(1 + pick(40), kind == 6 ? ' ' : kind == 7 ? '\n' : '9');
      } else {
        text += frags[pick(frags.size())];
      }
    }
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace kvgate::tokenizer::testing
