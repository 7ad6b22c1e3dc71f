#include "app/help_format.h"

namespace kvgate::app {
namespace {

class WrappingFormatter final : public CLI::Formatter {
 public:
  explicit WrappingFormatter(size_t width) : width_(width) {}

  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string opts = CLI::Formatter::make_option_opts(opt);
    const size_t excludes = opts.find(" " + get_label("Excludes") + ":");
    if (excludes != std::string::npos) opts.erase(excludes);
    return opts;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    const size_t column = get_column_width();
    return wrap_words(opt->get_description(), width_ > column + 20 ? width_ - column : 20);
  }

 private:
  const size_t width_;
};

}  // namespace

std::string wrap_words(std::string_view text, size_t width) {
  std::string out;
  size_t line = 0;   // characters on the current output line
  bool cut = false;  // the next piece continues a word cut at the end of the line
  while (!text.empty()) {
    if (text.front() == '\n' || text.front() == ' ') {
      if (text.front() == '\n') {
        out.push_back('\n');
        line = 0;
      }
      text.remove_prefix(1);
      continue;
    }
    std::string_view word = text.substr(0, text.find_first_of(" \n"));
    const bool too_wide = word.size() > width;
    if (too_wide) {  // a word wider than a line (a URL spec): cut after a ',' or '[' that fits
      const size_t at = word.substr(0, width).find_last_of(",[");
      if (at != std::string_view::npos && at > 0) word = word.substr(0, at + 1);
    }
    if (line > 0 && (cut || line + 1 + word.size() > width)) {
      out.push_back('\n');
      line = 0;
    } else if (line > 0) {
      out.push_back(' ');
      ++line;
    }
    out.append(word);
    line += word.size();
    text.remove_prefix(word.size());
    cut = too_wide && !text.empty() && text.front() != ' ' && text.front() != '\n';
  }
  return out;
}

std::shared_ptr<CLI::Formatter> help_formatter(size_t width, size_t name_column) {
  auto f = std::make_shared<WrappingFormatter>(width);
  f->column_width(name_column);
  return f;
}

}  // namespace kvgate::app
