// grpc.reflection.v1.ServerReflection (proto/grpc/reflection/v1/reflection.proto): gRPC's server
// reflection under its stable name, beside the v1alpha service gRPC's own plugin serves (Debian's
// gRPC 1.51 serves only v1alpha; clients such as grpcurl and grpc-js tooling ask v1 first).
//
// Answers from the same descriptor pool as the plugin (the process's generated pool): a file by
// name, the file defining a symbol or an extension (each with its dependencies, a file sent once
// per stream), a type's extension numbers, and the services the server registers.
//
// Threading: each stream's reactor is driven by gRPC's callback threads, one operation at a time.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

namespace kvgate::app {

// The service; `services` are the full names list_services answers.
std::unique_ptr<grpc::Service> make_reflection_v1(std::vector<std::string> services);

}  // namespace kvgate::app
