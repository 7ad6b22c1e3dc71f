#include "kvgate/sync/redis_url.h"

#include <algorithm>
#include <charconv>

namespace kvgate::sync {
namespace {

template <class T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// %XX escapes in the user and password parts (a password may hold '@' or ':').
Result<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    unsigned v = 0;
    const char* first = s.data() + i + 1;
    const char* last = s.data() + std::min(s.size(), i + 3);
    auto [end, ec] = std::from_chars(first, last, v, 16);
    if (ec != std::errc() || end != first + 2)
      return absl::InvalidArgumentError("a bad %-escape in the state-sync URL's credentials");
    out.push_back(static_cast<char>(v));
    i += 2;
  }
  return out;
}

}  // namespace

std::string RedisTarget::redacted() const {
  std::string out = "redis://";
  if (!user.empty() || !password.empty()) out += (user.empty() ? "" : user) + ":***@";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  out += ":" + std::to_string(port) + "/" + std::to_string(db);
  return out;
}

Result<RedisTarget> parse_redis_url(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.rfind("rediss://", 0) == 0) {
    return absl::InvalidArgumentError(
        "rediss:// (TLS to Redis) is not supported by this build: reach Redis over a private "
        "network or a TLS tunnel (stunnel, a service mesh) and use redis://");
  }
  if (url.rfind(kScheme, 0) != 0)
    return absl::InvalidArgumentError("the state-sync URL must start with redis://");
  std::string_view rest = url.substr(kScheme.size());
  RedisTarget t;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view creds = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = creds.find(':');
    auto user = percent_decode(creds.substr(0, colon));
    if (!user.ok()) return user.status();
    t.user = *user;
    if (colon != std::string_view::npos) {
      auto password = percent_decode(creds.substr(colon + 1));
      if (!password.ok()) return password.status();
      t.password = *password;
    } else {
      // redis://password@host: the one-part form means a password, as redis-cli reads it.
      t.password = t.user;
      t.user.clear();
    }
  }
  std::string_view hostport = rest;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !parse_number(db, t.db))
      return absl::InvalidArgumentError("the state-sync URL's database must be a number: " +
                                        std::string(db));
  }
  std::string_view port;
  if (!hostport.empty() && hostport.front() == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos)
      return absl::InvalidArgumentError("the state-sync URL's IPv6 host lacks its ']'");
    t.host = std::string(hostport.substr(1, close - 1));
    if (close + 1 < hostport.size()) {
      if (hostport[close + 1] != ':')
        return absl::InvalidArgumentError("the state-sync URL has text after its host");
      port = hostport.substr(close + 2);
    }
  } else {
    const size_t colon = hostport.rfind(':');
    t.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) port = hostport.substr(colon + 1);
  }
  if (t.host.empty()) return absl::InvalidArgumentError("the state-sync URL names no host");
  if (!port.empty() && (!parse_number(port, t.port) || t.port == 0))
    return absl::InvalidArgumentError("the state-sync URL's port must be 1-65535: " +
                                      std::string(port));
  return t;
}

}  // namespace kvgate::sync
