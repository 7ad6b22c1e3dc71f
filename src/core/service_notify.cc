#include "kvgate/core/service_notify.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <string>

namespace kvgate::service {
namespace {

void notify(const std::string& state) { sd_notify(0, state.c_str()); }

}  // namespace

void ready(std::string_view status) { notify("READY=1\nSTATUS=" + std::string(status)); }

void reloading() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t usec =
      static_cast<uint64_t>(now.tv_sec) * 1'000'000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
  notify("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

void stopping(std::string_view status) { notify("STOPPING=1\nSTATUS=" + std::string(status)); }

}  // namespace kvgate::service
