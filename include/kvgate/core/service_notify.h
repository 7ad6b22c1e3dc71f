// What a service manager is told of the process's state (systemd's Type=notify, through
// libsystemd's sd_notify): ready to serve, reloading its configuration, stopping. Without a
// manager listening (NOTIFY_SOCKET unset) every call does nothing.
//
// Threading: any thread.
#pragma once

#include <string_view>

namespace kvgate::service {

// Listening and serving (READY=1), with a one-line status for `systemctl status`.
void ready(std::string_view status);
// Reading the configuration again (RELOADING=1 with the monotonic time systemd 253's
// Type=notify-reload asks for); ready() ends it.
void reloading();
// Draining before exit (STOPPING=1).
void stopping(std::string_view status);

}  // namespace kvgate::service
