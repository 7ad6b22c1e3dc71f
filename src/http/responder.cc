// Responder: writes one answer on a server session, whole (send), chunked (start_stream, write,
// finish) or as server-sent events, or hands it to a ResponseSink (the gRPC front). The server
// creates one per request; its threading contract is in kvgate/http/server.h.
#include "kvgate/http/server.h"

#include <array>
#include <cstdio>
#include <utility>

#include "boost/asio/redirect_error.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/string.hpp"
#include "http/detail/head_writer.h"
#include "http/detail/session.h"
#include "kvgate/http/response_sink.h"

namespace kvgate::http {
namespace net = boost::asio;
namespace beast = boost::beast;

Status Responder::fail(const char* what, const boost::system::error_code& ec) {
  failed_ = true;
  keep_alive_ = false;
  state_ = State::kDone;
  return absl::UnavailableError(std::string(what) + ": " + ec.message());
}

Status Responder::failed_sink(Status s) {
  if (!s.ok()) {
    failed_ = true;
    state_ = State::kDone;
  }
  return s;
}

std::vector<Header> Responder::with_added(std::span<const Header> headers) const {
  std::vector<Header> all(headers.begin(), headers.end());
  for (const Header& h : added_headers_) {
    std::erase_if(all, [&](const Header& o) { return beast::iequals(o.first, h.first); });
    all.push_back(h);
  }
  return all;
}

boost::asio::any_io_executor Responder::get_executor() const {
  return sink_ != nullptr ? sink_->executor() : session_->stream.get_executor();
}

net::awaitable<Status> Responder::send(Response response) {
  if (state_ != State::kIdle || failed_) {
    co_return absl::FailedPreconditionError("response already started");
  }
  state_ = State::kDone;
  status_ = response.status;
  mark_local_error(response.headers, response.status);
  if (sink_ != nullptr) {
    response.headers = with_added(response.headers);
    co_return failed_sink(co_await sink_->send(std::move(response)));
  }
  keep_alive_ = keep_alive_ && !response.close;
  if (detail::status_has_no_body(response.status)) response.body.clear();
  std::string& head = session_->head_out;
  head.clear();
  detail::append_response_head(head, response.status, session_->options.server_name,
                               response.content_type, response.headers, added_headers_, keep_alive_,
                               response.body.size());
  // Head and body in one gathered write (a HEAD's: the head alone).
  const std::array<net::const_buffer, 2> buffers = {
      net::buffer(head), net::buffer(response.body.data(), head_only_ ? 0 : response.body.size())};
  session_->stream.expires_after(session_->options.write_timeout);
  const boost::system::error_code ec =
      co_await detail::write_parts(session_->stream, buffers, write_scratch_);
  if (ec) co_return fail("write", ec);
  co_return Status();
}

net::awaitable<Status> Responder::start_stream(unsigned status, std::string_view content_type,
                                               std::span<const Header> headers, bool hold) {
  if (state_ != State::kIdle || failed_) {
    co_return absl::FailedPreconditionError("response already started");
  }
  state_ = State::kStreaming;
  status_ = status;
  if (sink_ != nullptr) {
    const std::vector<Header> all = with_added(headers);
    co_return failed_sink(co_await sink_->start(status, content_type, all));
  }
  std::string head;
  head.reserve(256);
  detail::append_response_head(head, status, session_->options.server_name, content_type, headers,
                               added_headers_, keep_alive_, /*content_length=*/std::nullopt);
  if (hold) {
    held_head_ = std::move(head);
    co_return Status();
  }
  session_->stream.expires_after(session_->options.write_timeout);
  boost::system::error_code ec;
  co_await net::async_write(session_->stream, net::buffer(head),
                            net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return fail("write header", ec);
  co_return Status();
}

void Responder::mark_local_error(std::vector<Header>& headers, unsigned status) const {
  if (status < 400 || session_ == nullptr) return;
  const Header& mark = session_->options.local_error_header;
  if (mark.first.empty()) return;
  for (const Header& h : headers) {
    if (beast::iequals(h.first, mark.first)) return;
  }
  headers.push_back(mark);
}

void Responder::add_header(std::string name, std::string value) {
  added_headers_.emplace_back(std::move(name), std::move(value));
}

net::awaitable<Status> Responder::start_sse(unsigned status) {
  static const std::vector<Header> kSseHeaders = {{"Cache-Control", "no-cache"},
                                                  {"X-Accel-Buffering", "no"}};
  co_return co_await start_stream(status, "text/event-stream", kSseHeaders);
}

net::awaitable<boost::system::error_code> Responder::write_chunk(std::string_view data, bool end) {
  session_->stream.expires_after(session_->options.write_timeout);
  // A held head, the chunk (its size in hex, the data, CRLF; none for empty data) and with `end`
  // the terminating chunk, in one gathered write.
  if (head_only_) {  // a HEAD: the held head, if any, and nothing of the body
    data = {};
    end = false;
  }
  char size_line[24];
  const int n =
      data.empty() ? 0 : std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  const std::array<net::const_buffer, 5> parts = {
      net::buffer(held_head_), net::buffer(size_line, static_cast<size_t>(n)),
      net::buffer(data.data(), data.size()), net::buffer("\r\n", data.empty() ? 0 : 2),
      net::buffer("0\r\n\r\n", end ? 5 : 0)};
  const boost::system::error_code ec =
      co_await detail::write_parts(session_->stream, parts, write_scratch_);
  held_head_.clear();
  co_return ec;
}

net::awaitable<Status> Responder::write(std::string_view data) {
  if (state_ != State::kStreaming) {
    co_return failed_ ? absl::UnavailableError("connection failed")
                      : absl::FailedPreconditionError("no stream started");
  }
  if (data.empty()) co_return Status();
  if (sink_ != nullptr) co_return failed_sink(co_await sink_->write(data));
  const boost::system::error_code ec = co_await write_chunk(data, /*end=*/false);
  if (ec) co_return fail("write chunk", ec);
  // (A HEAD's stream: its held head went out; the handler is told to stop producing a body.)
  if (head_only_) co_return absl::CancelledError("the answer to a HEAD request has no body");
  co_return Status();
}

net::awaitable<Status> Responder::write_sse(std::string_view payload) {
  sse_scratch_.clear();
  sse_scratch_.append("data: ").append(payload).append("\n\n");
  co_return co_await write(sse_scratch_);
}

net::awaitable<Status> Responder::finish(std::string_view last) {
  if (state_ != State::kStreaming) {
    co_return failed_ ? absl::UnavailableError("connection failed")
                      : absl::FailedPreconditionError("no stream started");
  }
  if (sink_ != nullptr) {
    if (!last.empty()) {
      if (Status s = co_await write(last); !s.ok()) co_return s;
    }
    state_ = State::kDone;
    co_return failed_sink(co_await sink_->finish());
  }
  state_ = State::kDone;
  const boost::system::error_code ec = co_await write_chunk(last, /*end=*/true);
  if (ec) co_return fail("write last chunk", ec);
  co_return Status();
}

}  // namespace kvgate::http
