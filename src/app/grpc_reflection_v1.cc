#include "app/grpc_reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <unordered_set>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace kvgate::app {
namespace reflection_v1 {

namespace pb = google::protobuf;
namespace rv1 = grpc::reflection::v1;

// One reflection stream: each request read is answered by one response, then the next is read.
class ReflectionStream final
    : public grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse> {
 public:
  explicit ReflectionStream(const std::vector<std::string>& services) : services_(services) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    answer();
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  void answer() {
    response_.Clear();
    response_.set_valid_host(request_.host());
    *response_.mutable_original_request() = request_;
    const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
    switch (request_.message_request_case()) {
      case rv1::ServerReflectionRequest::kFileByFilename:
        send_file(pool->FindFileByName(request_.file_by_filename()));
        break;
      case rv1::ServerReflectionRequest::kFileContainingSymbol:
        send_file(pool->FindFileContainingSymbol(request_.file_containing_symbol()));
        break;
      case rv1::ServerReflectionRequest::kFileContainingExtension:
        send_extension_file(pool);
        break;
      case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType:
        send_extension_numbers(pool);
        break;
      case rv1::ServerReflectionRequest::kListServices:
        for (const std::string& name : services_) {
          response_.mutable_list_services_response()->add_service()->set_name(name);
        }
        break;
      default:
        error(grpc::StatusCode::UNIMPLEMENTED, "the request names no known reflection query");
    }
  }

  void send_extension_file(const pb::DescriptorPool* pool) {
    const auto& want = request_.file_containing_extension();
    const pb::Descriptor* type = pool->FindMessageTypeByName(want.containing_type());
    const pb::FieldDescriptor* ext =
        type == nullptr ? nullptr : pool->FindExtensionByNumber(type, want.extension_number());
    send_file(ext == nullptr ? nullptr : ext->file());
  }

  void send_extension_numbers(const pb::DescriptorPool* pool) {
    const pb::Descriptor* type =
        pool->FindMessageTypeByName(request_.all_extension_numbers_of_type());
    if (type == nullptr) {
      error(grpc::StatusCode::NOT_FOUND, "type not found");
      return;
    }
    std::vector<const pb::FieldDescriptor*> extensions;
    pool->FindAllExtensions(type, &extensions);
    auto* out = response_.mutable_all_extension_numbers_response();
    out->set_base_type_name(type->full_name());
    for (const pb::FieldDescriptor* e : extensions) out->add_extension_number(e->number());
  }

  // The file and those it imports, each once per stream.
  void send_file(const pb::FileDescriptor* file) {
    if (file == nullptr) {
      error(grpc::StatusCode::NOT_FOUND, "not found");
      return;
    }
    auto* out = response_.mutable_file_descriptor_response();
    std::vector<const pb::FileDescriptor*> unvisited{file};
    while (!unvisited.empty()) {
      const pb::FileDescriptor* f = unvisited.back();
      unvisited.pop_back();
      if (!sent_.insert(f->name()).second) continue;
      pb::FileDescriptorProto proto;
      f->CopyTo(&proto);
      proto.SerializeToString(out->add_file_descriptor_proto());
      for (int i = 0; i < f->dependency_count(); ++i) unvisited.push_back(f->dependency(i));
    }
  }

  void error(grpc::StatusCode code, const std::string& message) {
    response_.mutable_error_response()->set_error_code(static_cast<int32_t>(code));
    response_.mutable_error_response()->set_error_message(message);
  }

  const std::vector<std::string>& services_;
  rv1::ServerReflectionRequest request_;
  rv1::ServerReflectionResponse response_;
  std::unordered_set<std::string> sent_;  // files this stream has been sent
};

class ReflectionService final : public rv1::ServerReflection::CallbackService {
 public:
  explicit ReflectionService(std::vector<std::string> services) : services_(std::move(services)) {}

  grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* /*ctx*/) override {
    return new ReflectionStream(services_);
  }

 private:
  const std::vector<std::string> services_;
};

}  // namespace reflection_v1

std::unique_ptr<grpc::Service> make_reflection_v1(std::vector<std::string> services) {
  return std::make_unique<reflection_v1::ReflectionService>(std::move(services));
}

}  // namespace kvgate::app
