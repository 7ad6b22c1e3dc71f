// str, list, tuple and dict methods with CPython's semantics (indices count code points).
#include "jinja/methods.h"

#include <algorithm>

#include "jinja/evaluator.h"
#include "jinja/operators.h"
#include "jinja/py_str.h"
#include "jinja/status_macros.h"
#include "jinja/str_format.h"
#include "jinja/unicode.h"

namespace kvgate::jinja {
namespace {

constexpr std::string_view kStrMethods[] = {
    "capitalize", "center", "count", "endswith", "find", "format", "index", "isalnum", "isalpha",
    "isascii", "isdecimal", "isdigit", "islower", "isnumeric", "isspace", "istitle", "isupper",
    "join", "ljust", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "replace",
    "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines",
    "startswith", "strip", "swapcase", "title", "upper", "zfill",
    // Python has these too; calling them is an error here.
    "casefold", "encode", "expandtabs", "format_map", "isidentifier", "isprintable", "maketrans",
    "translate"};
// The immutable sandbox blocks what its list of MutableSequence methods names; pop and clear are
// not on it, so they work (and change the list).
constexpr std::string_view kListAllowed[] = {"clear", "copy", "count", "index", "pop"};
constexpr std::string_view kListBlocked[] = {"append", "extend",  "insert",
                                             "remove", "reverse", "sort"};
constexpr std::string_view kTupleMethods[] = {"count", "index"};
constexpr std::string_view kDictAllowed[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
constexpr std::string_view kDictBlocked[] = {"clear", "pop", "popitem", "setdefault", "update"};

template <size_t N>
bool contains(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Status positional_only(const Args& args, std::string_view method, size_t min, size_t max) {
  if (!args.keywords.empty())
    return type_error(std::string(method) + "() takes no keyword arguments");
  if (args.positional.size() < min || args.positional.size() > max) {
    return type_error(std::string(method) + "() takes " +
                      (min == max ? "exactly " + std::to_string(min)
                                  : "from " + std::to_string(min) + " to " + std::to_string(max)) +
                      " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  return absl::OkStatus();
}

Result<std::string_view> str_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) {
    return type_error(std::string(what) + " must be str, not " + std::string(type_name(v)));
  }
  return v.str();
}

Result<int64_t> int_arg(const Value& v) {
  if (!v.is_integral()) {
    return type_error("'" + std::string(type_name(v)) +
                      "' object cannot be interpreted as an integer");
  }
  return v.as_int();
}

// A str's code points as byte offsets, for index arithmetic on non-ASCII text.
class CharIndex {
 public:
  explicit CharIndex(std::string_view s) : s_(s), ascii_(is_ascii(s)) {
    if (!ascii_) {
      for (size_t i = 0; i < s.size();) {
        offsets_.push_back(i);
        decode_at(s, &i);
      }
      offsets_.push_back(s.size());
    }
  }
  int64_t length() const { return static_cast<int64_t>(ascii_ ? s_.size() : offsets_.size() - 1); }
  size_t byte(int64_t index) const {
    return ascii_ ? static_cast<size_t>(index) : offsets_[static_cast<size_t>(index)];
  }
  int64_t index_of(size_t byte) const {
    if (ascii_) return static_cast<int64_t>(byte);
    return static_cast<int64_t>(std::lower_bound(offsets_.begin(), offsets_.end(), byte) -
                                offsets_.begin());
  }

 private:
  std::string_view s_;
  bool ascii_;
  std::vector<size_t> offsets_;
};

// Python's slice bounds for find/count/startswith: (start, end) clamped to [0, len].
Status bounds(const Args& args, size_t first, int64_t length, int64_t* start, int64_t* end) {
  *start = 0;
  *end = length;
  auto adjust = [&](const Value& v, int64_t* out) -> Status {
    if (v.is_none()) return absl::OkStatus();
    JINJA_ASSIGN_OR_RETURN(int64_t i, int_arg(v));
    if (i < 0) i = std::max<int64_t>(0, i + length);
    *out = std::min(i, length);
    return absl::OkStatus();
  };
  if (args.positional.size() > first) JINJA_RETURN_IF_ERROR(adjust(args.positional[first], start));
  if (args.positional.size() > first + 1) {
    JINJA_RETURN_IF_ERROR(adjust(args.positional[first + 1], end));
  }
  // A start past the end finds nothing, not even "".
  if (args.positional.size() > first && !args.positional[first].is_none() &&
      args.positional[first].as_int() > length) {
    *start = length + 1;
  }
  return absl::OkStatus();
}

Value str_list(const Value& owner, const std::vector<std::string_view>& parts) {
  auto list = make_ref<ListObj>();
  list->items.reserve(parts.size());
  for (std::string_view p : parts) list->items.push_back(Value::substring(owner, p));
  return Value::list(std::move(list));
}

Value tuple_of(std::vector<Value> items) {
  return Value::list(make_ref<ListObj>(std::move(items), SeqKind::kTuple));
}

std::vector<std::string_view> split_whitespace(std::string_view s, int64_t maxsplit, bool right) {
  std::vector<std::string_view> parts;
  if (!right) {
    size_t i = 0;
    while (true) {
      while (i < s.size()) {
        size_t next = i;
        if (!py_isspace(decode_at(s, &next))) break;
        i = next;
      }
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(s.substr(i));
        break;
      }
      const size_t start = i;
      while (i < s.size()) {
        size_t next = i;
        if (py_isspace(decode_at(s, &next))) break;
        i = next;
      }
      parts.push_back(s.substr(start, i - start));
    }
    return parts;
  }
  auto char_start = [&](size_t end) {
    size_t k = end - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    return k;
  };
  auto space_before = [&](size_t end) {
    size_t k = char_start(end);
    return py_isspace(decode_at(s, &k));
  };
  size_t end = s.size();
  while (true) {
    while (end > 0 && space_before(end)) end = char_start(end);
    if (end == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(s.substr(0, end));
      break;
    }
    size_t start = end;
    while (start > 0 && !space_before(start)) start = char_start(start);
    parts.push_back(s.substr(start, end - start));
    end = start;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string_view> split_on(std::string_view s, std::string_view sep, int64_t maxsplit,
                                       bool right) {
  std::vector<std::string_view> parts;
  if (!right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(sep, start);
      if (hit == std::string_view::npos) break;
      parts.push_back(s.substr(start, hit - start));
      start = hit + sep.size();
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t hit = s.rfind(sep, end - sep.size());
    if (hit == std::string_view::npos) break;
    parts.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
    end = hit;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Result<Value> split(const Value& self, Args& args, bool right) {
  Value p[2] = {Value::none(), Value::integer(-1)};
  JINJA_RETURN_IF_ERROR(bind_args(args, right ? "rsplit" : "split", {"sep", "maxsplit"}, 0, p));
  JINJA_ASSIGN_OR_RETURN(int64_t maxsplit, int_arg(p[1]));
  if (p[0].is_none()) return str_list(self, split_whitespace(self.str(), maxsplit, right));
  JINJA_ASSIGN_OR_RETURN(std::string_view sep, str_arg(p[0], "sep"));
  if (sep.empty()) return absl::InvalidArgumentError("empty separator");
  return str_list(self, split_on(self.str(), sep, maxsplit, right));
}

Result<Value> splitlines(const Value& self, Args& args) {
  Value keepends = Value::boolean(false);
  JINJA_RETURN_IF_ERROR(bind_args(args, "splitlines", {"keepends"}, 0, &keepends));
  const std::string_view s = self.str();
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const char32_t c = decode_at(s, &i);
    if (!py_is_line_break(c)) continue;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    lines.push_back(s.substr(start, (py_truthy(keepends) ? i : at) - start));
    start = i;
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return str_list(self, lines);
}

// startswith / endswith: a str or a tuple of them, within s[start:end].
Result<Value> affix(const Value& self, Args& args, bool at_start) {
  const std::string_view name = at_start ? "startswith" : "endswith";
  JINJA_RETURN_IF_ERROR(positional_only(args, name, 1, 3));
  std::string_view s = self.str();
  int64_t start = 0, end = 0;
  if (args.positional.size() > 1) {
    const CharIndex index(self.str());
    JINJA_RETURN_IF_ERROR(bounds(args, 1, index.length(), &start, &end));
    if (start > index.length()) return Value::boolean(false);
    s = start <= end ? s.substr(index.byte(start), index.byte(end) - index.byte(start))
                     : std::string_view();
  }
  auto test = [&](std::string_view a) {
    if (start > end) return false;
    return a.size() <= s.size() &&
           (at_start ? s.substr(0, a.size()) == a : s.substr(s.size() - a.size()) == a);
  };
  const Value& what = args.positional[0];
  if (what.is_string()) return Value::boolean(test(what.str()));
  if (what.is_list() && what.seq() == SeqKind::kTuple) {
    for (const Value& item : what.list().items) {
      JINJA_ASSIGN_OR_RETURN(std::string_view a, str_arg(item, "tuple for " + std::string(name)));
      if (test(a)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  return type_error(std::string(name) + " first arg must be str or a tuple of str, not " +
                    std::string(type_name(what)));
}

// find, rfind, index, rindex, count.
Result<Value> search(const Value& self, std::string_view name, Args& args) {
  JINJA_RETURN_IF_ERROR(positional_only(args, name, 1, 3));
  JINJA_ASSIGN_OR_RETURN(std::string_view sub, str_arg(args.positional[0], "substring"));
  const CharIndex index(self.str());
  int64_t start, end;
  JINJA_RETURN_IF_ERROR(bounds(args, 1, index.length(), &start, &end));
  const bool from_right = name == "rfind" || name == "rindex";
  if (name == "count") {
    if (start > end || start > index.length()) return Value::integer(0);
    if (sub.empty()) return Value::integer(end - start + 1);
    const std::string_view s =
        self.str().substr(index.byte(start), index.byte(end) - index.byte(start));
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) {
      ++n;
    }
    return Value::integer(n);
  }
  int64_t found = -1;
  if (start <= end && start <= index.length()) {
    const size_t b0 = index.byte(start);
    const std::string_view s = self.str().substr(b0, index.byte(end) - b0);
    const size_t at = from_right ? s.rfind(sub) : s.find(sub);
    if (at != std::string_view::npos) found = index.index_of(b0 + at);
  }
  if (found < 0 && (name == "index" || name == "rindex")) {
    return absl::InvalidArgumentError("substring not found");
  }
  return Value::integer(found);
}

Result<Value> justify(const Value& self, std::string_view name, Args& args) {
  JINJA_RETURN_IF_ERROR(positional_only(args, name, 1, name == "zfill" ? 1 : 2));
  JINJA_ASSIGN_OR_RETURN(int64_t width, int_arg(args.positional[0]));
  std::string fill = " ";
  if (args.positional.size() > 1) {
    const Value& f = args.positional[1];
    if (!f.is_string() || char_count(f.str()) != 1) {
      return type_error("The fill character must be exactly one character long");
    }
    fill = std::string(f.str());
  }
  if (width > kMaxWidth) return absl::InvalidArgumentError("width too large");
  const std::string_view s = self.str();
  const auto len = static_cast<int64_t>(char_count(s));
  if (width <= len) return self;
  const int64_t margin = width - len;
  int64_t left = 0;
  if (name == "rjust") left = margin;
  if (name == "center") left = margin / 2 + (margin & width & 1);
  std::string out;
  if (name == "zfill") {
    std::string_view body = s;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
      out.push_back(body[0]);
      body.remove_prefix(1);
    }
    out.append(static_cast<size_t>(margin), '0');
    out += body;
    return Value::string(std::move(out), self.markup());
  }
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = left; i < margin; ++i) out += fill;
  return Value::string(std::move(out), self.markup());
}

Result<Value> partition(const Value& self, Args& args, bool right) {
  JINJA_RETURN_IF_ERROR(positional_only(args, right ? "rpartition" : "partition", 1, 1));
  JINJA_ASSIGN_OR_RETURN(std::string_view sep, str_arg(args.positional[0], "sep"));
  if (sep.empty()) return absl::InvalidArgumentError("empty separator");
  const std::string_view s = self.str();
  const size_t at = right ? s.rfind(sep) : s.find(sep);
  const Value empty = Value::borrowed("");
  if (at == std::string_view::npos) {
    return right ? tuple_of({empty, empty, self}) : tuple_of({self, empty, empty});
  }
  return tuple_of({Value::substring(self, s.substr(0, at)), Value::substring(self, sep),
                   Value::substring(self, s.substr(at + sep.size()))});
}

// The is*() methods: true if non-empty and every character passes.
Result<Value> char_class(const Value& self, std::string_view name, Args& args) {
  JINJA_RETURN_IF_ERROR(positional_only(args, name, 0, 0));
  const std::string_view s = self.str();
  if (name == "islower" || name == "isupper") {
    const bool lower = name == "islower";
    bool cased = false;
    for (size_t i = 0; i < s.size();) {
      const char32_t c = decode_at(s, &i);
      if (lower ? (py_isupper_char(c) || py_istitle_char(c))
                : (py_islower_char(c) || py_istitle_char(c))) {
        return Value::boolean(false);
      }
      cased |= lower ? py_islower_char(c) : py_isupper_char(c);
    }
    return Value::boolean(cased);
  }
  if (name == "istitle") {
    bool cased = false, previous_cased = false;
    for (size_t i = 0; i < s.size();) {
      const char32_t c = decode_at(s, &i);
      if (py_isupper_char(c) || py_istitle_char(c)) {
        if (previous_cased) return Value::boolean(false);
        previous_cased = cased = true;
      } else if (py_islower_char(c)) {
        if (!previous_cased) return Value::boolean(false);
        previous_cased = cased = true;
      } else {
        previous_cased = false;
      }
    }
    return Value::boolean(cased);
  }
  if (name == "isascii") return Value::boolean(is_ascii(s));
  bool (*pass)(char32_t) = name == "isalnum"     ? py_isalnum
                           : name == "isalpha"   ? py_isalpha
                           : name == "isdecimal" ? py_isdecimal
                           : name == "isdigit"   ? py_isdigit
                           : name == "isnumeric" ? py_isnumeric
                                                 : py_isspace;
  if (s.empty()) return Value::boolean(false);
  for (size_t i = 0; i < s.size();) {
    if (!pass(decode_at(s, &i))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

Result<Value> join(Evaluator& ev, const Value& self, Args& args) {
  JINJA_RETURN_IF_ERROR(positional_only(args, "join", 1, 1));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, ev.iterate(args.positional[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return type_error("sequence item " + std::to_string(i) + ": expected str instance, " +
                        std::string(type_name(items[i])) + " found");
    }
    if (i > 0) out += self.str();
    out += items[i].str();
  }
  return Value::string(std::move(out));
}

Result<Value> str_method(Evaluator& ev, const Value& self, std::string_view name, Args& args) {
  const std::string_view s = self.str();
  const bool markup = self.markup();
  if (name == "startswith" || name == "endswith") return affix(self, args, name == "startswith");
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 0, 1));
    const bool left = name != "rstrip", right = name != "lstrip";
    if (args.positional.empty() || args.positional[0].is_none()) {
      return Value::substring(self, py_strip(s, nullptr, left, right));
    }
    JINJA_ASSIGN_OR_RETURN(std::string_view chars,
                           str_arg(args.positional[0], std::string(name) + " arg"));
    return Value::substring(self, py_strip(s, &chars, left, right));
  }
  if (name == "split" || name == "rsplit") return split(self, args, name == "rsplit");
  if (name == "splitlines") return splitlines(self, args);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 0, 0));
    if (name == "upper") return Value::string(py_upper(s), markup);
    if (name == "lower") return Value::string(py_lower(s), markup);
    if (name == "title") return Value::string(py_title(s), markup);
    if (name == "capitalize") return Value::string(py_capitalize(s), markup);
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const size_t start = i;
      const char32_t c = decode_at(s, &i);
      const std::string_view ch = s.substr(start, i - start);
      out += py_isupper_char(c)   ? py_lower(ch)
             : py_islower_char(c) ? py_upper(ch)
                                  : std::string(ch);
    }
    return Value::string(std::move(out), markup);
  }
  if (name == "replace") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 2, 3));
    JINJA_ASSIGN_OR_RETURN(std::string_view old,
                           str_arg(args.positional[0], "replace() argument 1"));
    JINJA_ASSIGN_OR_RETURN(std::string_view repl,
                           str_arg(args.positional[1], "replace() argument 2"));
    int64_t count = -1;
    if (args.positional.size() > 2) {
      JINJA_ASSIGN_OR_RETURN(count, int_arg(args.positional[2]));
    }
    return Value::string(py_replace(s, old, repl, count), markup);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return search(self, name, args);
  }
  if (name == "join") return join(ev, self, args);
  if (name == "format") return str_format(ev, self, args);
  if (name.substr(0, 2) == "is") return char_class(self, name, args);
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    return justify(self, name, args);
  }
  if (name == "partition" || name == "rpartition")
    return partition(self, args, name == "rpartition");
  if (name == "removeprefix" || name == "removesuffix") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 1, 1));
    JINJA_ASSIGN_OR_RETURN(std::string_view a,
                           str_arg(args.positional[0], std::string(name) + "() argument"));
    if (name == "removeprefix" && s.substr(0, a.size()) == a) {
      return Value::substring(self, s.substr(a.size()));
    }
    if (name == "removesuffix" && !a.empty() && a.size() <= s.size() &&
        s.substr(s.size() - a.size()) == a) {
      return Value::substring(self, s.substr(0, s.size() - a.size()));
    }
    return self;
  }
  return absl::InvalidArgumentError("str." + std::string(name) + "() is not supported");
}

