// What every gRPC service of the gateway shares (grpc_front.h): HTTP statuses as gRPC codes, the
// caller's credentials read as an HTTP request's, request bytes decoded (bad bytes are
// INVALID_ARGUMENT, not gRPC 1.51's UNIMPLEMENTED), and a call refused before it starts.
//
// Threading: free functions, reentrant; a Refused reactor is gRPC's until OnDone.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>  // SerializationTraits of protobuf messages

#include <optional>
#include <string>
#include <string_view>

#include "app/access.h"
#include "kvgate/http/server.h"

namespace kvgate::app::rpc {

// What an HTTP status of the gateway's handlers means to a gRPC client.
grpc::StatusCode code_for(unsigned status);
// The message of an OpenAI-shaped error body ({"error": {"message": ...}}), else the body.
std::string error_message(std::string_view body);
// What the access rules read of a call, as of an HTTP request: the caller's authorization
// metadata and address.
http::Request caller_of(grpc::CallbackServerContext* ctx);
// UNAUTHENTICATED (or what the access rules answer) for a caller the HTTP API would refuse.
std::optional<grpc::Status> refusal_of(const AccessGuard& access, const http::Request& req);
// INVALID_ARGUMENT with `message` (which names the field).
inline grpc::Status invalid(std::string message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::move(message));
}
// FAILED_PRECONDITION for a model the gateway has no tokenizer of.
grpc::Status no_tokenizer(const std::string& model);

// A request's bytes decoded; false when they are not such a message.
template <class Message>
bool decode_message(const grpc::ByteBuffer* bytes, Message* out) {
  grpc::ByteBuffer copy(*bytes);  // shares the slices; Deserialize consumes its buffer
  return grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok();
}
// An answer's bytes.
template <class Message>
void encode_message(const Message& message, grpc::ByteBuffer* out) {
  out->Clear();  // the serializer writes into an empty buffer only
  bool own = false;
  (void)grpc::SerializationTraits<Message>::Serialize(message, out, &own);
}
// The status for request bytes that are not a `Message`.
template <class Message>
grpc::Status not_a(const Message& message) {
  return invalid("the request is not a valid " + message.GetTypeName() + " message");
}

// A streamed call refused before it starts.
class Refused final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit Refused(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// A unary call: the caller's key checked, the request decoded, `method` run on it, its answer
// encoded, all before this returns.
template <class Request, class Response, class Method>
grpc::ServerUnaryReactor* unary_call(const AccessGuard& access, grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* in, grpc::ByteBuffer* out,
                                     Method&& method) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  Request request;
  Response response;
  grpc::Status status;
  if (auto refused = refusal_of(access, caller_of(ctx))) {
    status = *refused;
  } else if (!decode_message(in, &request)) {
    status = not_a(request);
  } else {
    status = method(request, &response);
    if (status.ok()) encode_message(response, out);
  }
  reactor->Finish(status);
  return reactor;
}

}  // namespace kvgate::app::rpc
