#include "jinja/globals.h"

#include <time.h>

#include <chrono>
#include <cstdio>

#include "jinja/evaluator.h"
#include "jinja/methods.h"
#include "jinja/py_str.h"
#include "jinja/status_macros.h"

namespace kvgate::jinja {
namespace {

// The sandbox's limit on range().
constexpr int64_t kMaxRange = 100000;

class Cycler final : public RichObject {
 public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
  std::string_view type_name() const override { return "Cycler"; }
  Value getattr(std::string_view name) const override {
    if (name == "current") return items_[pos_];
    if (name == "items") return Value::list(make_ref<ListObj>(items_, SeqKind::kTuple));
    if (name == "next" || name == "reset") {
      return bound_method(Value::object(Ref<RichObject>(const_cast<Cycler*>(this))), name);
    }
    return RichObject::getattr(name);
  }
  Result<Value> call_method(Evaluator& ev, std::string_view name, Args& args) override {
    JINJA_RETURN_IF_ERROR(bind_args(args, name, {}, 0, nullptr));
    if (name == "reset") {
      pos_ = 0;
      return Value::none();
    }
    if (name == "next") {
      Value v = items_[pos_];
      pos_ = (pos_ + 1) % items_.size();
      return v;
    }
    return RichObject::call_method(ev, name, args);
  }
  void release_references() override { items_.clear(); }

 private:
  std::vector<Value> items_;
  size_t pos_ = 0;
};

class Joiner final : public RichObject {
 public:
  explicit Joiner(Value sep) : sep_(std::move(sep)) {}
  std::string_view type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Result<Value> call(Evaluator&, Args& args) override {
    JINJA_RETURN_IF_ERROR(bind_args(args, "joiner", {}, 0, nullptr));
    if (!used_) {
      used_ = true;
      return Value::borrowed("");
    }
    return sep_;
  }
  Value getattr(std::string_view name) const override {
    if (name == "sep") return sep_;
    return RichObject::getattr(name);
  }

 private:
  Value sep_;
  bool used_ = false;
};

Result<Value> range(Args& args) {
  if (!args.keywords.empty()) return type_error("range() takes no keyword arguments");
  const size_t n = args.positional.size();
  if (n < 1 || n > 3) {
    return type_error("range expected at most 3 arguments, got " + std::to_string(n));
  }
  int64_t bounds[3] = {0, 0, 1};
  for (size_t i = 0; i < n; ++i) {
    const Value& v = args.positional[i];
    if (!v.is_integral()) {
      return type_error("'" + std::string(type_name(v)) +
                        "' object cannot be interpreted as an integer");
    }
    bounds[n == 1 ? 1 : i] = v.as_int();
  }
  const int64_t start = bounds[0], stop = bounds[1], step = bounds[2];
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  const double count =
      step > 0 ? std::max(0.0, std::ceil((double(stop) - double(start)) / double(step)))
               : std::max(0.0, std::ceil((double(start) - double(stop)) / double(-step)));
  if (count > kMaxRange) {
    return absl::InvalidArgumentError(
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  auto list = make_ref<ListObj>();
  list->seq = SeqKind::kRange;
  list->range_start = start;
  list->range_stop = stop;
  list->range_step = step;
  for (int64_t i = 0, v = start; i < static_cast<int64_t>(count); ++i, v += step) {
    list->items.push_back(Value::integer(v));
  }
  return Value::list(std::move(list));
}

// dict(*args, **kwargs): a mapping or pairs, then the keywords.
Status fill_dict(Evaluator& ev, Args& args, std::string_view what, DictObj* out) {
  if (args.positional.size() > 1) {
    return type_error(std::string(what) + " expected at most 1 argument, got " +
                      std::to_string(args.positional.size()));
  }
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [k, v] : source.dict().items) out->set(k, v);
    } else {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> pairs, ev.iterate(source));
      for (size_t i = 0; i < pairs.size(); ++i) {
        JINJA_ASSIGN_OR_RETURN(std::vector<Value> kv, ev.iterate(pairs[i]));
        if (kv.size() != 2) {
          return absl::InvalidArgumentError("dictionary update sequence element #" +
                                            std::to_string(i) + " has length " +
                                            std::to_string(kv.size()) + "; 2 is required");
        }
        if (!py_hashable(kv[0])) {
          return type_error("unhashable type: '" + std::string(type_name(kv[0])) + "'");
        }
        out->set(std::move(kv[0]), std::move(kv[1]));
      }
    }
  }
  for (auto& [name, value] : args.keywords) out->set(Value::borrowed(name), value);
  return absl::OkStatus();
}

