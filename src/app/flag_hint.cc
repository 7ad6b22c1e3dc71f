#include "app/flag_hint.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <vector>

namespace kvgate::app {
namespace {

// Other routers' flags (SGLang's model gateway, vLLM's production-stack router) that kvgate spells
// or arranges otherwise, and what to use instead.
struct Foreign {
  std::string_view flag;
  std::string_view instead;
};
constexpr std::array<Foreign, 5> kForeign{{
    {"--static-backends", "give the workers as --worker-urls URL... (no --service-discovery)"},
    {"--static-models", "none is needed: kvgate reads each worker's models from its /v1/models"},
    {"--routing-logic",
     "use --policy: roundrobin is round_robin, session is consistent_hashing (with "
     "--routing-key-header), prefixaware is cache_aware"},
    {"--session-key", "use --policy consistent_hashing --routing-key-header HEADER"},
    {"--request-id-headers",
     "kvgate takes a request's id from x-request-id (or makes one) and answers it there"},
}};

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// kvgate's long flag nearest to `flag` by edit distance, if near enough to be a slip: a quarter
// of its length (at least 2 edits), or a flag it begins (a cut-off name).
std::string nearest_flag(std::string_view flag, const CLI::App& app) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, flag.size() / 4) + 1;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& name : o->get_lnames()) {
      const std::string candidate = "--" + name;
      const size_t d =
          candidate.rfind(flag, 0) == 0 && flag.size() >= 5 ? 1 : edit_distance(flag, candidate);
      // (Among equals the shorter: "--prefil" is --prefill cut short, not a longer flag.)
      if (d < best_distance || (d == best_distance && candidate.size() < best.size())) {
        best_distance = d;
        best = candidate;
      }
    }
  }
  return best;
}

}  // namespace

std::string flag_advice(std::string_view flag, const CLI::App& app) {
  const std::string_view name = flag.substr(0, flag.find('='));
  for (const Foreign& f : kForeign) {
    if (f.flag == name) return "; " + std::string(f.instead);
  }
  const std::string near = nearest_flag(name, app);
  return near.empty() ? std::string() : "; did you mean " + near + "?";
}

std::string unexpected_arguments_message(std::string_view listed, const CLI::App& app) {
  std::vector<std::string> args;
  std::istringstream in{std::string(listed)};
  for (std::string a; in >> a;) args.push_back(a);
  std::reverse(args.begin(), args.end());  // the command line's order
  const auto flag = std::find_if(args.begin(), args.end(),
                                 [](const std::string& a) { return a.size() > 1 && a[0] == '-'; });
  if (flag == args.end()) {
    std::string values;
    for (const std::string& a : args) values += (values.empty() ? "" : " ") + a;
    return "'" + values + "': a value no flag takes (kvgate --help lists the flags)";
  }
  std::string message = *flag + ": not a kvgate flag" + flag_advice(*flag, app);
  if (args.size() > 1) {
    std::string rest;
    for (auto a = args.begin(); a != args.end(); ++a) {
      if (a != flag) rest += (rest.empty() ? "" : " ") + *a;
    }
    message += " (also unexpected: " + rest + ")";
  }
  return message + " (kvgate --help lists them)";
}

}  // namespace kvgate::app
