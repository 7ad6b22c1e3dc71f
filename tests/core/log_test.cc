#include "kvgate/core/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <functional>

#if defined(__SANITIZE_THREAD__)
#define LOG_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOG_TEST_TSAN 1
#endif
#endif
#ifdef LOG_TEST_TSAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace kvgate::log {
namespace {

// Runs `body` in a child whose stderr is a pipe nobody reads while `body` runs. Returns what `body`
// returned (0..255), or -1 if it had not returned after `timeout_ms` (the child is killed then),
// -3 if the child died before answering or then did not exit with that value (e.g. TSan's exit
// code 66 after a race report), -4 if it did not exit once its output was drained.
//
// The verdict is the moment `body` returns, reported on a pipe of its own, not the child's exit:
// exiting is not the property under test, and under ThreadSanitizer it cannot happen while the
// output is stuck. TSan's _exit interceptor flushes stdio (FlushStreams: fflush(stderr)), so it
// waits for stderr's FILE lock, which the logger's writer thread holds while it is blocked in
// write(2) on the full pipe; a plain _exit never touches stdio. Once `body` has answered, the
// parent drains the pipe so that the child can exit and its exit status (TSan's verdict) counts.
int run_with_stuck_stderr(const std::function<int()>& body, int timeout_ms) {
  int err_fds[2];
  int answer_fds[2];
  if (pipe(err_fds) != 0 || pipe(answer_fds) != 0) return -2;
  const pid_t pid = fork();
  if (pid == 0) {
#ifdef LOG_TEST_TSAN
    // TSan's own reports go to the test's stderr: written into the stuck pipe they would block
    // the reporting thread (a TSan stall, not the logger's) and nobody would see them.
    __sanitizer_set_report_fd(reinterpret_cast<void*>(static_cast<intptr_t>(dup(STDERR_FILENO))));
#endif
    dup2(err_fds[1], STDERR_FILENO);
    close(err_fds[0]);
    close(err_fds[1]);
    close(answer_fds[0]);
    const int rc = body();
    const auto answer = static_cast<unsigned char>(rc);
    if (write(answer_fds[1], &answer, 1) != 1) _exit(12);
    _exit(rc);
  }
  close(err_fds[1]);
  close(answer_fds[1]);
  int result = -1;
  pollfd answer_poll{answer_fds[0], POLLIN, 0};
  if (poll(&answer_poll, 1, timeout_ms) == 1) {
    unsigned char answer = 0;
    result = read(answer_fds[0], &answer, 1) == 1 ? answer : -3;
  }
  close(answer_fds[0]);
  if (result == -1) kill(pid, SIGKILL);
  // Unstick the output: read it to EOF (every copy of the write end closes when the child exits).
  bool exited = true;
  char buf[65536];
  for (;;) {
    pollfd err_poll{err_fds[0], POLLIN, 0};
    if (poll(&err_poll, 1, timeout_ms) != 1) {
      exited = false;
      kill(pid, SIGKILL);
    }
    if (read(err_fds[0], buf, sizeof(buf)) <= 0) break;
  }
  close(err_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (result < 0) return result;
  if (!exited) return -4;
  return WIFEXITED(status) && WEXITSTATUS(status) == result ? result : -3;
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
  EXPECT_EQ(rc, 0)
      << "-1 means logging blocked on a stuck stderr; 11 means no drop was counted; "
         "-3/-4 mean the child died or did not exit cleanly (a TSan report is printed above)";
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
