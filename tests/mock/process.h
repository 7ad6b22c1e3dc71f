// Runs kvgate-mock as a child process for the binary and load tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kvgate::mock::testing {

inline std::string mock_binary() {
  const char* dir = std::getenv("KVGATE_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/bin/kvgate-mock";
}

// A child process with its stdout in a file (read back with output()).
class Child {
 public:
  explicit Child(std::vector<std::string> args) {
    out_path_ = "/tmp/kvgate-mock-test-" + std::to_string(getpid()) + "-" +
                std::to_string(counter()++) + ".out";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
  }
  bool started() const { return ok_; }
  pid_t pid() const { return pid_; }
  std::string output() const {
    std::ifstream f(out_path_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // Waits for the exit (up to `timeout`); the exit code, or nullopt on timeout / signal.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }
  // CPU seconds (user + system) the child used so far, from /proc.
  double cpu_seconds() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
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

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  bool ok_ = false;
  std::optional<int> exit_code_;
  std::string out_path_;
};

}  // namespace kvgate::mock::testing
