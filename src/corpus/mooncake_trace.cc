#include "kvgate/corpus/mooncake_trace.h"

#include <fstream>
#include <sstream>

#include "simdjson.h"

namespace kvgate::corpus {
namespace {

Result<uint64_t> unsigned_field(simdjson::dom::object& row, const char* key) {
  uint64_t v = 0;
  if (row[key].get(v) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(std::string("field \"") + key +
                                      "\" is missing or not a non-negative integer");
  }
  return v;
}

}  // namespace

Result<Trace> parse_trace(const std::string& text, const std::string& name, size_t max_rows) {
  Trace trace;
  simdjson::dom::parser parser;
  std::istringstream in(text);
  std::string line;
  size_t line_no = 0;
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError("trace " + name + " line " + std::to_string(line_no) + ": " +
                                      what);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (max_rows != 0 && trace.rows.size() >= max_rows) break;
    simdjson::dom::element doc;
    if (auto err = parser.parse(line).get(doc); err != simdjson::SUCCESS) {
      return bad(std::string("not JSON: ") + simdjson::error_message(err));
    }
    simdjson::dom::object obj;
    if (doc.get(obj) != simdjson::SUCCESS) return bad("not a JSON object");
    TraceRow row;
    auto ts = unsigned_field(obj, "timestamp");
    auto in_len = unsigned_field(obj, "input_length");
    auto out_len = unsigned_field(obj, "output_length");
    for (auto* r : {&ts, &in_len, &out_len}) {
      if (!r->ok()) return bad(std::string(r->status().message()));
    }
    row.timestamp_ms = *ts;
    row.input_length = *in_len;
    row.output_length = *out_len;
    simdjson::dom::array ids;
    if (obj["hash_ids"].get(ids) != simdjson::SUCCESS) {
      return bad("field \"hash_ids\" is missing or not an array");
    }
    for (simdjson::dom::element id : ids) {
      uint64_t v = 0;
      if (id.get(v) != simdjson::SUCCESS) return bad("a hash id is not a non-negative integer");
      // Ids are offset by (max id + 1) per duplicate copy and multiplied by the length factor.
      if (v >= (uint64_t{1} << 40)) return bad("hash id " + std::to_string(v) + " is too large");
      row.hash_ids.push_back(v);
      trace.max_hash_id = std::max(trace.max_hash_id, v);
    }
    trace.rows.push_back(std::move(row));
  }
  if (trace.rows.empty()) return absl::InvalidArgumentError("trace " + name + " has no rows");
  return trace;
}

Result<Trace> read_trace(const std::string& path, size_t max_rows) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("cannot open trace " + path);
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) return absl::DataLossError("cannot read trace " + path);
  return parse_trace(text.str(), path, max_rows);
}

}  // namespace kvgate::corpus
