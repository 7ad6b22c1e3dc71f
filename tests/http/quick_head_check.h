// The quick parser against Beast's own, for the unit test and the fuzz target: whatever
// quick_parse_request / quick_parse_response take, Beast's basic_parser must parse to the same
// message (request line or status, fields in the order the parser hands them over, body, the same
// number of bytes, keep-alive). Its fields are read through FlatParser, which stores them in that
// order (a Beast message would regroup fields of one name).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "boost/asio/buffer.hpp"
#include "boost/beast/http/error.hpp"
#include "http/detail/flat_parser.h"
#include "http/detail/quick_head.h"
#include "kvgate/http/field_list.h"

namespace kvgate::http::detail {

// The quick parser for a request or for an answer.
inline bool quick_parse(bool request, std::string_view bytes, size_t header_limit,
                        uint64_t body_limit, QuickHead* head, FieldList* fields) {
  return request ? quick_parse_request(bytes, header_limit, body_limit, head, fields)
                 : quick_parse_response(bytes, header_limit, body_limit, head, fields);
}

// What is wrong with the quick parser's answer for `bytes`, or "" when it took nothing (its
// fields left as they were) or took what Beast takes, the same way.
template <bool kIsRequest>
std::string quick_disagreement(std::string_view bytes, size_t header_limit = 8192,
                               uint64_t body_limit = 1 << 20) {
  FieldList fields;
  fields.add("x-before", "kept");
  QuickHead quick;
  if (!quick_parse(kIsRequest, bytes, header_limit, body_limit, &quick, &fields)) {
    if (fields.size() != 1 || fields[0].value != "kept") return "fields changed on a refusal";
    return "";
  }
  FieldList beast_fields;
  std::string beast_body;
  FlatParser<kIsRequest> beast(&beast_fields);
  beast.collect_body(&beast_body);
  beast.header_limit(static_cast<uint32_t>(header_limit));
  beast.body_limit(body_limit);
  beast.eager(true);
  boost::system::error_code ec;
  const size_t used = beast.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec) return "taken, but Beast refuses it: " + ec.message();
  if (!beast.is_done()) return "taken, but Beast waits for more";
  if (used != quick.size()) {
    return "sizes differ: Beast " + std::to_string(used) + ", quick " +
           std::to_string(quick.size());
  }
  if constexpr (kIsRequest) {
    if (beast.method() != quick.method) return "methods differ";
    if (beast.target() != quick.target) return "targets differ";
  } else {
    if (beast.status() != quick.status) return "statuses differ";
  }
  if (!beast.keep_alive()) return "Beast would close the connection";
  if (beast_body != quick.body) return "bodies differ";
  if (beast_fields.size() + 1 != fields.size()) return "the field counts differ";
  for (size_t i = 0; i < beast_fields.size(); ++i) {
    const FieldList::Field ours = fields[i + 1];
    const FieldList::Field theirs = beast_fields[i];
    if (ours.name != theirs.name || ours.value != theirs.value) {
      return "field " + std::to_string(i) + " differs: " + std::string(ours.name) + ": " +
             std::string(ours.value) + " vs " + std::string(theirs.name) + ": " +
             std::string(theirs.value);
    }
  }
  return "";
}

}  // namespace kvgate::http::detail
