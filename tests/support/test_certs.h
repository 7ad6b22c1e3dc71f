// Throwaway PEM files for TLS tests, made in-process with OpenSSL: a CA, a server certificate it
// signs for "localhost" and 127.0.0.1 (not 127.0.0.2, so a test can connect to a name the
// certificate does not carry), and a second, unrelated CA a client can wrongly trust.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace kvgate::testing {

// Owns its directory: removed with it.
struct TestCerts {
  TestCerts() = default;
  TestCerts(TestCerts&& o) noexcept { *this = std::move(o); }
  TestCerts& operator=(TestCerts&& o) noexcept {
    if (this != &o) {
      remove();
      dir = std::exchange(o.dir, {});
      ca_cert = std::move(o.ca_cert);
      other_ca_cert = std::move(o.other_ca_cert);
      server_cert = std::move(o.server_cert);
      server_key = std::move(o.server_key);
      rsa_server_cert = std::move(o.rsa_server_cert);
      rsa_server_key = std::move(o.rsa_server_key);
    }
    return *this;
  }
  ~TestCerts() { remove(); }

  std::string dir;
  std::string ca_cert;        // the CA that signed server_cert
  std::string other_ca_cert;  // a CA that signed nothing here
  std::string server_cert;    // CN and SANs: localhost, 127.0.0.1
  std::string server_key;
  // The same names on an RSA key, signed by the same CA (the suites offered depend on the key).
  std::string rsa_server_cert;
  std::string rsa_server_key;

 private:
  void remove() {
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    dir.clear();
  }
};

namespace detail {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
using Cert = std::unique_ptr<X509, CertFree>;

inline void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificate: ") + what);
}

inline void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  check(ext != nullptr, "extension");
  check(X509_add_ext(cert, ext, -1) == 1, "add extension");
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named `cn`, signed by `issuer_key` (itself when `issuer` is null).
inline Cert make_cert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key,
                      long serial, bool ca, const char* san) {
  Cert cert(X509_new());
  check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 7 * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_extension(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  if (san != nullptr) add_extension(cert.get(), signer, NID_subject_alt_name, san);
  check(X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0, "sign");
  return cert;
}

inline void write_cert(const std::string& path, X509* cert) {
  FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, "open certificate file");
  const bool ok = PEM_write_X509(f, cert) == 1;
  std::fclose(f);
  check(ok, "write certificate");
}

inline void write_key(const std::string& path, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  check(f != nullptr, "open key file");
  const bool ok = PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  std::fclose(f);
  check(ok, "write key");
}

}  // namespace detail

// Writes the files into a new directory under the system's temporary directory.
inline TestCerts make_test_certs() {
  using namespace detail;
  std::string tmpl = (std::filesystem::temp_directory_path() / "kvgate-certs-XXXXXX").string();
  check(mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
  TestCerts out;
  out.dir = tmpl;
  out.ca_cert = out.dir + "/ca.pem";
  out.other_ca_cert = out.dir + "/other-ca.pem";
  out.server_cert = out.dir + "/server.pem";
  out.server_key = out.dir + "/server-key.pem";
  out.rsa_server_cert = out.dir + "/rsa-server.pem";
  out.rsa_server_key = out.dir + "/rsa-server-key.pem";

  Key ca_key(EVP_EC_gen("P-256"));
  Key other_key(EVP_EC_gen("P-256"));
  Key server_key(EVP_EC_gen("P-256"));
  Key rsa_key(EVP_RSA_gen(2048));
  check(ca_key && other_key && server_key && rsa_key, "key generation");
  Cert ca = make_cert(ca_key.get(), "kvgate test CA", nullptr, ca_key.get(), 1, true, nullptr);
  Cert other =
      make_cert(other_key.get(), "kvgate other CA", nullptr, other_key.get(), 2, true, nullptr);
  Cert server = make_cert(server_key.get(), "localhost", ca.get(), ca_key.get(), 3, false,
                          "DNS:localhost,IP:127.0.0.1");
  write_cert(out.ca_cert, ca.get());
  write_cert(out.other_ca_cert, other.get());
  Cert rsa_server = make_cert(rsa_key.get(), "localhost", ca.get(), ca_key.get(), 4, false,
                              "DNS:localhost,IP:127.0.0.1");
  write_cert(out.server_cert, server.get());
  write_key(out.server_key, server_key.get());
  write_cert(out.rsa_server_cert, rsa_server.get());
  write_key(out.rsa_server_key, rsa_key.get());
  return out;
}

}  // namespace kvgate::testing
