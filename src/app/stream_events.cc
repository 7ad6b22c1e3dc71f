#include "app/stream_events.h"

#include <algorithm>
#include <cstring>

namespace kvgate::app {
namespace {

constexpr std::string_view kUsageKey = "\"usage\"";

// Where the event that goes on at `from` ends (just past its blank line: "\n\n", or "\r\n\r\n"
// from a server that writes CRLF), or npos.
size_t event_end(std::string_view bytes, size_t from) {
  const size_t lf = bytes.find("\n\n", from);
  const size_t crlf = bytes.find("\r\n\r\n", from);
  const size_t end = std::min(lf, crlf);
  if (end == std::string_view::npos) return end;
  return end + (end == lf ? 2 : 4);
}

// Whether the usage key at `key` in `bytes` has a null value (a chunk that says it has none).
bool null_usage(std::string_view bytes, size_t key) {
  size_t at = key + kUsageKey.size();
  while (at < bytes.size() && (bytes[at] == ' ' || bytes[at] == ':')) ++at;
  return bytes.substr(at, 4) == "null";
}

// Whether one SSE event (its bytes up to the blank line) is the usage-only chunk.
bool is_usage_event(std::string_view event) {
  return event.find(kUsageKey) != std::string_view::npos &&
         (event.find("\"choices\":[]") != std::string_view::npos ||
          event.find("\"choices\": []") != std::string_view::npos);
}

}  // namespace

void StreamEvents::watch_usage(std::string_view piece) {
  size_t at = 0;
  if (!in_usage_ && carry_size_ > 0) {
    // A key cut across the previous piece's end and this one's start.
    char joined[2 * sizeof carry_];
    const size_t head = std::min(piece.size(), kUsageKey.size() - 1);
    std::memcpy(joined, carry_, carry_size_);
    std::memcpy(joined + carry_size_, piece.data(), head);
    const std::string_view both(joined, carry_size_ + head);
    const size_t key = both.find(kUsageKey);
    if (key != std::string_view::npos && key < carry_size_) {
      usage_.assign(both.substr(key, carry_size_ - key));
      copied_ += carry_size_ - key;
      in_usage_ = true;
    }
  }
  if (in_usage_) {  // the usage event goes on: kept to its end
    const size_t end = event_end(piece, 0);
    const std::string_view part = piece.substr(0, end);
    usage_.append(part);
    copied_ += part.size();
    in_usage_ = end == std::string_view::npos;
    at = in_usage_ ? piece.size() : end;
  }
  for (size_t key = piece.find(kUsageKey, at); key != std::string_view::npos;
       key = piece.find(kUsageKey, at)) {
    const size_t end = event_end(piece, key);
    at = end == std::string_view::npos ? piece.size() : end;
    if (null_usage(piece, key)) continue;
    const std::string_view part = piece.substr(key, at - key);
    usage_.assign(part);
    copied_ += part.size();
    in_usage_ = end == std::string_view::npos;
  }
  carry_size_ = std::min(piece.size(), sizeof carry_);
  std::memcpy(carry_, piece.data() + piece.size() - carry_size_, carry_size_);
}

std::string_view StreamEvents::feed(std::string_view piece) {
  watch_usage(piece);
  if (!strip_) return piece;
  if (held_.empty()) return strip(piece, /*bytes_are_held=*/false);
  held_.append(piece);
  copied_ += piece.size();
  return strip(held_, /*bytes_are_held=*/true);
}

std::string_view StreamEvents::strip(std::string_view bytes, bool bytes_are_held) {
  size_t whole = 0;  // the whole events' bytes
  bool usage_event = false;
  for (size_t end = event_end(bytes, 0); end != std::string_view::npos;
       end = event_end(bytes, whole)) {
    usage_event = usage_event || is_usage_event(bytes.substr(whole, end - whole));
    whole = end;
  }
  if (usage_event) {  // rebuilt without it (once a stream, at its end)
    out_.clear();
    for (size_t start = 0, end = event_end(bytes, 0); end != std::string_view::npos && end <= whole;
         start = end, end = event_end(bytes, start)) {
      const std::string_view event = bytes.substr(start, end - start);
      if (!is_usage_event(event)) out_.append(event);
    }
    copied_ += out_.size();
    held_.assign(bytes.substr(whole));  // (when `bytes` is held_ itself, assign() copes)
    copied_ += held_.size();
    return out_;
  }
  if (!bytes_are_held) {
    held_.assign(bytes.substr(whole));  // a cut event, held until whole
    copied_ += held_.size();
    return bytes.substr(0, whole);
  }
  // The held bytes go out as they are; what is cut after them stays held.
  out_.swap(held_);
  held_.assign(std::string_view(out_).substr(whole));
  copied_ += held_.size();
  out_.resize(whole);
  return out_;
}

namespace {
bool has_error_event(std::string_view bytes) {
  return bytes.find("data: {\"error\"") != std::string_view::npos ||
         bytes.find("data:{\"error\"") != std::string_view::npos;
}
}  // namespace

void ErrorEventScan::scan(std::string_view piece) {
  found_ |= has_error_event(piece);
  // Where pieces meet: the kept end of the last one, then the start of this one.
  const size_t head = std::min(piece.size(), kKept);
  std::memcpy(joint_ + kept_, piece.data(), head);
  found_ |= has_error_event(std::string_view(joint_, kept_ + head));
  if (piece.size() >= kKept) {
    std::memcpy(joint_, piece.data() + piece.size() - kKept, kKept);
    kept_ = kKept;
  } else {  // a short piece: it extends what is kept
    const size_t total = std::min(kept_ + head, kKept);
    std::memmove(joint_, joint_ + kept_ + head - total, total);
    kept_ = total;
  }
}

}  // namespace kvgate::app
