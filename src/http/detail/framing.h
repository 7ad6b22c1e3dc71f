// Where a request ends, by RFC 9112's rules, checked before a byte of its body is read.
//
// A request whose end two parsers could place differently is how requests are smuggled: a front
// proxy that frames by one rule and kvgate by another disagree on where the first request ends,
// and the rest runs as a second request nobody checked (TE.CL, CL.TE, TE.0). Beast frames a body
// as chunked only when chunked is the last coding and otherwise falls back to the Content-Length
// or to no body, which is lenient exactly where a front proxy is strict. So kvgate refuses every
// head whose framing is not one plain reading, and closes the connection after the answer:
//   - Transfer-Encoding: only `chunked`, alone, once, in HTTP/1.1, without a Content-Length.
//     A list whose last coding is not chunked (or names chunked twice), an empty or malformed
//     value, a second Transfer-Encoding field, one beside a Content-Length, or one in HTTP/1.0:
//     400 (RFC 9112 §6.1, §6.3). Another coding before chunked (gzip, deflate, ...): 501, the
//     status for a coding the server does not implement; kvgate decodes none.
//   - Content-Length: at most one field, of digits only (a repeated or listed length is one
//     reading for kvgate and another for some proxy): 400.
//   - Host: exactly one in HTTP/1.1, at most one in HTTP/1.0, its value free of whitespace,
//     separators and control bytes: 400 (RFC 9112 §3.2).
// Folded field lines (obs-fold) never get here: the parser refuses them (flat_parser.h).
//
// Threading: pure functions.
#pragma once

#include <optional>
#include <string_view>

#include "kvgate/http/field_list.h"

namespace kvgate::http::detail {

struct FramingRefusal {
  unsigned status = 400;    // 400 or 501
  std::string_view reason;  // for the client, a static string
};

// Whether `value` is a Host field's value as RFC 9112 §3.2 reads it (host and port, nothing that
// could be read as a second value or a path). The quick parser asks too.
bool valid_host(std::string_view value);

// Why a request head with these `fields` and HTTP version (10 or 11, as Beast counts) cannot be
// framed plainly; nullopt when it can.
std::optional<FramingRefusal> request_framing_refusal(const FieldList& fields, unsigned version);

}  // namespace kvgate::http::detail
