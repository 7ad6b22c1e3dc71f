// An engine stand-in that answers generations badly, in one of the ways a broken or hostile
// worker does, for tests of the gateway's stream bounds and its view of the worker:
//   kTrickle    a valid SSE event (or JSON answer), one byte every `interval`;
//   kJunk       200 text/event-stream, then 1 KiB of bytes without a line end every `interval`;
//   kWrongType  200 application/json with a junk body, to a streamed request too;
//   kEndless    valid SSE events, one every `interval`, never a [DONE].
// GET /health and GET /v1/models answer as an engine's do, so the gateway routes to it.
//
// Threading: its server runs on its own pool; generations() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "boost/asio/steady_timer.hpp"
#include "boost/asio/this_coro.hpp"
#include "boost/asio/use_awaitable.hpp"
#include "kvgate/http/server.h"

namespace kvgate::testing {

class FaultyWorker {
 public:
  enum class Mode { kTrickle, kJunk, kWrongType, kEndless };

  FaultyWorker(Mode mode, std::chrono::milliseconds interval = std::chrono::milliseconds(50))
      : mode_(mode), interval_(interval) {
    pool_.start();
    server_ = std::make_unique<http::Server>(pool_, http::ServerOptions{});
    server_->route_every_path(http::Verb::get, [](const http::Request& r, http::Responder& res) {
      return answer_get(r, res);
    });
    server_->route_every_path(
        http::Verb::post,
        [this](const http::Request& r, http::Responder& res) { return generate(r, res); });
    (void)server_->start();
  }
  ~FaultyWorker() {
    server_->stop();
    pool_.stop();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  // Generations received so far, and when each arrived, apart from the gateway's one-token
  // probes of a worker it vetoed ("prompt":"ping").
  int generations() const { return generations_.load(); }
  std::vector<std::chrono::steady_clock::time_point> arrivals() const {
    std::lock_guard<std::mutex> l(mu_);
    return arrivals_;
  }

  // One SSE event carrying a one-token completion chunk.
  static constexpr std::string_view kEvent =
      "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
      "\"text\":\"x\",\"finish_reason\":null}]}\n\n";

 private:
  static boost::asio::awaitable<void> answer_get(const http::Request& req, http::Responder& res) {
    http::Response out =
        req.path() == "/health" ? http::Response::json(200, "{}")
        : req.path() == "/v1/models"
            ? http::Response::json(200, R"({"object":"list","data":[{"id":"mock-8b"}]})")
            : http::Response::error(404, "no such route");
    (void)co_await res.send(std::move(out));
  }

  boost::asio::awaitable<void> pause() {
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, interval_);
    co_await t.async_wait(boost::asio::use_awaitable);
  }

  boost::asio::awaitable<void> generate(const http::Request& req, http::Responder& res) {
    generations_.fetch_add(1);
    if (req.body().find(R"("prompt":"ping")") == std::string::npos) {
      std::lock_guard<std::mutex> l(mu_);
      arrivals_.push_back(std::chrono::steady_clock::now());
    }
    const bool stream = req.body().find(R"("stream":true)") != std::string::npos;
    if (mode_ == Mode::kWrongType) {
      http::Response out = http::Response::json(200, R"({"junk":true})");
      (void)co_await res.send(std::move(out));
      co_return;
    }
    if (!(co_await res.start_stream(200, stream ? "text/event-stream" : "application/json")).ok()) {
      co_return;
    }
    const std::string junk(1024, 'x');
    for (size_t i = 0;; ++i) {
      std::string_view out;
      switch (mode_) {
        case Mode::kTrickle:
          out = kEvent.substr(i % kEvent.size(), 1);
          break;
        case Mode::kJunk:
          out = junk;
          break;
        default:
          out = kEvent;
          break;
      }
      if (!(co_await res.write(out)).ok()) co_return;  // the gateway went away
      co_await pause();
    }
  }

  const Mode mode_;
  const std::chrono::milliseconds interval_;
  std::atomic<int> generations_{0};
  mutable std::mutex mu_;
  std::vector<std::chrono::steady_clock::time_point> arrivals_;
  http::IoPool pool_{1};
  std::unique_ptr<http::Server> server_;
};

}  // namespace kvgate::testing
