// Where the API server is and how to authenticate: a pod's service account, and kubeconfig files
// in the shapes kubectl writes, with errors that name what is missing.
#include "kvgate/kube/api_server.h"

#include <stdlib.h>

#include <string>

#include "gtest/gtest.h"
#include "kube/support/temp_dir.h"

namespace kvgate::kube {
namespace {

using kvgate::testing::TempDir;

std::string error_of(const Result<ApiServer>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

class InClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    dir_.write("token", "tok\n");
    dir_.write("ca.crt", "PEM");
    dir_.write("namespace", "fleet\n");
  }
  void TearDown() override {
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
  }
  TempDir dir_;
};

TEST_F(InClusterTest, ReadsTheEnvironmentAndTheServiceAccount) {
  Result<ApiServer> s = in_cluster(dir_.path());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->host, "10.96.0.1");
  EXPECT_EQ(s->port, 6443);
  EXPECT_EQ(s->token_file, dir_.file("token"));
  EXPECT_EQ(s->ca_file, dir_.file("ca.crt"));
  EXPECT_EQ(s->namespace_name, "fleet");
  EXPECT_TRUE(s->token.empty()) << "the file is read by the watcher, again when it changes";
  EXPECT_FALSE(s->insecure);
}

TEST_F(InClusterTest, NamesWhatIsMissing) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_NE(error_of(in_cluster(dir_.path())).find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "https", 1);
  EXPECT_NE(error_of(in_cluster(dir_.path())).find("KUBERNETES_SERVICE_PORT"), std::string::npos);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  const std::string missing = error_of(in_cluster(dir_.path() + "/nowhere"));
  EXPECT_NE(missing.find("/nowhere/token"), std::string::npos) << missing;
}

constexpr std::string_view kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: dev
  context: {cluster: dev, user: dev}
- name: prod
  context:
    cluster: prod-cluster
    user: gateway
    namespace: inference
clusters:
- name: dev
  cluster: {server: "https://dev.example:1"}
- name: prod-cluster
  cluster:
    server: https://[fd00::10]:6443
    certificate-authority: certs/ca.pem
users:
- name: dev
  user: {token: dev-token}
- name: gateway
  user:
    tokenFile: /var/run/token
)";

TEST(KubeconfigTest, TheCurrentContextsClusterAndUser) {
  TempDir dir;
  Result<ApiServer> s = from_kubeconfig(dir.write("config", std::string(kKubeconfig)));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->host, "fd00::10");
  EXPECT_EQ(s->port, 6443);
  EXPECT_EQ(s->ca_file, dir.path() + "/certs/ca.pem") << "relative to the kubeconfig's folder";
  EXPECT_EQ(s->token_file, "/var/run/token");
  EXPECT_TRUE(s->token.empty());
  EXPECT_EQ(s->namespace_name, "inference");
}

TEST(KubeconfigTest, InlineDataTokenAndInsecure) {
  TempDir dir;
  const std::string config = R"(current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters:
- name: k
  cluster:
    server: https://api.example
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
users: [{name: u, user: {token: abc}}]
)";
  Result<ApiServer> s = from_kubeconfig(dir.write("config", config));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->host, "api.example");
  EXPECT_EQ(s->port, 443);
  EXPECT_EQ(s->ca_data, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_TRUE(s->ca_file.empty());
  EXPECT_EQ(s->token, "abc");

  const std::string insecure = R"(current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: "https://10.0.0.1:8443/", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
)";
  Result<ApiServer> i = from_kubeconfig(dir.write("insecure", insecure));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_TRUE(i->insecure);
  EXPECT_EQ(i->port, 8443);
}

TEST(KubeconfigTest, ErrorsNameTheFileAndTheEntry) {
  TempDir dir;
  EXPECT_NE(error_of(from_kubeconfig(dir.file("absent"))).find("cannot be read"),
            std::string::npos);
  EXPECT_NE(error_of(from_kubeconfig(dir.write("bad", "a: [b"))).find(dir.file("bad")),
            std::string::npos);
  EXPECT_NE(
      error_of(from_kubeconfig(dir.write("nocur", "kind: Config\n"))).find("no current-context"),
      std::string::npos);

  const auto with = [&](const std::string& cluster, const std::string& user) {
    return dir.write("config",
                     "current-context: c\ncontexts: [{name: c, context: {cluster: k, "
                     "user: u}}]\nclusters: [{name: k, cluster: " +
                         cluster + "}]\nusers: [{name: u, user: " + user + "}]\n");
  };
  const std::string no_user_entry = error_of(from_kubeconfig(
      dir.write("config",
                "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: "
                "u}}]\nclusters: [{name: k, cluster: {server: 'https://a'}}]\n")));
  EXPECT_NE(no_user_entry.find("user \"u\" is not in users"), std::string::npos) << no_user_entry;
  const std::string no_server = error_of(from_kubeconfig(with("{}", "{token: t}")));
  EXPECT_NE(no_server.find("cluster \"k\""), std::string::npos) << no_server;
  EXPECT_NE(no_server.find("has no server"), std::string::npos) << no_server;
  EXPECT_NE(
      error_of(from_kubeconfig(with("{server: 'http://a:80'}", "{token: t}"))).find("only HTTPS"),
      std::string::npos);
  EXPECT_NE(error_of(from_kubeconfig(with("{server: 'https://a/k8s/clusters/x'}", "{token: t}")))
                .find("has a path"),
            std::string::npos);
  EXPECT_NE(error_of(from_kubeconfig(with("{server: 'https://a:99999'}", "{token: t}")))
                .find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of(from_kubeconfig(with("{server: 'https://a'}", "{exec: {command: aws}}")))
                .find("exec plugin, which is not supported"),
            std::string::npos);
  EXPECT_NE(
      error_of(from_kubeconfig(with("{server: 'https://a'}", "{client-certificate-data: eA==}")))
          .find("client certificates"),
      std::string::npos);
  EXPECT_NE(
      error_of(from_kubeconfig(with("{server: 'https://a'}", "{}"))).find("no token or tokenFile"),
      std::string::npos);
  EXPECT_NE(error_of(from_kubeconfig(with("{server: 'https://a', certificate-authority-data: '*'}",
                                          "{token: t}")))
                .find("not base64"),
            std::string::npos);
}

}  // namespace
}  // namespace kvgate::kube
