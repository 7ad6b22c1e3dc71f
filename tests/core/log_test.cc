#include "kvgate/core/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace kvgate::log {
namespace {

// Runs `body` in a child whose stderr is a pipe nobody reads. Returns the child's exit status, or
// -1 if it had not exited after `timeout_ms` (it is killed then).
int run_with_stuck_stderr(const std::function<int()>& body, int timeout_ms) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -2;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    _exit(body());
  }
  close(pipe_fds[1]);
  int status = 0;
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      close(pipe_fds[0]);
      return WIFEXITED(status) ? WEXITSTATUS(status) : -3;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  close(pipe_fds[0]);
  return -1;
}

// The property the asynchronous sink exists for: a caller never waits for the output. With stderr
// full (a pipe nobody drains: 64 KiB), 200,000 lines of 100 bytes must all return promptly and the
// overwritten lines must be counted.
TEST(Log, NeverBlocksTheCallerWhenTheOutputIsStuck) {
  const int rc = run_with_stuck_stderr(
      [] {
        if (!init({.level = "info", .format = Format::kText, .queue_lines = 1024}).ok()) return 10;
        auto logger = get("test");
        const std::string line(100, 'x');
        for (int i = 0; i < 200000; ++i) logger->info("{} {}", i, line);
        return dropped_lines() > 0 ? 0 : 11;
      },
      20000);
  EXPECT_EQ(rc, 0) << "-1 means logging blocked on a stuck stderr; 11 means no drop was counted";
}

TEST(Log, JsonLinesAreValidJsonObjects) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    if (!init({.level = "debug", .format = Format::kJson}).ok()) _exit(10);
    get("events")->warn("bad \"batch\"\nfrom {}", "w0");
    shutdown();
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(out.find(R"("level":"warning","component":"events","msg":"bad \"batch\"\nfrom w0"})"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.front(), '{');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
}

TEST(Log, RejectsUnknownLevelAndFormat) {
  EXPECT_FALSE(init({.level = "loud"}).ok());
  EXPECT_FALSE(parse_format("xml").ok());
  EXPECT_EQ(*parse_format("json"), Format::kJson);
}

TEST(RateLimit, AllowsOncePerInterval) {
  RateLimit r(std::chrono::hours(1));
  EXPECT_TRUE(r.allow());
  EXPECT_FALSE(r.allow());
  EXPECT_FALSE(r.allow());
  EXPECT_EQ(r.suppressed(), 2u);
}

}  // namespace
}  // namespace kvgate::log