Result<Value> sequence_method(const Value& self, std::string_view name, Args& args) {
  auto& items = self.list().items;
  if (name == "pop") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 0, 1));
    if (items.empty()) return absl::InvalidArgumentError("pop from empty list");
    auto n = static_cast<int64_t>(items.size());
    int64_t i = n - 1;
    if (!args.positional.empty()) {
      JINJA_ASSIGN_OR_RETURN(i, int_arg(args.positional[0]));
      if (i < 0) i += n;
      if (i < 0 || i >= n) return absl::InvalidArgumentError("pop index out of range");
    }
    Value v = std::move(items[static_cast<size_t>(i)]);
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "clear") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 0, 0));
    items.clear();
    return Value::none();
  }
  if (name == "copy") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 0, 0));
    return Value::list(make_ref<ListObj>(items, SeqKind::kList));
  }
  if (name == "count") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 1, 1));
    return Value::integer(std::count_if(items.begin(), items.end(), [&](const Value& x) {
      return py_equal(x, args.positional[0]);
    }));
  }
  // index(x[, start[, end]])
  JINJA_RETURN_IF_ERROR(positional_only(args, name, 1, 3));
  int64_t start, end;
  JINJA_RETURN_IF_ERROR(bounds(args, 1, static_cast<int64_t>(items.size()), &start, &end));
  for (int64_t i = start; i < end; ++i) {
    if (py_equal(items[static_cast<size_t>(i)], args.positional[0])) return Value::integer(i);
  }
  std::string shown;
  JINJA_RETURN_IF_ERROR(append_repr(args.positional[0], &shown));
  return absl::InvalidArgumentError(
      shown + (self.seq() == SeqKind::kTuple ? " is not in tuple" : " is not in list"));
}

