// Building blocks of kvgate's flags (config.cc, config_flags.cc): seconds given as a decimal
// number, counts that may be "off".
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "kvgate/core/clock.h"

namespace kvgate::app {

inline std::chrono::milliseconds seconds(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000.0)));
}

// A flag taking a count of at least `min`, or "off" (nullopt).
inline std::function<void(const std::string&)> count_or_off(const char* flag, uint32_t min,
                                                            std::optional<uint32_t>& out) {
  return [flag, min, &out](const std::string& s) {
    if (s == "off") {
      out.reset();
      return;
    }
    uint32_t v = 0;
    try {
      v = static_cast<uint32_t>(std::stoul(s));
    } catch (...) {
      throw CLI::ValidationError(flag, "must be a count or 'off'");
    }
    if (v < min)
      throw CLI::ValidationError(flag, "must be >= " + std::to_string(min) + " or 'off'");
    out = v;
  };
}

inline void positive_seconds(double s, const char* flag) {
  if (!(s >= 0) || !std::isfinite(s))
    throw CLI::ValidationError(flag, "must be a finite number of seconds >= 0");
}

// A flag taking seconds (>= 0, to the millisecond) into `field`, its default shown from the field.
template <class Rep, class Period>
void add_seconds(CLI::App& app, const char* name, std::chrono::duration<Rep, Period>& field,
                 const char* help, const char* group) {
  app.add_option_function<double>(
         name,
         [&field, name](double s) {
           positive_seconds(s, name);
           field = seconds(s);
         },
         help)
      ->default_str(CLI::detail::to_string(to_seconds(field)))
      ->group(group);
}

}  // namespace kvgate::app
