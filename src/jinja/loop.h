// jinja2's `loop` variable inside a for loop: index, index0, revindex, revindex0, first, last,
// length, previtem, nextitem, depth, depth0, cycle() and changed().
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace kvgate::jinja {

class LoopObj final : public RichObject {
 public:
  explicit LoopObj(Ref<ListObj> items) : items_(std::move(items)) {}

  // Moves to the item at `index0`.
  void at(size_t index0) { index0_ = index0; }

  std::string_view type_name() const override { return "LoopContext"; }
  bool repr(std::string* out) const override;
  Value getattr(std::string_view name) const override;
  bool callable() const override { return true; }
  Result<Value> call(Evaluator& ev, Args& args) override;
  Result<Value> call_method(Evaluator& ev, std::string_view name, Args& args) override;
  void release_references() override { last_changed_.reset(); }

 private:
  size_t length() const { return items_->items.size(); }

  Ref<ListObj> items_;
  size_t index0_ = 0;
  std::optional<std::vector<Value>> last_changed_;
};

}  // namespace kvgate::jinja
