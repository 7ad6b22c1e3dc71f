#include "app/grpc_front.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include <fstream>
#include <sstream>

#include "app/grpc_gateway_v1.h"
#include "app/grpc_gateway_v2.h"
#include "app/grpc_reflection_v1.h"

namespace kvgate::app {

namespace {

// The services health answers for by name, beside the server as a whole ("").
constexpr std::string_view kHealthNames[] = {"kvgate.v1.Gateway", "kvgate.v2.Gateway"};
// What reflection lists: every service this server registers.
const std::vector<std::string> kServiceNames = {
    "kvgate.v2.Gateway", "kvgate.v1.Gateway", "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"};

}  // namespace

GrpcFront::GrpcFront(GrpcFrontParts parts) : parts_(std::move(parts)) {
  services_.push_back(make_gateway_v2(parts_));
  services_.push_back(make_gateway_v1(parts_));
  services_.push_back(make_reflection_v1(kServiceNames));
}

GrpcFront::~GrpcFront() { stop(); }

namespace {

Result<std::string> read_pem(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::InvalidArgumentError("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Status GrpcFront::start() {
  const GatewayConfig& c = parts_.config;
  const std::string host = c.grpc_host.empty() ? c.host : c.grpc_host;
  const std::string address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                              ":" + std::to_string(c.grpc_port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!c.tls_cert_path.empty()) {
    auto cert = read_pem(c.tls_cert_path);
    auto key = read_pem(c.tls_key_path);
    if (!cert.ok()) return cert.status();
    if (!key.ok()) return key.status();
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(tls);
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, &port_);
  for (const auto& service : services_) builder.RegisterService(service.get());
  // What calls may hold: a message past grpc_max_message_bytes is refused (RESOURCE_EXHAUSTED),
  // but gRPC reads it whole first, and with its default windows (grown by its bandwidth probe)
  // ten concurrent 100 MB messages grew the process by about 1 GB. A memory quota for the
  // transport, a fixed per-stream window and no bandwidth probe keep what such calls hold to
  // about twice the quota (requests are small: the windows cost a legitimate call nothing).
  builder.SetMaxReceiveMessageSize(static_cast<int>(c.grpc_max_message_bytes));
  grpc::ResourceQuota quota("kvgate-grpc");
  quota.Resize(c.grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
  // Clients' keepalive pings are welcome (a long generation is quiet between chunks).
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return absl::UnavailableError("--grpc-port: cannot listen on " + address);
  }
  health_thread_ = std::thread([this] { watch_readiness(); });
  return Status();
}

void GrpcFront::watch_readiness() {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const bool serving = parts_.ready();
    if (health != nullptr) {
      health->SetServingStatus(serving);
      for (std::string_view name : kHealthNames) {
        health->SetServingStatus(std::string(name), serving);
      }
    }
    cv_.wait_for(lock, std::chrono::milliseconds(500));
  }
}

void GrpcFront::drain_began() { cv_.notify_all(); }

void GrpcFront::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (health_thread_.joinable()) health_thread_.join();
  if (server_) {
    // Calls still running are cancelled after a second: their handlers see the client gone.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
  }
}

}  // namespace kvgate::app
