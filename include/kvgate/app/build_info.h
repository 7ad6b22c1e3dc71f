// What kvgate_build_info says of this binary (the gateway's and the relay's /metrics).
#pragma once

#include <string>

#include "kvgate/app/gateway.h"
#include "kvgate/metrics/process.h"

namespace kvgate::app {

inline metrics::BuildInfo build_info() {
#ifdef NDEBUG
  constexpr const char* kBuildType = "release";
#else
  constexpr const char* kBuildType = "assertions";
#endif
#if defined(__clang__)
  const std::string compiler = "clang " __clang_version__;
#else
  const std::string compiler = "g++ " __VERSION__;
#endif
  return {.version = kVersion, .compiler = compiler, .build_type = kBuildType};
}

}  // namespace kvgate::app
