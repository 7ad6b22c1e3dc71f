// SseParser: splits a text/event-stream body into the data payloads of its events, whatever way
// the body was cut into pieces on the wire.
//
// An event ends at a blank line; its `data:` lines are joined with '\n' (one optional space after
// the colon is dropped). Comment lines (":...") and other fields are ignored. Not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kvgate::http {

class SseParser {
 public:
  using OnData = std::function<void(std::string_view data)>;

  // Feeds the next piece of the body; calls on_data for every event it completes.
  void feed(std::string_view bytes, const OnData& on_data);
  // Whether a "[DONE]" event (OpenAI's end of stream) was seen.
  bool done() const { return done_; }
  size_t events() const { return events_; }

 private:
  void line(std::string_view l, const OnData& on_data);
  std::string partial_;
  std::string data_;
  bool has_data_ = false;
  bool done_ = false;
  size_t events_ = 0;
};

}  // namespace kvgate::http
