#include "kvgate/sync/redis_client.h"

#include <hiredis/hiredis.h>

#include <charconv>

namespace kvgate::sync {
namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

// "MOVED 3999 127.0.0.1:6381" -> host, port.
bool parse_moved(const std::string& error, std::string& host, uint16_t& port) {
  if (error.rfind("MOVED ", 0) != 0) return false;
  const size_t space = error.find(' ', 6);
  const size_t colon = error.rfind(':');
  if (space == std::string::npos || colon == std::string::npos || colon < space) return false;
  host = error.substr(space + 1, colon - space - 1);
  const char* first = error.data() + colon + 1;
  auto [end, ec] = std::from_chars(first, error.data() + error.size(), port);
  return ec == std::errc() && !host.empty();
}

}  // namespace

RedisClient::RedisClient(RedisTarget target, std::chrono::milliseconds timeout)
    : target_(std::move(target)), timeout_(timeout) {}

RedisClient::~RedisClient() { disconnect(); }

void RedisClient::disconnect() {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

Status RedisClient::open(const std::string& host, uint16_t port) {
  disconnect();
  host_ = host;
  port_ = port;
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, to_timeval(timeout_));
  if (c == nullptr) return absl::UnavailableError("cannot allocate a Redis connection");
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return absl::UnavailableError("cannot reach Redis at " + node() + ": " + why);
  }
  redisSetTimeout(c, to_timeval(timeout_));
  ctx_ = c;
  if (!target_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!target_.user.empty()) auth.push_back(target_.user);
    auth.push_back(target_.password);
    auto r = send({auth});
    if (!r.ok()) return r.status();
    if ((*r)[0].is_error()) {
      disconnect();
      return absl::PermissionDeniedError("Redis at " + node() + " refused AUTH: " + (*r)[0].str);
    }
  }
  return absl::OkStatus();
}

Status RedisClient::connect(std::string_view slot_key) {
  if (ctx_ != nullptr) return absl::OkStatus();
  slot_key_ = std::string(slot_key);
  if (Status s = open(target_.host, target_.port); !s.ok()) return s;
  auto slots = send({{"CLUSTER", "SLOTS"}});
  if (!slots.ok()) return slots.status();
  cluster_ = !(*slots)[0].is_error();
  if (!cluster_) {
    if (target_.db != 0) {
      auto r = send({{"SELECT", std::to_string(target_.db)}});
      if (!r.ok()) return r.status();
      if ((*r)[0].is_error()) {
        disconnect();
        return absl::InvalidArgumentError("Redis refused SELECT " + std::to_string(target_.db) +
                                          ": " + (*r)[0].str);
      }
    }
    return absl::OkStatus();
  }
  if (target_.db != 0) {
    disconnect();
    return absl::InvalidArgumentError("a Redis Cluster has only database 0; drop /" +
                                      std::to_string(target_.db) + " from the state-sync URL");
  }
  return follow_slot(slot_key);
}

Status RedisClient::follow_slot(std::string_view slot_key) {
  auto r = send({{"CLUSTER", "KEYSLOT", std::string(slot_key)}, {"CLUSTER", "SLOTS"}});
  if (!r.ok()) return r.status();
  const RedisReply& slot = (*r)[0];
  const RedisReply& ranges = (*r)[1];
  if (slot.type != RedisReply::Type::kInteger || ranges.type != RedisReply::Type::kArray)
    return absl::UnavailableError("Redis Cluster at " + node() + " answered CLUSTER SLOTS oddly");
  for (const RedisReply& range : ranges.elements) {
    if (range.elements.size() < 3 || range.elements[0].integer > slot.integer ||
        range.elements[1].integer < slot.integer) {
      continue;
    }
    const RedisReply& master = range.elements[2];
    if (master.elements.size() < 2) break;
    std::string host = master.elements[0].str;
    if (host.empty()) host = host_;  // a node that does not know its own address: the one we asked
    const auto port = static_cast<uint16_t>(master.elements[1].integer);
    if (host == host_ && port == port_) return absl::OkStatus();
    return open(host, port);
  }
  disconnect();
  return absl::UnavailableError("no Redis Cluster node serves slot " +
                                std::to_string(slot.integer) + " (is the cluster's setup done?)");
}

Result<std::vector<RedisReply>> RedisClient::send(
    const std::vector<std::vector<std::string>>& commands) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& cmd : commands) {
    argv.clear();
    lens.clear();
    for (const auto& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      std::string why = ctx_->errstr;
      disconnect();
      return absl::UnavailableError("Redis at " + node() + ": " + why);
    }
  }
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      std::string why = ctx_->err != 0 ? ctx_->errstr : "no reply";
      disconnect();
      return absl::UnavailableError("Redis at " + node() + ": " + why);
    }
    out.push_back(convert(static_cast<redisReply*>(raw)));
    freeReplyObject(raw);
  }
  return out;
}

Result<std::vector<RedisReply>> RedisClient::pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  if (Status s = connect(slot_key_); !s.ok()) return s;
  auto r = send(commands);
  if (!r.ok() || !cluster_) return r;
  for (const RedisReply& reply : *r) {
    std::string host;
    uint16_t port = 0;
    if (!reply.is_error() || !parse_moved(reply.str, host, port)) continue;
    // The slot moved: go to its new owner and replay (the commands are idempotent).
    if (Status s = open(host, port); !s.ok()) return s;
    return send(commands);
  }
  return r;
}

Result<RedisReply> RedisClient::command(std::vector<std::string> argv) {
  auto r = pipeline({std::move(argv)});
  if (!r.ok()) return r.status();
  return std::move((*r)[0]);
}

}  // namespace kvgate::sync
