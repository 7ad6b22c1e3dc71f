// Restore: sets a variable for the rest of a block and puts the old value back when the block
// ends, however it ends (an early error return included).
#pragma once

#include <utility>

namespace kvgate::jinja {

template <class T>
class Restore {
 public:
  Restore(T* slot, T value) : slot_(slot), saved_(std::exchange(*slot, std::move(value))) {}
  ~Restore() { *slot_ = std::move(saved_); }
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;

 private:
  T* slot_;
  T saved_;
};

}  // namespace kvgate::jinja
