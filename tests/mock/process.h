// Runs kvgate-mock as a child process for the binary and load tests.
#pragma once

#include <string>

#include "support/child_process.h"

namespace kvgate::mock::testing {

using kvgate::testing::Child;

inline std::string mock_binary() { return kvgate::testing::binary_dir() + "/kvgate-mock"; }

}  // namespace kvgate::mock::testing
