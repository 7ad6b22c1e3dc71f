// A temporary folder for a test's files (kubeconfigs, tokens, service-account secrets), removed
// with the object.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kvgate::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvgate-kube-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  // Writes `text` to `name` the way the kubelet updates a projected token: a new file renamed
  // over the old one, so a reader sees the whole old or the whole new text.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string target = file(name);
    const std::string tmp = target + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
    }
    std::filesystem::rename(tmp, target);
    return target;
  }

 private:
  std::string path_;
};

}  // namespace kvgate::testing
