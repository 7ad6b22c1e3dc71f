// StreamEvents: what the relay learns of an engine's SSE stream on its way to the client, without
// copying it. Two things are asked of it:
//   - the stream's usage (what the engine found cached): the bytes from the `"usage"` key to the
//     end of its event are kept, a few hundred bytes once per stream;
//   - with `strip_usage`, the usage-only event (`"choices":[]` and a `"usage"`) the gateway asked
//     the engine for on the client's behalf is kept from the client.
// A piece's bytes go on to the client as a view of the piece itself; only an event that a piece
// cuts in two is held (copied) until it is whole, and only when the strip is on; and only a piece
// from which the usage event is removed is rebuilt. bytes_copied() says how much was copied, so a
// counter can show that a streamed byte is copied at most once on its way through.
//
// Threading: one stream's relay.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvgate::app {

class StreamEvents {
 public:
  explicit StreamEvents(bool strip_usage) : strip_(strip_usage) {}

  // The bytes that may go to the client now: a view of `piece`, or of this object's buffer (valid
  // until the next call).
  std::string_view feed(std::string_view piece);
  // At the stream's end: what is still held (an unterminated last event, with the strip on).
  std::string_view rest() const { return held_; }
  // The usage seen so far: from the last `"usage"` key to its event's end ("" without one).
  std::string_view usage() const { return usage_; }
  // Bytes copied so far (held, rebuilt, kept as usage).
  uint64_t bytes_copied() const { return copied_; }

 private:
  // The usage key's bytes in `piece` (and across from the previous piece's end) kept.
  void watch_usage(std::string_view piece);
  // With the strip on: `bytes` (whole events first, perhaps a cut event last) without the
  // usage-only events; the cut event is held.
  std::string_view strip(std::string_view bytes, bool bytes_are_held);

  const bool strip_;
  std::string held_;       // a cut event (strip only)
  std::string out_;        // a rebuilt piece (strip only)
  std::string usage_;      // from the usage key on
  bool in_usage_ = false;  // the usage event's end has not come yet
  char carry_[7] = {};     // the previous piece's last bytes, for a key cut across two pieces
  size_t carry_size_ = 0;
  uint64_t copied_ = 0;
};

// Whether an SSE stream holds an error event (`data: {"error"...`: an engine that failed
// mid-stream), read piece by piece without a copy of the stream: the end of each piece is kept,
// so an event that two pieces split is seen too.
class ErrorEventScan {
 public:
  void scan(std::string_view piece);
  bool found() const { return found_; }

 private:
  static constexpr size_t kKept = 15;  // the longer pattern's length, less one
  char joint_[2 * kKept] = {};
  size_t kept_ = 0;
  bool found_ = false;
};

}  // namespace kvgate::app
