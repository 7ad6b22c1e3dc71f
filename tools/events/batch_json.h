// JSON rendering of decoded KV-event batches for kvgate-events (one JSON object per batch).
#pragma once

#include <string>

#include "kvgate/events/decode.h"
#include "kvgate/events/normalize.h"
#include "kvgate/events/subscription.h"

namespace kvgate::events::tool {

// The batch as decoded (every field the wire carried) with the normalized view of each event
// (tier, router local hashes) when `normalized` is given.
void append_batch_json(const DecodedBatch& batch, const NormalizedBatch* normalized,
                       std::string* out);

// One line for `watch`: seq, live or replay, the cursor's verdict, events and drop reasons.
void append_report_json(const MessageReport& report, std::string* out);

}  // namespace kvgate::events::tool
