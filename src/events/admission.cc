#include "kvgate/events/admission.h"

namespace kvgate::events {

std::string_view resync_reason_name(ResyncReason r) {
  switch (r) {
    case ResyncReason::kNoReplayEndpoint:
      return "no_replay_endpoint";
    case ResyncReason::kReplayTimeout:
      return "replay_timeout";
    case ResyncReason::kReplayWindow:
      return "replay_window";
    case ResyncReason::kReplayIncomplete:
      return "replay_incomplete";
    case ResyncReason::kBufferOverflow:
      return "buffer_overflow";
    case ResyncReason::kLostDownstream:
      return "lost_downstream";
  }
  return "unknown";
}

}  // namespace kvgate::events
