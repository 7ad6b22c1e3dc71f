// The common shape of an HTTP/1.1 message, parsed without Beast when it has arrived whole.
//
// Nearly every request a client sends the gateway, and every answer an engine sends back, has one
// shape: HTTP/1.1, a few plain fields, a Content-Length, and all of it in the first read. Beast's
// parser spends about 2,800 instructions on such a head (a general state machine, every field
// name looked up among the known ones); this scan takes a fraction of that.
//
// It takes only what Beast takes the same way, and leaves everything else to Beast (nothing is
// consumed, so Beast then parses the same bytes from their start): a message must be
//   - whole in `bytes`, head and body, the head within `header_limit` and the body within
//     `body_limit`;
//   - HTTP/1.1; a request's method one Beast names and its target visible ASCII; a response's
//     status 200-599 except 204 and 304 (the statuses whose body rules differ);
//   - at most kMaxQuickFields fields, of token names and values of visible ASCII, spaces and
//     tabs, without line folds;
//   - without Connection, Proxy-Connection, Transfer-Encoding, Upgrade or Expect (fields whose
//     meaning Beast works out), with at most one Content-Length of at most 18 digits, which a
//     response must have; a request with exactly one Host, of a valid value (framing.h refuses
//     any other, after Beast has parsed it).
// What it takes, it gives as Beast would: the same fields in the same order, values trimmed of
// surrounding spaces and tabs, the same body; keep-alive holds (HTTP/1.1 without Connection).
// A differential test and a fuzz target check that against Beast's own parser.
//
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvgate/http/field_list.h"
#include "kvgate/http/message.h"

namespace kvgate::http::detail {

// More fields than this (a rare head) are Beast's to parse.
constexpr size_t kMaxQuickFields = 32;

struct QuickHead {
  Verb method = Verb::unknown;  // a request's
  std::string_view target;      // a request's, a view into the bytes parsed
  unsigned status = 0;          // a response's
  size_t head_size = 0;         // the head's bytes, its blank line included
  std::string_view body;        // a view into the bytes parsed; the message ends with it
  size_t size() const { return head_size + body.size(); }
};

// True when `bytes` begin with a whole message of the common shape: `head` is set and its fields
// are added to `fields`. False otherwise, with `fields` as it was.
bool quick_parse_request(std::string_view bytes, size_t header_limit, uint64_t body_limit,
                         QuickHead* head, FieldList* fields);
bool quick_parse_response(std::string_view bytes, size_t header_limit, uint64_t body_limit,
                          QuickHead* head, FieldList* fields);

}  // namespace kvgate::http::detail
