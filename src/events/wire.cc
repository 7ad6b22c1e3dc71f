#include "kvgate/events/wire.h"

namespace kvgate::events {

std::string_view wire_format_name(WireFormat f) {
  switch (f) {
    case WireFormat::kVllmArray:
      return "vllm-array";
    case WireFormat::kVllmMap:
      return "vllm-map";
    case WireFormat::kSglangArray:
      return "sglang";
    case WireFormat::kSglangMap:
      return "sglang-map";
  }
  return "unknown";
}

std::optional<WireFormat> parse_wire_format(std::string_view s) {
  for (WireFormat f : kAllWireFormats) {
    if (wire_format_name(f) == s) return f;
  }
  if (s == "sglang-array") return WireFormat::kSglangArray;
  return std::nullopt;
}

}  // namespace kvgate::events
