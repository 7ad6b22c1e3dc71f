// An HTTP/1 parser (Beast's basic_parser underneath) that keeps a head's fields in a FieldList
// instead of Beast's per-field nodes and tree, and hands the body over in one of two ways: whole
// into a string (the server's requests, the client's send()), or piece by piece into a caller's
// buffer with Beast's buffer_body rules (the client's start_streaming() and next_piece()).
//
// Beast parses: framing, chunked decoding, limits (header_limit, body_limit), keep_alive() and
// need_eof() are its own. This class stores what it is handed, and refuses folded field lines.
//
// Threading: none of its own; one message of one connection.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "boost/beast/http/basic_parser.hpp"
#include "boost/beast/http/error.hpp"
#include "kvgate/http/field_list.h"
#include "kvgate/http/message.h"

namespace kvgate::http::detail {

template <bool kIsRequest>
class FlatParser final : public boost::beast::http::basic_parser<kIsRequest> {
 public:
  // Fields go to `fields`, which must outlive the parse.
  explicit FlatParser(FieldList* fields) : fields_(fields) {}

  // The body is appended to `body`, whole (bounded by body_limit()).
  void collect_body(std::string* body) { whole_body_ = body; }
  // The body goes into [data, data + size): a parse stops with need_buffer when the room is full,
  // as with Beast's buffer_body. piece_room() is what is left of the room after a parse.
  void set_piece(char* data, size_t size) {
    piece_ = data;
    piece_room_ = size;
  }
  size_t piece_room() const { return piece_room_; }

  // A request's line: verb::unknown for a method Beast does not name; the target as sent; the
  // version as Beast counts it (11 for HTTP/1.1).
  Verb method() const { return method_; }
  unsigned version() const { return version_; }
  std::string& target() { return target_; }
  // A response's status.
  unsigned status() const { return status_; }

 private:
  using error_code = boost::system::error_code;
  using string_view = boost::beast::string_view;

  void on_request_impl(Verb method, string_view /*method_str*/, string_view target, int version,
                       error_code& /*ec*/) override {
    method_ = method;
    version_ = static_cast<unsigned>(version);
    target_.assign(target.data(), target.size());
  }
  void on_response_impl(int code, string_view /*reason*/, int /*version*/,
                        error_code& /*ec*/) override {
    status_ = static_cast<unsigned>(code);
  }
  void on_field_impl(boost::beast::http::field /*known*/, string_view name, string_view value,
                     error_code& ec) override {
    if (folded(name)) {
      ec = boost::beast::http::error::bad_obs_fold;
      return;
    }
    fields_->add(std::string_view(name.data(), name.size()),
                 std::string_view(value.data(), value.size()));
  }
  void on_header_impl(error_code& /*ec*/) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         error_code& /*ec*/) override {
    // basic_parser has checked the length against body_limit() already. The room past the end is
    // Request's promise (kPayloadPadding).
    if (whole_body_ != nullptr && content_length) {
      whole_body_->reserve(*content_length + kPayloadPadding);
    }
  }
  size_t on_body_impl(string_view body, error_code& ec) override { return take(body, ec); }
  void on_chunk_header_impl(std::uint64_t /*size*/, string_view /*extensions*/,
                            error_code& /*ec*/) override {}
  size_t on_chunk_body_impl(std::uint64_t /*remain*/, string_view body, error_code& ec) override {
    return take(body, ec);
  }
  void on_finish_impl(error_code& /*ec*/) override {}

  // Whether the field named `name` went on over a folded line (obs-fold: CRLF, then a space or
  // tab). Beast joins such lines into one value; RFC 9112 §5.2 lets a server refuse them instead,
  // and kvgate does: a proxy in front that reads the fold as a new, malformed line frames the
  // request differently. `name` lies in Beast's input, which holds the whole field line and the
  // byte after its CRLF (Beast reads that byte to tell a fold from the next field).
  static bool folded(string_view name) {
    const char* p = name.data() + name.size();
    while (*p != '\r') ++p;
    return p[2] == ' ' || p[2] == '\t';
  }

  size_t take(string_view body, error_code& ec) {
    if (whole_body_ != nullptr) {
      whole_body_->append(body.data(), body.size());
      return body.size();
    }
    // buffer_body's rules: no room is need_buffer; what does not fit waits for the next room.
    const size_t n = std::min(piece_room_, body.size());
    if (n > 0) std::memcpy(piece_, body.data(), n);
    piece_ += n;
    piece_room_ -= n;
    if (n < body.size()) ec = boost::beast::http::error::need_buffer;
    return n;
  }

  FieldList* fields_;
  std::string* whole_body_ = nullptr;
  char* piece_ = nullptr;
  size_t piece_room_ = 0;
  Verb method_ = Verb::unknown;
  unsigned version_ = 11;
  std::string target_;
  unsigned status_ = 0;
};

using ResponseParser = FlatParser<false>;
using RequestParser = FlatParser<true>;

}  // namespace kvgate::http::detail
