#include "kvgate/http/sse.h"

#include <algorithm>
#include <cstring>

namespace kvgate::http {

void SseParser::feed(std::string_view bytes, const OnData& on_data) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      return;
    }
    std::string_view piece = bytes.substr(0, nl);
    bytes.remove_prefix(nl + 1);
    if (!partial_.empty()) {
      partial_.append(piece);
      std::string full = std::move(partial_);
      partial_.clear();
      line(full, on_data);
    } else {
      line(piece, on_data);
    }
  }
}

void SseParser::line(std::string_view l, const OnData& on_data) {
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  if (l.empty()) {
    if (has_data_) {
      ++events_;
      if (data_ == "[DONE]") done_ = true;
      on_data(data_);
    }
    data_.clear();
    has_data_ = false;
    return;
  }
  if (l.front() == ':') return;
  size_t colon = l.find(':');
  std::string_view field = l.substr(0, colon);
  if (field != "data") return;
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

void SseEventCounter::classify(std::string_view rest, bool line_ended) {
  const size_t take = std::min(rest.size(), kPrefix - prefix_size_);
  std::memcpy(prefix_ + prefix_size_, rest.data(), take);
  prefix_size_ = static_cast<uint8_t>(prefix_size_ + take);
  const bool whole = line_ended && take == rest.size();  // the whole line is in prefix_
  std::string_view seen(prefix_, prefix_size_);
  if (whole && !seen.empty() && seen.back() == '\r') seen.remove_suffix(1);
  constexpr std::string_view kData = "data:";
  if (seen.substr(0, kData.size()) == kData) {
    data_line_ = true;
  } else if (whole) {
    data_line_ = seen == kData.substr(0, 4);  // "data" alone: a data line with no value
  } else if (kData.substr(0, seen.size()) == seen || (seen == "data\r" && !line_ended)) {
    return;  // undecided: a prefix of "data:", or "data" and a CR the next piece may end
  } else {
    data_line_ = false;
  }
  classified_ = true;
}

size_t SseEventCounter::feed(std::string_view bytes) {
  size_t completed = 0;
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const std::string_view line = bytes.substr(0, nl);
    const bool ended = nl != std::string_view::npos;
    if (!classified_) classify(line, ended);
    if (!line_has_text_) {
      line_has_text_ = line.find_first_not_of('\r') != std::string_view::npos;
    }
    if (!ended) break;
    if (!line_has_text_) {  // a blank line ends the event
      if (event_has_data_) ++completed;
      event_has_data_ = false;
    } else if (data_line_) {
      event_has_data_ = true;
    }
    classified_ = line_has_text_ = data_line_ = false;
    prefix_size_ = 0;
    bytes.remove_prefix(nl + 1);
  }
  events_ += completed;
  return completed;
}

}  // namespace kvgate::http
