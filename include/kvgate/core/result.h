// The error taxonomy (docs/architecture.md, "Errors"): expected failures return Status / Result<T>;
// no exceptions cross the data plane.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvgate {
using Status = absl::Status;
template <class T>
using Result = absl::StatusOr<T>;

// A Status's message as a std::string_view (Debian's abseil has its own string_view type, which
// fmt and std APIs do not take).
inline std::string_view message_of(const Status& s) {
  return {s.message().data(), s.message().size()};
}
}  // namespace kvgate
