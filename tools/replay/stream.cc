#include "replay/stream.h"

#include "kvgate/core/clock.h"
#include "kvgate/core/log.h"
#include "simdjson.h"

namespace kvgate::replay {
namespace {

simdjson::dom::parser& thread_parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

}  // namespace

const char* oracle_source_name(OracleSource s) {
  switch (s) {
    case OracleSource::kEvents:
      return "events";
    case OracleSource::kMock:
      return "mock";
    case OracleSource::kNone:
      break;
  }
  return "none";
}

void StreamReader::on_event(std::string_view data, TimePoint now) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  simdjson::dom::element doc;
  if (thread_parser().parse(data.data(), data.size()).get(doc) != simdjson::SUCCESS ||
      !doc.is_object()) {
    ++bad_chunks_;
    KVGATE_LOG_EVERY_MS(log::get("replay"), spdlog::level::warn, 5000,
                        "row {}: a stream chunk is not a JSON object (skipped): {:.80}", rec_->row,
                        data);
    return;
  }
  if (simdjson::dom::object err; doc["error"].get(err) == simdjson::SUCCESS) {
    errored_ = true;
    std::string_view msg;
    if (err["message"].get(msg) != simdjson::SUCCESS) msg = "error event without a message";
    rec_->error_kind = "stream_error";
    rec_->error = std::string(msg);
    return;
  }
  if (rec_->response_id.empty()) {
    std::string_view id;
    if (doc["id"].get(id) == simdjson::SUCCESS) rec_->response_id = std::string(id);
  }
  simdjson::dom::array choices;
  if (doc["choices"].get(choices) == simdjson::SUCCESS) {
    for (simdjson::dom::element c : choices) {
      std::string_view text;
      if (c["text"].get(text) != simdjson::SUCCESS) {
        // Chat chunks carry their text under delta.content.
        if (c["delta"]["content"].get(text) != simdjson::SUCCESS) text = {};
      }
      if (text.empty()) continue;
      if (chunks_ == 0) {
        rec_->ttft_s = to_seconds(now - sent_);
      } else {
        rec_->itl_s.push_back(static_cast<float>(to_seconds(now - last_)));
      }
      last_ = now;
      ++chunks_;
      break;  // one content event per chunk (n = 1)
    }
  }
  simdjson::dom::object usage;
  if (doc["usage"].get(usage) == simdjson::SUCCESS) {
    uint64_t v = 0;
    rec_->has_usage = true;
    if (usage["prompt_tokens"].get(v) == simdjson::SUCCESS) rec_->usage_prompt_tokens = v;
    if (usage["completion_tokens"].get(v) == simdjson::SUCCESS) rec_->output_tokens = v;
    if (usage["prompt_tokens_details"]["cached_tokens"].get(v) == simdjson::SUCCESS) {
      rec_->cached_tokens = v;
    }
  }
}

void StreamReader::finish(TimePoint now) {
  rec_->e2e_s = to_seconds(now - sent_);
  if (!rec_->has_usage) rec_->output_tokens = chunks_;
}

}  // namespace kvgate::replay
