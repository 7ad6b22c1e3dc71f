#include "jinja/filters.h"

#include <array>

#include "jinja/filter_functions.h"

namespace kvgate::jinja {
namespace {

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"abs", filters::abs},
    {"attr", filters::attr},
    {"capitalize", filters::capitalize},
    {"center", filters::center},
    {"count", filters::length},
    {"d", filters::default_value},
    {"default", filters::default_value},
    {"dictsort", filters::dictsort},
    {"e", filters::escape},
    {"escape", filters::escape},
    {"first", filters::first},
    {"float", filters::to_float},
    {"forceescape", filters::forceescape},
    {"format", filters::format},
    {"indent", filters::indent},
    {"int", filters::to_int},
    {"items", filters::items},
    {"join", filters::join},
    {"last", filters::last},
    {"length", filters::length},
    {"list", filters::list},
    {"lower", filters::lower},
    {"map", filters::map},
    {"max", filters::max},
    {"min", filters::min},
    {"reject", filters::reject},
    {"rejectattr", filters::rejectattr},
    {"replace", filters::replace},
    {"reverse", filters::reverse},
    {"round", filters::round},
    {"safe", filters::safe},
    {"select", filters::select},
    {"selectattr", filters::selectattr},
    {"sort", filters::sort},
    {"string", filters::string},
    {"sum", filters::sum},
    {"title", filters::title},
    {"tojson", filters::tojson},
    {"trim", filters::trim},
    {"truncate", filters::truncate},
    {"unique", filters::unique},
    {"upper", filters::upper},
    {"wordcount", filters::wordcount},
};

// The rest of jinja2's filters.
constexpr std::string_view kOtherJinjaFilters[] = {
    "batch",     "filesizeformat", "groupby", "pprint",   "random",  "slice",
    "striptags", "urlencode",      "urlize",  "wordwrap", "xmlattr",
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const NamedFilter& f : kFilters) {
    if (f.name == name) return f.fn;
  }
  return nullptr;
}

bool is_jinja_filter(std::string_view name) {
  for (std::string_view other : kOtherJinjaFilters) {
    if (other == name) return true;
  }
  return false;
}

}  // namespace kvgate::jinja
