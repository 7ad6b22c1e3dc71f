// Emptying a buffer that a connection reuses for each message: the room of a usual message stays
// for the next one (no allocation per request), that of a rare large one is given back (idle
// connections hold little).
#pragma once

#include <cstddef>
#include <string>

namespace kvgate::http::detail {

inline void clear_keeping_room(std::string& s, size_t kept) {
  if (s.capacity() > kept) {
    std::string().swap(s);
  } else {
    s.clear();
  }
}

}  // namespace kvgate::http::detail
