// How `kvgate --help` is laid out: flags and their types in a left column, descriptions wrapped at
// word boundaries so that no line is wider than a terminal's usual 100 columns.
//
// Threading: a formatter is used by one CLI::App on the thread that parses.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "CLI/CLI.hpp"

namespace kvgate::app {

// `text` with line breaks at spaces so that no line exceeds `width` (a longer word stays whole on
// its own line); its own line breaks are kept.
std::string wrap_words(std::string_view text, size_t width);

// A formatter whose descriptions fit `width` columns beside a `name_column`-wide left column (a
// longer left column puts its description on the next line), and that leaves CLI11's "Excludes:"
// lists out of the left column (the descriptions say which flags exclude each other).
std::shared_ptr<CLI::Formatter> help_formatter(size_t width = 100, size_t name_column = 44);

}  // namespace kvgate::app
