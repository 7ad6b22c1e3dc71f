// HTTPS on both sides: the server with a certificate and key, the client verifying the chain and
// the host name. Plain HTTP to a TLS port, an untrusted CA and a name the certificate does not
// carry all fail, and the server keeps serving.
#include <atomic>
#include <string>
#include <thread>

#include "boost/asio/connect.hpp"
#include "boost/asio/redirect_error.hpp"
#include "boost/asio/ssl/stream.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/write.hpp"
#include "gtest/gtest.h"
#include "http/test_util.h"
#include "kvgate/http/client.h"
#include "kvgate/http/server.h"
#include "support/test_certs.h"

namespace kvgate::http {
namespace {

namespace net = boost::asio;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    certs_ = kvgate::testing::make_test_certs();
    pool_.start();
  }
  void TearDown() override {
    if (server_) server_->stop();
    pool_.stop();
  }
  void start(const std::string& address = "127.0.0.1", bool tickets = false, bool rsa = false) {
    server_ = std::make_unique<Server>(
        pool_, ServerOptions{.address = address,
                             .tls_cert_path = rsa ? certs_.rsa_server_cert : certs_.server_cert,
                             .tls_key_path = rsa ? certs_.rsa_server_key : certs_.server_key,
                             .tls_session_tickets = tickets});
    server_->route(Verb::get, "/hello", [](const Request&, Responder& r) -> net::awaitable<void> {
      Response out = Response::text(200, "hello over tls");
      (void)co_await r.send(std::move(out));
    });
    server_->route(Verb::get, "/events", [](const Request&, Responder& r) -> net::awaitable<void> {
      if (!(co_await r.start_sse()).ok()) co_return;
      for (int i = 0; i < 3; ++i) {
        const std::string event = "{\"n\":" + std::to_string(i) + "}";
        if (!(co_await r.write_sse(event)).ok()) co_return;
      }
      (void)co_await r.finish();
    });
    server_->route(
        Verb::get, "/slow", [this](const Request&, Responder& r) -> net::awaitable<void> {
          net::steady_timer work(co_await net::this_coro::executor, std::chrono::seconds(5));
          {
            const DisconnectWatch watch = r.watch_disconnect([&] { work.cancel(); });
            boost::system::error_code ec;
            co_await work.async_wait(net::redirect_error(net::use_awaitable, ec));
            if (watch.fired()) {
              ++aborted_;
              co_return;
            }
          }
          Response out = Response::text(200, "done");
          (void)co_await r.send(std::move(out));
        });
    ASSERT_TRUE(server_->start().ok());
  }
  ClientOptions trusting(const std::string& ca) {
    auto tls = make_client_tls(ca);
    EXPECT_TRUE(tls.ok()) << tls.status();
    return ClientOptions{.tls = *tls};
  }

  std::atomic<int> aborted_{0};
  kvgate::testing::TestCerts certs_;
  IoPool pool_{1};
  std::unique_ptr<Server> server_;
};

TEST_F(TlsTest, AVerifiedClientIsServedAndKeepsItsConnection) {
  start();
  SyncClient c("127.0.0.1", server_->port(), trusting(certs_.ca_cert));
  for (int i = 0; i < 3; ++i) {
    auto r = c.get("/hello");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200u);
    EXPECT_EQ(r->body, "hello over tls");
  }
  EXPECT_EQ(c.connects(), 1u) << "keep-alive holds over TLS";
  SyncClient by_name("localhost", server_->port(), trusting(certs_.ca_cert));
  auto named = by_name.get("/hello");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->status, 200u);
}

TEST_F(TlsTest, StreamedEventsArriveWhole) {
  start();
  SyncClient c("127.0.0.1", server_->port(), trusting(certs_.ca_cert));
  std::string body;
  auto r = c.stream(ClientRequest{.method = Verb::get, .target = "/events"},
                    [&](std::string_view piece) {
                      body += piece;
                      return absl::OkStatus();
                    });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(body, "data: {\"n\":0}\n\ndata: {\"n\":1}\n\ndata: {\"n\":2}\n\n");
}

TEST_F(TlsTest, AnUntrustedCertificateIsRefused) {
  start();
  SyncClient c("127.0.0.1", server_->port(), trusting(certs_.other_ca_cert));
  auto r = c.get("/hello");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("TLS handshake"), std::string::npos)
      << r.status();
  // The server counts the failed handshake and serves the next client.
  EXPECT_TRUE(testing::wait_until([&] { return server_->stats().tls_handshake_failures >= 1; }));
  SyncClient good("127.0.0.1", server_->port(), trusting(certs_.ca_cert));
  auto ok = good.get("/hello");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->status, 200u);
}

TEST_F(TlsTest, ACertificateForAnotherNameIsRefused) {
  // Listening on every loopback address; the certificate names 127.0.0.1 and localhost only.
  start("0.0.0.0");
  SyncClient c("127.0.0.2", server_->port(), trusting(certs_.ca_cert));
  auto r = c.get("/hello");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("TLS handshake"), std::string::npos)
      << r.status();
}

