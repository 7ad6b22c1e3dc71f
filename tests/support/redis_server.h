// A real redis-server (Debian's) for tests: on a loopback port it picks, without persistence,
// killed when the object goes. Cluster mode makes it one node of a cluster (redis_cluster() joins
// three of them).
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.h"
#include "support/ports.h"
#include "support/wait.h"

namespace kvgate::testing {

// A free port whose cluster-bus port (+10000) is free too, so below 55536.
inline uint16_t free_cluster_port() {
  for (uint16_t p = try_port(0);; p = try_port(0)) {
    const uint16_t low = static_cast<uint16_t>(20000 + p % 30000);
    if (try_port(low) == low && try_port(low + 10000) == low + 10000) return low;
  }
}

class RedisServer {
 public:
  // `extra`: more redis-server arguments (e.g. {"--requirepass", "secret"}).
  explicit RedisServer(bool cluster = false, uint16_t port = 0, std::vector<std::string> extra = {})
      : port_(port      ? port
              : cluster ? free_cluster_port()
                        : free_port()),
        cluster_(cluster),
        extra_(std::move(extra)) {
    dir_ = "/tmp/kvgate-redis-" + std::to_string(getpid()) + "-" + std::to_string(port_);
    std::filesystem::create_directories(dir_);
    start();
  }
  ~RedisServer() {
    child_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Starts it again on the same port (after kill()), empty.
  void start() {
    std::vector<std::string> args = {"/usr/bin/redis-server",
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_,
                                     "--daemonize",
                                     "no"};
    if (cluster_) {
      args.insert(args.end(), {"--cluster-enabled", "yes", "--cluster-config-file",
                               dir_ + "/nodes.conf", "--cluster-node-timeout", "2000"});
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::error_code ec;
    std::filesystem::remove(dir_ + "/nodes.conf", ec);
    child_ = std::make_unique<Child>(args);
    child_->wait_for_output("Ready to accept connections", std::chrono::seconds(10));
  }
  void kill() { child_.reset(); }

  uint16_t port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  // redis-cli against it (its output).
  std::string cli(const std::string& args) const {
    const std::string cmd =
        "redis-cli -h 127.0.0.1 -p " + std::to_string(port_) + " " + args + " 2>&1";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      pclose(p);
    }
    return out;
  }

 private:
  uint16_t port_;
  bool cluster_;
  std::vector<std::string> extra_;
  std::string dir_;
  std::unique_ptr<Child> child_;
};

// Three cluster-mode servers joined into one cluster by redis-cli (no replicas); true when the
// cluster reports ok.
inline bool make_redis_cluster(const std::vector<std::unique_ptr<RedisServer>>& nodes) {
  std::string cmd = "redis-cli --cluster create";
  for (const auto& n : nodes) cmd += " 127.0.0.1:" + std::to_string(n->port());
  cmd += " --cluster-replicas 0 --cluster-yes > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return false;
  return wait_until(
      [&] {
        bool ok = true;
        for (const auto& n : nodes)
          ok &= n->cli("cluster info").find("cluster_state:ok") != std::string::npos;
        return ok;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(100));
}

}  // namespace kvgate::testing
