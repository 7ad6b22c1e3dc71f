// libFuzzer target for the quick HTTP/1.1 head parser (built only with KVGATE_BUILD_FUZZ, under
// ASan+UBSan): whatever it takes, Beast's own parser must parse the same way (the request line or
// status, the fields in order, the body, the bytes used, keep-alive), and what it refuses leaves
// the fields untouched (tests/http/quick_head_check.h). Run by tools/ci-extra/fuzz.sh with the
// seed corpus in corpus/.
//
// The first byte picks a request (even) or an answer (odd); the rest is the message.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/quick_head_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string why = data[0] % 2 == 0
                              ? kvgate::http::detail::quick_disagreement<true>(bytes, 4096, 1024)
                              : kvgate::http::detail::quick_disagreement<false>(bytes, 4096, 1024);
  if (!why.empty()) {
    std::fprintf(stderr, "quick parser and Beast disagree: %s\n", why.c_str());
    std::abort();
  }
  return 0;
}