Value dict_view(const DictObj& dict, SeqKind kind) {
  auto view = make_ref<ListObj>();
  view->seq = kind;
  view->items.reserve(dict.items.size());
  for (const auto& [key, value] : dict.items) {
    if (kind == SeqKind::kDictKeys) {
      view->items.push_back(key);
    } else if (kind == SeqKind::kDictValues) {
      view->items.push_back(value);
    } else {
      view->items.push_back(tuple_of({key, value}));
    }
  }
  return Value::list(std::move(view));
}

Result<Value> dict_method(const Value& self, std::string_view name, Args& args) {
  const DictObj& dict = self.dict();
  if (name == "get") {
    JINJA_RETURN_IF_ERROR(positional_only(args, name, 1, 2));
    const Value& key = args.positional[0];
    if (!py_hashable(key)) {
      return type_error("unhashable type: '" + std::string(type_name(key)) + "'");
    }
    if (const Value* v = dict.find(key)) return *v;
    return args.positional.size() > 1 ? args.positional[1] : Value::none();
  }
  JINJA_RETURN_IF_ERROR(positional_only(args, name, 0, 0));
  if (name == "items") return dict_view(dict, SeqKind::kDictItems);
  if (name == "keys") return dict_view(dict, SeqKind::kDictKeys);
  if (name == "values") return dict_view(dict, SeqKind::kDictValues);
  if (name == "copy") {
    auto copy = make_ref<DictObj>();
    copy->items = dict.items;
    return Value::dict(std::move(copy));
  }
  return absl::InvalidArgumentError("dict." + std::string(name) + "() is not supported");
}

