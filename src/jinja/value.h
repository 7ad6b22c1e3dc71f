// The values a template computes with, modelled on the Python objects jinja2 handles: None,
// bool, int, float, str (optionally Markup), list, tuple, dict, the lazy sequences filters
// return, namespace, loop, macros, bound methods and jinja2's Undefined.
//
// A Value is 32 bytes: scalars inline, strings as a view (into the template, the parsed JSON, or
// a string the value owns) and containers as a reference-counted object. The counts are not
// atomic: everything a render creates stays on its thread, and what a parsed template holds
// (literals) is borrowed, never counted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "kvgate/core/result.h"

namespace kvgate::jinja {

class Evaluator;
class Value;

// A heap object a Value refers to, deleted with its last reference.
class Object {
 public:
  virtual ~Object() = default;
  // Drops what this object refers to. Run on the objects that can form cycles (scopes a macro
  // captured, namespaces, loops) when a render ends, since reference counts cannot free a cycle.
  virtual void release_references() {}
  uint32_t refs = 0;
};

template <class T>
class Ref {
 public:
  Ref() = default;
  explicit Ref(T* p) : p_(p) {
    if (p_) ++p_->refs;
  }
  Ref(const Ref& o) : Ref(o.p_) {}
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U, class = std::enable_if_t<std::is_convertible_v<U*, T*>>>
  Ref(const Ref<U>& o) : Ref(o.get()) {}  // NOLINT(google-explicit-constructor): as T* from U*
  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Ref() {
    if (p_ && --p_->refs == 0) delete p_;
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

template <class T, class... A>
Ref<T> make_ref(A&&... a) {
  return Ref<T>(new T(std::forward<A>(a)...));
}

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list, tuple and the other sequences (SeqKind)
  kDict,
  kObject,   // namespace, loop, macro, bound method, cycler, joiner
  kBuiltin,  // a global function (range, namespace, ...)
};

// What a kList value is in Python terms. Generators and iterators are single-use, always true,
// and have no len(); dict views print as dict_keys([...]).
enum class SeqKind : uint8_t {
  kList,
  kTuple,
  kRange,
  kGenerator,
  kIterator,
  kDictKeys,
  kDictValues,
  kDictItems,
};

// Why a value is undefined: what an error names when the template uses it.
enum class Hint : uint8_t {
  kPlain,      // no detail
  kName,       // 'x' is undefined
  kAttribute,  // 'dict object' has no attribute 'x'
  kItem,       // 'list object' has no element
  kUnsafe,     // a method the sandbox blocks ('append' of a list)
  kMessage,    // a sentence ("No first item, sequence was empty.")
};

class StrObj;
class ListObj;
class DictObj;
class RichObject;

enum class Builtin : uint8_t {
  kRange,
  kNamespace,
  kDict,
  kCycler,
  kJoiner,
  kRaiseException,
  kStrftimeNow,
  kLipsum,
};

class Value {
 public:
  Value() { u_.i = 0; }
  Value(const Value& o)
      : kind_(o.kind_), flags_(o.flags_), aux_(o.aux_), u_(o.u_), size_(o.size_), obj_(o.obj_) {
    if (obj_) ++obj_->refs;
  }
  Value(Value&& o) noexcept
      : kind_(o.kind_),
        flags_(o.flags_),
        aux_(o.aux_),
        u_(o.u_),
        size_(o.size_),
        obj_(std::exchange(o.obj_, nullptr)) {}
  Value& operator=(Value o) noexcept {
    swap(o);
    return *this;
  }
  ~Value() {
    if (obj_ && --obj_->refs == 0) delete obj_;
  }
  void swap(Value& o) noexcept {
    std::swap(kind_, o.kind_);
    std::swap(flags_, o.flags_);
    std::swap(aux_, o.aux_);
    std::swap(u_, o.u_);
    std::swap(size_, o.size_);
    std::swap(obj_, o.obj_);
  }

  static Value none() { return Value(Kind::kNone); }
  static Value boolean(bool b) {
    Value v(Kind::kBool);
    v.u_.b = b;
    return v;
  }
  static Value integer(int64_t i) {
    Value v(Kind::kInt);
    v.u_.i = i;
    return v;
  }
  static Value number(double f) {
    Value v(Kind::kFloat);
    v.u_.f = f;
    return v;
  }
  // A string the value owns.
  static Value string(std::string s, bool markup = false);
  // A string whose bytes outlive every use (the template's literals, the parsed JSON).
  static Value borrowed(std::string_view s, bool markup = false) {
    Value v(Kind::kString);
    v.u_.chars = s.data();
    v.size_ = s.size();
    v.flags_ = markup ? kMarkupFlag : 0;
    return v;
  }
  // Part of `owner`'s string, kept alive by it.
  static Value substring(const Value& owner, std::string_view part);
  static Value list(Ref<ListObj> list);
  static Value dict(Ref<DictObj> dict);
  static Value object(Ref<RichObject> object);
  static Value builtin(Builtin b) {
    Value v(Kind::kBuiltin);
    v.u_.i = static_cast<int64_t>(b);
    return v;
  }
  // `what` (a name, an attribute) must outlive the value, or belong to `keep` (a string value).
  static Value undefined(Hint hint, std::string_view what = {}, std::string_view type = {},
                         const Value* keep = nullptr);
  // `v`, whose hint (if it is undefined) views into `owner`'s string, kept alive with it.
  static Value keeping_hint(Value v, const Value& owner) {
    if (!v.is_undefined() || v.obj_ != nullptr) return v;
    return undefined(v.hint(), v.hint_what(), v.hint_type(), &owner);
  }

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_builtin() const { return kind_ == Kind::kBuiltin; }
  // bool, int or float (Python's bool is an int).
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  // bool or int.
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }

  bool as_bool() const { return u_.b; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (u_.b ? 1 : 0) : u_.i; }
  double as_double() const { return kind_ == Kind::kFloat ? u_.f : static_cast<double>(as_int()); }
  std::string_view str() const { return {u_.chars, size_}; }
  bool markup() const { return flags_ & kMarkupFlag; }
  ListObj& list() const;
  DictObj& dict() const;
  RichObject& object() const;
  Builtin builtin_id() const { return static_cast<Builtin>(u_.i); }
  SeqKind seq() const;

  Hint hint() const { return static_cast<Hint>(aux_); }
  // The undefined's name, attribute or message, and the type of the object it was looked up on.
  std::string_view hint_what() const { return {u_.chars, size_}; }
  std::string_view hint_type() const;

  // Appends to a string this value alone owns (the left side of `+` chains); false if it cannot.
  bool append_in_place(std::string_view tail);
  // The same heap object (Python's `is` for containers and objects).
  const Object* identity() const { return obj_; }

 private:
  static constexpr uint8_t kMarkupFlag = 1;
  explicit Value(Kind k) : kind_(k) { u_.i = 0; }

  Kind kind_ = Kind::kUndefined;
  uint8_t flags_ = 0;
  uint8_t aux_ = 0;  // Hint for undefined values; the type name index for hints
  union Payload {
    bool b;
    int64_t i;
    double f;
    const char* chars;
  } u_;
  size_t size_ = 0;
  Object* obj_ = nullptr;
};

class StrObj final : public Object {
 public:
  explicit StrObj(std::string s) : s(std::move(s)) {}
  std::string s;
};

class ListObj final : public Object {
 public:
  ListObj() = default;
  ListObj(std::vector<Value> items, SeqKind seq) : items(std::move(items)), seq(seq) {}
  std::vector<Value> items;
  SeqKind seq = SeqKind::kList;
  size_t consumed = 0;  // generators and iterators: items already taken
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // kRange, for repr()
};

// A Python dict: insertion-ordered; a key equal to an existing one replaces its value in place.
class DictObj final : public Object {
 public:
  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  void set(Value key, Value value);
  std::vector<std::pair<Value, Value>> items;
};

// Positional and keyword arguments of a call, filter, test or method.
struct Args {
  absl::InlinedVector<Value, 4> positional;
  absl::InlinedVector<std::pair<std::string_view, Value>, 2> keywords;
};

// Objects with behaviour: namespace, loop, macro, bound method, cycler, joiner.
class RichObject : public Object {
 public:
  virtual std::string_view type_name() const = 0;
  // str(): false if Python would print something kvgate cannot reproduce (an address).
  virtual bool repr(std::string* /*out*/) const { return false; }
  virtual Value getattr(std::string_view name) const;
  virtual bool callable() const { return false; }
  virtual Result<Value> call(Evaluator& ev, Args& args);
  // self.name(args), for the methods getattr() hands out as bound methods.
  virtual Result<Value> call_method(Evaluator& ev, std::string_view name, Args& args);
};

inline ListObj& Value::list() const { return *static_cast<ListObj*>(obj_); }
inline DictObj& Value::dict() const { return *static_cast<DictObj*>(obj_); }
inline RichObject& Value::object() const { return *static_cast<RichObject*>(obj_); }
inline SeqKind Value::seq() const { return list().seq; }

// The widest padding or indentation a template may ask for (Python would try to allocate
// whatever it is asked).
constexpr int64_t kMaxWidth = int64_t{1} << 20;

// Python's type name of a value ("str", "int", "list", "NoneType").
std::string_view type_name(const Value& v);

// Python's TypeError: a call or an operation given the wrong kind of value.
inline Status type_error(std::string msg) { return absl::InvalidArgumentError(std::move(msg)); }

// Binds `args` as Python binds a call to the signature `params` (positional first, then by
// keyword); `out[i]` keeps its value when params[i] is not given. The first `required` params
// must be given. Errors name `what`.
Status bind_args(const Args& args, std::string_view what,
                 std::initializer_list<std::string_view> params, size_t required, Value* out);

}  // namespace kvgate::jinja