TEST_F(TlsTest, PlainHttpToATlsPortFailsAndTheServerStaysUp) {
  start();
  SyncClient plain("127.0.0.1", server_->port(),
                   ClientOptions{.request_timeout = std::chrono::seconds(5)});
  auto r = plain.get("/hello");
  EXPECT_FALSE(r.ok() && r->status == 200u);
  EXPECT_TRUE(testing::wait_until([&] { return server_->stats().tls_handshake_failures >= 1; }));
  SyncClient good("127.0.0.1", server_->port(), trusting(certs_.ca_cert));
  auto ok = good.get("/hello");
  ASSERT_TRUE(ok.ok()) << ok.status();
}

TEST_F(TlsTest, AClientThatClosesWithCloseNotifyIsNoticedWhileItsHandlerWaits) {
  start();
  net::io_context ctx;
  auto tls = make_client_tls(certs_.ca_cert);
  ASSERT_TRUE(tls.ok());
  net::ssl::stream<net::ip::tcp::socket> s(ctx, **tls);
  s.next_layer().connect({net::ip::make_address("127.0.0.1"), server_->port()});
  s.handshake(net::ssl::stream_base::client);
  const std::string req = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  net::write(s, net::buffer(req));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // close_notify alone, the TCP connection left open: the alert itself says the client is gone.
  // (The shutdown then waits for the server's own close_notify, which does not come.)
  s.async_shutdown([](boost::system::error_code) {});
  ctx.run_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(testing::wait_until([&] { return aborted_.load() == 1; }, std::chrono::seconds(3)))
      << "the watch did not see the client's close_notify";
}

// What a client that offers only `ciphers` (TLS 1.2, "" for TLS 1.3 with its defaults) gets:
// whether the handshake and a request went through, and whether it holds a session ticket.
struct Offer {
  bool served = false;
  bool ticket = false;
};
Offer offer(uint16_t port, const std::string& ca, const char* ciphers) {
  net::io_context ctx;
  net::ssl::context tls(net::ssl::context::tls_client);
  tls.load_verify_file(ca);
  tls.set_verify_mode(net::ssl::verify_peer);
  const bool v12 = *ciphers != '\0';
  SSL_CTX_set_min_proto_version(tls.native_handle(), v12 ? TLS1_2_VERSION : TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(tls.native_handle(), v12 ? TLS1_2_VERSION : TLS1_3_VERSION);
  if (v12) SSL_CTX_set_cipher_list(tls.native_handle(), ciphers);
  net::ssl::stream<net::ip::tcp::socket> stream(ctx, tls);
  boost::system::error_code ec;
  stream.next_layer().connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (!ec) stream.handshake(net::ssl::stream_base::client, ec);
  if (ec) return {};
  const std::string req = "GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  net::write(stream, net::buffer(req), ec);
  std::string got;
  char buf[4096];
  while (!ec) got.append(buf, stream.read_some(net::buffer(buf), ec));  // TLS 1.3 tickets too
  return {.served = got.find("hello over tls") != std::string::npos,
          .ticket = SSL_SESSION_has_ticket(SSL_get_session(stream.native_handle())) == 1};
}

// For an RSA key and an ECDSA key alike, TLS 1.2 takes ECDHE with AES-GCM or ChaCha20-Poly1305
// only: no static RSA key exchange, no finite-field DHE, no CBC, no SHA-1 MAC. No session ticket
// is issued, in TLS 1.2 or 1.3.
TEST_F(TlsTest, Tls12TakesForwardSecretAeadSuitesOnlyAndNoTicketsAreIssued) {
  struct Key {
    bool rsa;
    std::vector<const char*> weak, strong;
  };
  const std::vector<Key> keys = {
      {true,
       {"AES128-SHA", "AES256-GCM-SHA384", "AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA",
        "ECDHE-RSA-AES256-SHA384", "DHE-RSA-AES128-GCM-SHA256"},
       {"ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305",
        ""}},
      {false,
       {"ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384", "ECDHE-ECDSA-AES128-SHA256"},
       {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305", ""}},
  };
  for (const Key& k : keys) {
    start("127.0.0.1", /*tickets=*/false, k.rsa);
    for (const char* weak : k.weak) {
      EXPECT_FALSE(offer(server_->port(), certs_.ca_cert, weak).served) << weak << " accepted";
    }
    for (const char* strong : k.strong) {
      const Offer o = offer(server_->port(), certs_.ca_cert, strong);
      const char* name = *strong ? strong : "TLS 1.3";
      EXPECT_TRUE(o.served) << name;
      EXPECT_FALSE(o.ticket) << name << " was given a session ticket";
    }
    server_->stop();
    server_.reset();
  }
}

TEST_F(TlsTest, SessionTicketsWhenAsked) {
  start("127.0.0.1", /*tickets=*/true);
  EXPECT_TRUE(offer(server_->port(), certs_.ca_cert, "ECDHE-ECDSA-AES128-GCM-SHA256").ticket);
  EXPECT_TRUE(offer(server_->port(), certs_.ca_cert, "").ticket) << "TLS 1.3";
}

TEST_F(TlsTest, MissingFilesAreAStartupErrorNamingThem) {
  Server s(pool_, ServerOptions{.tls_cert_path = certs_.dir + "/absent.pem",
                                .tls_key_path = certs_.server_key});
  const Status st = s.start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("absent.pem"), std::string::npos) << st;
  Server half(pool_, ServerOptions{.tls_cert_path = certs_.server_cert});
  EXPECT_FALSE(half.start().ok());
  EXPECT_FALSE(make_client_tls(certs_.dir + "/absent-ca.pem").ok());
}

}  // namespace
}  // namespace kvgate::http
