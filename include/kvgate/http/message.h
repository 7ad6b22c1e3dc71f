// HTTP messages as handlers and clients see them: a parsed request with what every route needs
// (path and query split, header lookup) and whole responses (OpenAI-shaped errors).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/http/verb.hpp"
#include "kvgate/http/field_list.h"

namespace kvgate::http {

namespace beast_http = boost::beast::http;
using Verb = beast_http::verb;
using Header = std::pair<std::string, std::string>;

// One parsed request. It owns its storage; the views it returns stay valid while it lives.
// Bytes of room a server's request body keeps past its end: a JSON parser that reads ahead
// (simdjson) can parse a large body where it lies instead of copying it.
inline constexpr size_t kPayloadPadding = 64;

struct Request {
  Verb verb = Verb::get;             // verb::unknown for a method Beast does not name
  std::string request_target = "/";  // as sent: the path and the query
  FieldList fields;                  // in arrival order
  std::string payload;  // the body, a chunked one decoded; kPayloadPadding of room past its end
  boost::asio::ip::tcp::endpoint remote;
  // The request's id when its server answers with one (ServerOptions::request_id_header): the
  // client's own (request_id_or_new), else one made for it; "" otherwise.
  std::string request_id;

  Verb method() const { return verb; }
  std::string_view target() const { return request_target; }
  // The target without its query string.
  std::string_view path() const;
  // The query string without '?', empty if none.
  std::string_view query() const;
  // The raw (not percent-decoded) value of a query parameter; "" for a key without '='.
  std::optional<std::string_view> query_param(std::string_view key) const;
  // The first value of a header (any case), empty if absent.
  std::string_view header(std::string_view name) const { return fields.get(name); }
  const std::string& body() const { return payload; }
  // Bytes past the body's end that may be read (at least kPayloadPadding from a server).
  size_t body_room() const { return payload.capacity() - payload.size(); }
};

// `given` when it is a usable request id (1-128 printable ASCII characters, no spaces), else a
// fresh one of 32 hex digits.
std::string request_id_or_new(std::string_view given);

// A whole response.
struct Response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<Header> headers;
  // Close the connection after this response even if the client asked for keep-alive.
  bool close = false;

  static Response json(unsigned status, std::string body);
  static Response text(unsigned status, std::string body, std::string content_type = "text/plain");
  // OpenAI's error shape: {"error":{"message":...,"type":...,"param":null,"code":<status>}}.
  // The type defaults to error_type_for(status).
  static Response error(unsigned status, std::string_view message, std::string_view type = {});
};

// The error type for a status, as OpenAI-style APIs name them: a client's mistake is an
// invalid_request_error (or a narrower type), a failure on the server's side a server_error, and a
// worker that failed or did not answer (502, 504) an upstream_error.
std::string_view error_type_for(unsigned status);

// Whether `s` is an HTTP token (RFC 9110): one or more tchar, what a field name is made of.
bool is_token(std::string_view s);

}  // namespace kvgate::http
