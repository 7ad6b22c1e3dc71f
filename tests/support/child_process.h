// A child process for tests that start real binaries (kvgate, kvgate-mock): its stdout and stderr
// go to files the test can read back, it can be signalled (SIGSTOP, SIGCONT, SIGKILL), and it is
// killed when the object goes, whatever way the test ends.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/wait.h"

extern char** environ;

namespace kvgate::testing {

// The directory the build put its binaries under (KVGATE_BINARY_DIR, set by ctest).
inline std::string binary_dir() {
  const char* dir = std::getenv("KVGATE_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/bin";
}

class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    const std::string base =
        "/tmp/kvgate-test-" + std::to_string(getpid()) + "-" + std::to_string(counter()++);
    out_path_ = base + ".out";
    err_path_ = base + ".err";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ok_ = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() {
    if (ok_ && !exit_code_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::remove(out_path_.c_str());
    std::remove(err_path_.c_str());
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool started() const { return ok_; }
  pid_t pid() const { return pid_; }
  bool signal(int sig) const { return ok_ && !exit_code_ && kill(pid_, sig) == 0; }
  std::string output() const { return read_file(out_path_); }
  // What stdout holds after `prefix`, to the end of that line or `stop` ("" without `prefix`):
  // the address a server printed when it started.
  std::string output_after(const std::string& prefix, char stop = '\n') const {
    const std::string out = output();
    const size_t at = out.find(prefix);
    if (at == std::string::npos) return "";
    const size_t from = at + prefix.size();
    return out.substr(from, out.find_first_of(std::string{stop, '\n'}, from) - from);
  }
  std::string errors() const { return read_file(err_path_); }

  // Waits until stdout holds `text` (true) or `timeout` passes or the child exits (false).
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout) {
    bool found = false;
    wait_until(
        [&] {
          found = output().find(text) != std::string::npos;
          return found || wait(std::chrono::milliseconds(0)).has_value();
        },
        timeout, std::chrono::milliseconds(10));
    return found;
  }

  // Waits for the exit (up to `timeout`); the exit code, or nullopt on timeout / signal.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (exit_code_) return exit_code_;
    const auto reaped = [&] {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return true;
    };
    wait_until(reaped, timeout, std::chrono::milliseconds(5));
    return exit_code_;
  }

  // CPU seconds (user + system) the child used so far, from /proc.
  double cpu_seconds() const {
    const std::string stat = read_file("/proc/" + std::to_string(pid_) + "/stat");
    size_t close = stat.rfind(')');
    if (close == std::string::npos) return 0;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    unsigned long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoul(field);
      if (i == 15) stime = std::stoul(field);
    }
    return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
  }

  // Resident set size in bytes, now and at its peak, from /proc (0 when gone).
  uint64_t rss_bytes() const { return status_kib("VmRSS:") * 1024; }
  uint64_t peak_rss_bytes() const { return status_kib("VmHWM:") * 1024; }

 private:
  // A "Name:   N kB" line of /proc/<pid>/status.
  uint64_t status_kib(const std::string& name) const {
    std::istringstream status(read_file("/proc/" + std::to_string(pid_) + "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind(name, 0) == 0) return std::stoull(line.substr(name.size()));
    }
    return 0;
  }
  static std::string read_file(const std::string& path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  bool ok_ = false;
  std::optional<int> exit_code_;
  std::string out_path_;
  std::string err_path_;
};

}  // namespace kvgate::testing
