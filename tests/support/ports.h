// Loopback ports for servers a test starts on a port of its own choosing (a server that cannot
// take port 0 and say what it bound, such as redis-server or a listener that 0 turns off).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace kvgate::testing {

// Binds a loopback TCP port (0: any) and closes it; the port bound, or 0 if it was taken.
inline uint16_t try_port(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  uint16_t out = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    out = ntohs(a.sin_port);
  }
  close(fd);
  return out;
}

// A TCP port that was free a moment ago.
inline uint16_t free_port() { return try_port(0); }

}  // namespace kvgate::testing
