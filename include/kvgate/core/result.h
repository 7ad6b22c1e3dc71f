// The error taxonomy (docs/architecture.md, "Errors"): expected failures return Status / Result<T>;
// no exceptions cross the data plane.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvgate {
using Status = absl::Status;
template <class T>
using Result = absl::StatusOr<T>;
}  // namespace kvgate
