// TokenSource: the bearer token to send, from a fixed string or a file read again when it
// changes. A projected service-account token is rewritten by the kubelet before it expires (an
// atomic swap of a symlink), so the file is checked (stat: inode, size, mtime) before every
// request, and read again at once after a 401.
//
// Threading: one thread (the watcher's).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "kvgate/core/result.h"

namespace kvgate::kube::detail {

class TokenSource {
 public:
  TokenSource(std::string file, std::string fixed);

  // The token, read again from the file when it changed since the last read (or after
  // invalidate()). An error names the file when it cannot be read or is empty.
  Result<std::string_view> get();
  // The server refused the token: the next get() reads the file whatever its stat says.
  void invalidate() { stale_ = true; }
  // Reads of the file that found a token other than the one held.
  uint64_t reloads() const { return reloads_; }
  const std::string& file() const { return file_; }

 private:
  struct Stamp {
    ino_t inode = 0;
    off_t size = -1;
    int64_t mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };

  std::string file_;
  std::string token_;
  Stamp stamp_;
  bool read_once_ = false;
  bool stale_ = false;
  uint64_t reloads_ = 0;
};

}  // namespace kvgate::kube::detail
