#include "kvgate/metrics/process.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace kvgate::metrics {
namespace {

// Fields of /proc/self/stat after the command name (which may hold spaces): utime and stime are
// fields 14 and 15, starttime 22, vsize 23, rss 24 (in pages), counted from 1.
struct Stat {
  double cpu_seconds = 0;
  double start_after_boot_seconds = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
};

bool read_stat(Stat* out) {
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(line.substr(close + 2));
  std::string field;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // The stream starts at field 3 (state).
  for (int n = 3; in >> field; ++n) {
    if (n == 14 || n == 15) out->cpu_seconds += std::strtod(field.c_str(), nullptr) / ticks;
    if (n == 22) out->start_after_boot_seconds = std::strtod(field.c_str(), nullptr) / ticks;
    if (n == 23) out->virtual_bytes = std::strtod(field.c_str(), nullptr);
    if (n == 24) {
      out->resident_bytes = std::strtod(field.c_str(), nullptr) * page;
      return true;
    }
  }
  return false;
}

double boot_time_seconds() {
  std::ifstream f("/proc/stat");
  std::string key;
  double value = 0;
  while (f >> key) {
    if (key == "btime") {
      f >> value;
      return value;
    }
  }
  return 0;
}

double open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  double n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;  // the descriptor opendir itself holds
}

}  // namespace

ProcessMetrics::ProcessMetrics(Registry& reg, const std::string& prefix, const BuildInfo& build) {
  cpu_seconds_ = &counter_family(reg, "process_cpu_seconds_total",
                                 "Total user and system CPU time spent in seconds.")
                      .Add({});
  resident_bytes_ =
      &gauge_family(reg, "process_resident_memory_bytes", "Resident memory size in bytes.").Add({});
  virtual_bytes_ =
      &gauge_family(reg, "process_virtual_memory_bytes", "Virtual memory size in bytes.").Add({});
  open_fds_ = &gauge_family(reg, "process_open_fds", "Number of open file descriptors.").Add({});
  max_fds_ =
      &gauge_family(reg, "process_max_fds", "Maximum number of open file descriptors.").Add({});
  start_time_seconds_ = &gauge_family(reg, "process_start_time_seconds",
                                      "Start time of the process since unix epoch in seconds.")
                             .Add({});
  gauge_family(reg, prefix + "_build_info",
               "The build: version, compiler and build type (value 1).")
      .Add({{"version", build.version},
            {"compiler", build.compiler},
            {"build_type", build.build_type}})
      .Set(1);
  Stat st;
  if (read_stat(&st)) start_time_seconds_->Set(boot_time_seconds() + st.start_after_boot_seconds);
  update();
}

void ProcessMetrics::update() {
  Stat st;
  if (read_stat(&st)) {
    // A counter moves only up: by what the kernel added since the last scrape.
    const double added = st.cpu_seconds - cpu_seconds_->Value();
    if (added > 0) cpu_seconds_->Increment(added);
    resident_bytes_->Set(st.resident_bytes);
    virtual_bytes_->Set(st.virtual_bytes);
  }
  open_fds_->Set(open_fds());
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) max_fds_->Set(static_cast<double>(lim.rlim_cur));
}

}  // namespace kvgate::metrics
