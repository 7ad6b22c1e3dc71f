#include "app/grpc_common.h"

#include <simdjson.h>

#include <cstdlib>

#include "boost/asio/ip/address.hpp"

namespace kvgate::app::rpc {
namespace net = boost::asio;

grpc::StatusCode code_for(unsigned status) {
  switch (status) {
    case 400:
    case 413:
    case 422:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case 401:
      return grpc::StatusCode::UNAUTHENTICATED;
    case 403:
      return grpc::StatusCode::PERMISSION_DENIED;
    case 404:
      return grpc::StatusCode::NOT_FOUND;
    case 408:
    case 504:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case 429:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 499:
      return grpc::StatusCode::CANCELLED;
    case 501:
      return grpc::StatusCode::UNIMPLEMENTED;
    case 502:
    case 503:
      return grpc::StatusCode::UNAVAILABLE;
    case 508:
      return grpc::StatusCode::FAILED_PRECONDITION;
    default:
      return status >= 500 ? grpc::StatusCode::INTERNAL : grpc::StatusCode::UNKNOWN;
  }
}

std::string error_message(std::string_view body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view message;
  if (parser.parse(body.data(), body.size()).get(doc) == simdjson::SUCCESS &&
      doc["error"]["message"].get_string().get(message) == simdjson::SUCCESS) {
    return std::string(message);
  }
  return std::string(body.substr(0, 512));
}

namespace {

// "ipv4:127.0.0.1:5000" / "ipv6:[::1]:5000" as an endpoint (unspecified when it is neither).
net::ip::tcp::endpoint peer_endpoint(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t kind = peer.find(':');
  if (colon == std::string::npos || kind == colon) return {};
  std::string host = peer.substr(kind + 1, colon - kind - 1);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return {};
  return {address, static_cast<uint16_t>(std::atoi(peer.c_str() + colon + 1))};
}

}  // namespace

http::Request caller_of(grpc::CallbackServerContext* ctx) {
  http::Request req;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) {
    req.fields.add("authorization", std::string_view(it->second.data(), it->second.size()));
  }
  req.remote = peer_endpoint(ctx->peer());
  return req;
}

std::optional<grpc::Status> refusal_of(const AccessGuard& access, const http::Request& req) {
  auto refused = access.check(Access::kClient, req);
  if (!refused) return std::nullopt;
  return grpc::Status(code_for(refused->status), error_message(refused->body));
}

grpc::Status no_tokenizer(const std::string& model) {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "the gateway has no tokenizer for model '" + model +
                          "': start it with --tokenizer (or ask a worker's /tokenize)");
}

}  // namespace kvgate::app::rpc
