#include "kvgate/http/sse.h"

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

}  // namespace kvgate::http
