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

// SseEventCounter: counts the events of a text/event-stream body that carry data, whatever way
// the body was cut into pieces, without keeping their bytes (a proxy relays them untouched). It
// tells a stream's progress from its bytes: a peer that trickles bytes, sends comments or junk
// without ever ending an event with data makes none. Not thread-safe.
class SseEventCounter {
 public:
  // Takes the next piece; returns how many data events it completed.
  size_t feed(std::string_view bytes);
  uint64_t events() const { return events_; }

 private:
  // Decides, from the first bytes of the current line (at most kPrefix of them, `rest` the part
  // of it in this piece), whether it is a data line: "data" followed by ':' or the line's end.
  void classify(std::string_view rest, bool line_ended);

  static constexpr size_t kPrefix = 5;  // "data:"
  char prefix_[kPrefix] = {};
  uint8_t prefix_size_ = 0;
  bool classified_ = false;     // the current line's kind is known
  bool line_has_text_ = false;  // a byte other than '\r' on the current line
  bool data_line_ = false;
  bool event_has_data_ = false;
  uint64_t events_ = 0;
};

}  // namespace kvgate::http
