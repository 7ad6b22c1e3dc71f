// An engine stand-in that keeps every request it receives (method, target, fields, body), for
// tests that check what the gateway sends a worker: credentials, forwarded fields, bodies. It
// answers like a small OpenAI server: GET /health 200, GET /v1/models one model, any POST a
// one-token completion (an SSE stream of one event and [DONE] when the body asks for a stream),
// or the error set_generation_status() asks for (or none yet, while hold_generations()); any other
// GET 404.
//
// Threading: its server runs on its own pool; requests() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "kvgate/http/server.h"

namespace kvgate::testing {

class RecordingWorker {
 public:
  struct Received {
    http::Verb method = http::Verb::get;
    std::string target;
    std::vector<std::pair<std::string, std::string>> fields;
    std::string body;
    // The value of the first field called `name` (lower case), "" if none.
    std::string field(std::string_view name) const {
      for (const auto& [n, v] : fields) {
        if (n.size() == name.size() &&
            std::equal(n.begin(), n.end(), name.begin(),
                       [](char a, char b) { return std::tolower(a) == b; })) {
          return v;
        }
      }
      return {};
    }
  };

  explicit RecordingWorker(std::string model = "mock-8b") : model_(std::move(model)) {
    pool_.start();
    server_ = std::make_unique<http::Server>(pool_, http::ServerOptions{});
    server_->route_every_path(
        http::Verb::get,
        [this](const http::Request& r, http::Responder& res) { return serve(r, res); });
    server_->route_every_path(
        http::Verb::post,
        [this](const http::Request& r, http::Responder& res) { return serve(r, res); });
    (void)server_->start();
  }
  ~RecordingWorker() {
    server_->stop();
    pool_.stop();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  // Generations are answered with this status (an OpenAI error document unless 200).
  void set_generation_status(unsigned status) { generation_status_ = status; }
  // An error status (above) is sent this long after the request arrived: an engine that gave up
  // waiting for something, such as a decode whose KV transfer timed out.
  void set_error_delay(std::chrono::milliseconds delay) { error_delay_ms_ = delay.count(); }
  // Whole (non-streamed) generations are answered with this body instead of the usual one.
  void set_whole_answer(std::string body) {
    std::lock_guard<std::mutex> l(mu_);
    whole_answer_ = std::move(body);
  }
  // While held, generations are received (and recorded) but not answered: an engine with a
  // queue. Released, every held one is answered.
  void hold_generations(bool held) { held_ = held; }
  // GET /metrics answers this Prometheus text (else 404): the engine's load as vLLM reports it.
  void set_metrics(std::string text) {
    std::lock_guard<std::mutex> l(mu_);
    metrics_ = std::move(text);
  }
  // GET /server_info answers this body (else 404, as an engine without the route).
  void set_server_info(std::string body) {
    std::lock_guard<std::mutex> l(mu_);
    server_info_ = std::move(body);
  }
  uint16_t port() const { return server_->port(); }
  std::vector<Received> requests() const {
    std::lock_guard<std::mutex> l(mu_);
    return received_;
  }

 private:
  boost::asio::awaitable<void> serve(const http::Request& req, http::Responder& res) {
    Received r{.method = req.method(), .target = std::string(req.target()), .body = req.body()};
    for (size_t i = 0; i < req.fields.size(); ++i) {
      r.fields.emplace_back(std::string(req.fields[i].name), std::string(req.fields[i].value));
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      received_.push_back(std::move(r));
    }
    const std::string_view path = req.path();
    if (req.method() == http::Verb::get && (path == "/server_info" || path == "/metrics")) {
      // What a test set for the route (JSON for /server_info, Prometheus text for /metrics), else
      // 404 as an engine without it.
      const bool info = path == "/server_info";
      std::string body;
      {
        std::lock_guard<std::mutex> l(mu_);
        body = info ? server_info_ : metrics_;
      }
      // (Named first: g++ 12 mishandles a temporary inside co_await.)
      http::Response out = body.empty() ? http::Response::error(404, "no such route")
                           : info       ? http::Response::json(200, std::move(body))
                                        : http::Response::text(200, std::move(body));
      (void)co_await res.send(std::move(out));
      co_return;
    }
    if (req.method() == http::Verb::get) {
      http::Response out =
          path == "/health" ? http::Response::json(200, "{}")
          : path == "/v1/models"
              ? http::Response::json(200, R"({"object":"list","data":[{"id":")" + model_ +
                                              R"(","object":"model","max_model_len":4096}]})")
              : http::Response::error(404, "no such route");
      (void)co_await res.send(std::move(out));
      co_return;
    }
    while (held_.load()) {  // (a test's hold: polled, the worker has nothing else to do)
      boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
      timer.expires_after(std::chrono::milliseconds(5));
      boost::system::error_code ec;
      co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    }
    if (const unsigned status = generation_status_.load(); status != 200) {
      if (const int64_t ms = error_delay_ms_.load(); ms > 0) {
        boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
        timer.expires_after(std::chrono::milliseconds(ms));
        boost::system::error_code ec;
        co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      }
      (void)co_await res.send(http::Response::error(status, "the worker failed"));
      co_return;
    }
    const std::string choice =
        R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"x",)"
        R"("finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1,)"
        R"("total_tokens":2}})";
    if (req.body().find(R"("stream":true)") == std::string::npos) {
      std::string whole;
      {
        std::lock_guard<std::mutex> l(mu_);
        whole = whole_answer_.empty() ? choice : whole_answer_;
      }
      http::Response out = http::Response::json(200, std::move(whole));
      (void)co_await res.send(std::move(out));
      co_return;
    }
    if (!(co_await res.start_stream(200, "text/event-stream")).ok()) co_return;
    const std::string events = "data: " + choice + "\n\ndata: [DONE]\n\n";
    (void)co_await res.finish(events);
  }

  const std::string model_;
  std::atomic<unsigned> generation_status_{200};
  std::atomic<int64_t> error_delay_ms_{0};
  std::atomic<bool> held_{false};
  http::IoPool pool_{1};
  std::unique_ptr<http::Server> server_;
  mutable std::mutex mu_;
  std::vector<Received> received_;
  std::string whole_answer_;  // guarded by mu_
  std::string server_info_;   // guarded by mu_
  std::string metrics_;       // guarded by mu_
};

}  // namespace kvgate::testing