// A method looked up but not called yet (`f = s.upper`).
class BoundMethod final : public RichObject {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string_view type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Result<Value> call(Evaluator& ev, Args& args) override {
    if (self_.is_object()) return self_.object().call_method(ev, name_, args);
    return jinja::call_method(ev, self_, name_, args);
  }

 private:
  Value self_;
  std::string name_;
};

}  // namespace

Access method_access(const Value& self, std::string_view name) {
  switch (self.kind()) {
    case Kind::kString:
      return contains(kStrMethods, name) ? Access::kAllowed : Access::kMissing;
    case Kind::kList:
      if (self.seq() == SeqKind::kList) {
        if (contains(kListAllowed, name)) return Access::kAllowed;
        if (contains(kListBlocked, name)) return Access::kBlocked;
      } else if (self.seq() == SeqKind::kTuple && contains(kTupleMethods, name)) {
        return Access::kAllowed;
      }
      return Access::kMissing;
    case Kind::kDict:
      if (contains(kDictAllowed, name)) return Access::kAllowed;
      if (contains(kDictBlocked, name)) return Access::kBlocked;
      return Access::kMissing;
    default:
      return Access::kMissing;
  }
}

Result<Value> call_method(Evaluator& ev, const Value& self, std::string_view name, Args& args) {
  switch (self.kind()) {
    case Kind::kString:
      return str_method(ev, self, name, args);
    case Kind::kList:
      return sequence_method(self, name, args);
    case Kind::kDict:
      return dict_method(self, name, args);
    default:
      return absl::InvalidArgumentError("'" + std::string(type_name(self)) +
                                        "' object has no method '" + std::string(name) + "'");
  }
}

Value bound_method(const Value& self, std::string_view name) {
  return Value::object(make_ref<BoundMethod>(self, std::string(name)));
}

}  // namespace kvgate::jinja
