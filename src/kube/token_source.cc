#include "kube/token_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

namespace kvgate::kube::detail {

TokenSource::TokenSource(std::string file, std::string fixed)
    : file_(std::move(file)), token_(std::move(fixed)) {}

Result<std::string_view> TokenSource::get() {
  if (file_.empty()) return std::string_view(token_);
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) {
    return absl::UnavailableError("token file " + file_ + ": " + std::strerror(errno));
  }
  const Stamp now{st.st_ino, st.st_size,
                  int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
  if (read_once_ && !stale_ && now == stamp_) return std::string_view(token_);
  std::ifstream in(file_, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) return absl::UnavailableError("token file " + file_ + ": cannot be read");
  std::string_view token = text;
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!token.empty() && space(token.front())) token.remove_prefix(1);
  while (!token.empty() && space(token.back())) token.remove_suffix(1);
  if (token.empty()) return absl::UnavailableError("token file " + file_ + " is empty");
  if (read_once_ && token != token_) ++reloads_;
  token_.assign(token.data(), token.size());
  read_once_ = true;
  stale_ = false;
  stamp_ = now;
  return std::string_view(token_);
}

}  // namespace kvgate::kube::detail
