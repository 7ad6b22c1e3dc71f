// Selector: a Kubernetes label selector, parsed and matched as the API server does
// (k8s.io/apimachinery's labels.Parse), so a selector the watcher applies to the pods it holds
// agrees with the one the server applied to what it sent.
//
//   auto s = kube::Selector::parse("app=engine, role in (prefill,decode), !draining");
//   s->matches(pod.labels);   // every term holds
//   s->text();                // "app=engine,!draining,role in (decode,prefill)"
//
// Terms, comma-separated (commas inside parentheses belong to the set):
//   key=value, key==value   the label is present with that value
//   key!=value              the label is absent, or has another value
//   key in (v1,v2)          the label is present with one of the values
//   key notin (v1,v2)       the label is absent, or has none of the values
//   key                     the label is present
//   !key                    the label is absent
// Keys are [prefix/]name (a DNS subdomain prefix of at most 253 characters; a name of at most 63
// alphanumerics, '-', '_' and '.', starting and ending alphanumeric); values are empty or follow
// a name's rules. The empty selector matches every pod.
//
// Threading: immutable after parse(); any number of threads may call matches() and text().
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/result.h"

namespace kvgate::kube {

class Selector {
 public:
  // Matches every set of labels.
  Selector() = default;

  // Parses kubectl's -l syntax. An error names the position and what was expected there.
  static Result<Selector> parse(std::string_view text);

  bool matches(const std::map<std::string, std::string>& labels) const;
  // The canonical text, for the labelSelector query parameter: terms sorted by key ('==' written
  // '='), set values sorted and without repeats. parse(text()) is the same selector.
  std::string text() const;
  bool empty() const { return terms_.empty(); }

 private:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  struct Term {
    std::string key;
    Op op = Op::kExists;
    std::vector<std::string> values;  // sorted, unique; one for kEquals / kNotEquals
    bool holds(const std::map<std::string, std::string>& labels) const;
  };
  friend class SelectorParser;

  std::vector<Term> terms_;  // sorted by key (stable: terms on one key keep their order)
};

}  // namespace kvgate::kube
