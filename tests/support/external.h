// Where tools/setup.sh keeps what the tests take from outside the repository: npm packages (real
// clients and reference implementations) and models' tokenizer files.
#pragma once

#include <cstdlib>
#include <string>

namespace kvgate::testing {

inline std::string cache_path(const char* env, const char* below_home) {
  if (const char* d = std::getenv(env); d != nullptr && *d != '\0') return d;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/root") + below_home;
}

// node_modules lives below it ($KVGATE_NPM_DIR, else ~/.cache/kvgate/npm).
inline std::string npm_dir() { return cache_path("KVGATE_NPM_DIR", "/.cache/kvgate/npm"); }

// One folder per model family, each with tokenizer.json and tokenizer_config.json
// ($KVGATE_TOKENIZER_DIR, else ~/.cache/kvgate/tokenizers).
inline std::string tokenizer_dir() {
  return cache_path("KVGATE_TOKENIZER_DIR", "/.cache/kvgate/tokenizers");
}

}  // namespace kvgate::testing