Result<Value> strftime_now(Args& args) {
  Value format;
  JINJA_RETURN_IF_ERROR(bind_args(args, "strftime_now", {"format"}, 1, &format));
  if (!format.is_string()) {
    return type_error("strftime() argument 1 must be str, not " + std::string(type_name(format)));
  }
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm local{};
  localtime_r(&t, &local);
  // datetime.strftime fills %f (microseconds) itself; the rest is the C library's.
  std::string pattern;
  const std::string_view f = format.str();
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 1 < f.size()) {
      if (f[i + 1] == 'f') {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(micros));
        pattern += buf;
        ++i;
        continue;
      }
      pattern += f.substr(i, 2);
      ++i;
      continue;
    }
    pattern.push_back(f[i]);
  }
  std::string out(pattern.size() * 4 + 64, '\0');
  const size_t n =
      pattern.empty() ? 0 : std::strftime(out.data(), out.size(), pattern.c_str(), &local);
  out.resize(n);
  return Value::string(std::move(out));
}

struct NamedGlobal {
  std::string_view name;
  Builtin id;
};

constexpr NamedGlobal kGlobals[] = {
    {"range", Builtin::kRange},
    {"namespace", Builtin::kNamespace},
    {"dict", Builtin::kDict},
    {"cycler", Builtin::kCycler},
    {"joiner", Builtin::kJoiner},
    {"raise_exception", Builtin::kRaiseException},
    {"strftime_now", Builtin::kStrftimeNow},
    {"lipsum", Builtin::kLipsum},
};

}  // namespace

bool NamespaceObj::repr(std::string* out) const {
  *out += "<Namespace ";
  if (!append_dict_repr(attrs_, out).ok()) return false;
  *out += ">";
  return true;
}

Value NamespaceObj::getattr(std::string_view name) const {
  if (const Value* v = attrs_.find(name)) return *v;
  return RichObject::getattr(name);
}

Value global_named(std::string_view name) {
  for (const NamedGlobal& g : kGlobals) {
    if (g.name == name) return Value::builtin(g.id);
  }
  return Value::undefined(Hint::kName, name);
}

Result<Value> call_global(Evaluator& ev, Builtin which, Args& args) {
  switch (which) {
    case Builtin::kRange:
      return range(args);
    case Builtin::kNamespace: {
      auto ns = make_ref<NamespaceObj>();
      JINJA_RETURN_IF_ERROR(fill_dict(ev, args, "Namespace", &ns->attrs()));
      ev.track(Ref<Object>(ns.get()));
      return Value::object(std::move(ns));
    }
    case Builtin::kDict: {
      auto dict = make_ref<DictObj>();
      JINJA_RETURN_IF_ERROR(fill_dict(ev, args, "dict", dict.get()));
      return Value::dict(std::move(dict));
    }
    case Builtin::kCycler: {
      if (!args.keywords.empty()) return type_error("Cycler() takes no keyword arguments");
      if (args.positional.empty()) {
        return absl::InvalidArgumentError("at least one item has to be provided");
      }
      auto cycler =
          make_ref<Cycler>(std::vector<Value>(args.positional.begin(), args.positional.end()));
      ev.track(Ref<Object>(cycler.get()));
      return Value::object(std::move(cycler));
    }
    case Builtin::kJoiner: {
      Value sep = Value::borrowed(", ");
      JINJA_RETURN_IF_ERROR(bind_args(args, "joiner", {"sep"}, 0, &sep));
      return Value::object(make_ref<Joiner>(std::move(sep)));
    }
    case Builtin::kRaiseException: {
      Value message;
      JINJA_RETURN_IF_ERROR(bind_args(args, "raise_exception", {"message"}, 1, &message));
      std::string text;
      JINJA_RETURN_IF_ERROR(append_str(message, &text));
      return ev.raise(std::move(text));
    }
    case Builtin::kStrftimeNow:
      return strftime_now(args);
    case Builtin::kLipsum:
      return absl::InvalidArgumentError("lipsum() (random text) is not supported");
  }
  return absl::InvalidArgumentError("unknown global function");
}

}  // namespace kvgate::jinja
