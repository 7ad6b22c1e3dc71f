// What to tell someone whose command line names a flag kvgate does not have: the flag first, then
// what to use instead (another gateway's name for one of kvgate's flags) or the nearest of
// kvgate's flags by spelling.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace kvgate::app {

// The message for CLI11's "The following arguments were not expected: ..." list (in the order
// CLI11 gives them: the reverse of the command line's), e.g.
//   "--prefil: not a kvgate flag; did you mean --prefill? (kvgate --help lists them)".
std::string unexpected_arguments_message(std::string_view listed, const CLI::App& app);

// " Did you mean --X?", what to use instead of another router's flag, or "" when nothing is near.
std::string flag_advice(std::string_view flag, const CLI::App& app);

}  // namespace kvgate::app
