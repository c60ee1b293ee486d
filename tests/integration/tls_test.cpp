// TLS to a real redis-server (its tls-port, with certificates made for the test run,
// tests/support/test_pki.hpp): locking over rediss://, one handshake per pooled connection,
// client certificates, and every way a certificate can fail, each a clear error within the
// timeouts and never a fall-back to plain text.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fixtures.hpp"
#include "redis/connection.hpp"
#include "redis/fan_out.hpp"
#include "redis/scripts.hpp"
#include "redis/sha1.hpp"
#include "tcp_proxy.hpp"
#include "test_pki.hpp"
#include "tls_fixtures.hpp"

namespace dlock::test {
namespace {

// One single backend on the server's TLS port, trusting the test CA.
Config tls_config(const RedisServer& server) {
  Config config = single_node_config(server);
  BackendConfig& backend = config.backends["default"];
  backend.endpoints = {Endpoint{server.host(), server.tls_port()}};
  use_test_tls(backend, /*client_cert=*/false);
  return config;
}

long long connections_received(RedisServer& server) {
  const std::string info = RedisAdmin(server).string({"INFO", "stats"}).value_or("");
  const std::string field = "total_connections_received:";
  return std::stoll(info.substr(info.find(field) + field.size()));
}

TEST(Tls, LocksOverRedissWithOneHandshakePerPooledConnection) {
  RedisServer server(good_server());
  server.start();
  Config config = tls_config(server);
  config.backends["default"].pool_size = 2;
  Client client(config);
  ASSERT_TRUE(client.acquire("warm-up", settings(5s)));  // the pool and the subscriber
  const long long before = connections_received(server);
  std::uint64_t previous = 0;
  for (int i = 0; i < 200; ++i) {
    Lease lease = client.acquire("order:1", settings(5s));
    ASSERT_TRUE(lease) << lease.error();
    ASSERT_GT(lease.token(), previous);
    previous = lease.token();
    ASSERT_EQ(lease.release(), ReleaseStatus::kReleased);
  }
  // Each TLS connection is one handshake: 200 cycles open none beyond the pool's.
  EXPECT_LE(connections_received(server) - before, 2);
}

TEST(Tls, AClientCertificateIsShownWhereTheServerAsksForOne) {
  RedisServer server(good_server(/*auth_clients=*/true));
  server.start();
  Config without = tls_config(server);
  Lease refused = Client(without).acquire("job", settings(5s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(refused.error().find("TLS"), std::string::npos) << refused.error();
  EXPECT_TRUE(names_missing_client_certificate(refused.error())) << refused.error();

  Config with = tls_config(server);
  use_test_tls(with.backends["default"], /*client_cert=*/true);
  Lease lease = Client(with).acquire("job", settings(5s));
  EXPECT_TRUE(lease) << lease.error();
}

struct BadCertificate {
  const char* name;
  std::string cert, key;
  std::string server_name;
  std::string reason;
};

class TlsRefusal : public ::testing::TestWithParam<int> {};

std::vector<BadCertificate> bad_certificates() {
  const TestPki& pki = test_pki();
  return {
      {"signed by an unknown CA", pki.stranger_cert, pki.stranger_key, "",
       "unable to get local issuer certificate"},
      {"expired", pki.expired_cert, pki.expired_key, "", "certificate has expired"},
      {"for another name", pki.wrong_name_cert, pki.wrong_name_key, "", "IP address mismatch"},
      {"checked against server_name", pki.server_cert, pki.server_key, "other.example",
       "hostname mismatch"},
  };
}

TEST_P(TlsRefusal, IsAClearErrorWithinTheTimeoutsAndNoPlainTextAttempt) {
  const BadCertificate bad = bad_certificates().at(static_cast<std::size_t>(GetParam()));
  RedisServer server(tls_server(bad.cert, bad.key));
  server.start();
  Config config = tls_config(server);
  config.backends["default"].tls.server_name = bad.server_name;
  const long long before = connections_received(server);
  const auto started = Clock::now();
  Lease lease = Client(config).acquire("job", settings(5s));
  EXPECT_LT(elapsed_ms(started), 500 + 500 + 200);
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable) << bad.name;
  EXPECT_NE(lease.error().find("TLS: the certificate of 127.0.0.1:"), std::string::npos)
      << lease.error();
  EXPECT_NE(lease.error().find(bad.reason), std::string::npos) << lease.error();
  // The server saw the attempts, and none in plain text (which Redis logs as "wrong version
  // number" on a TLS port).
  EXPECT_GE(connections_received(server) - before, 1);
  EXPECT_EQ(server.log_tail(200).find("wrong version number"), std::string::npos)
      << server.log_tail(200);
}

std::string refusal_name(const ::testing::TestParamInfo<int>& info) {
  static const char* const kNames[] = {"UnknownCa", "Expired", "WrongName", "ServerNameMismatch"};
  return kNames[info.param];
}

INSTANTIATE_TEST_SUITE_P(Certificates, TlsRefusal, ::testing::Range(0, 4), refusal_name);

TEST(Tls, VerifyOffAcceptsAnyCertificate) {
  RedisServer server(tls_server(test_pki().stranger_cert, test_pki().stranger_key));
  server.start();
  Config config = tls_config(server);
  config.backends["default"].tls.verify = false;
  Lease lease = Client(config).acquire("job", settings(5s));
  EXPECT_TRUE(lease) << lease.error();
}

TEST(Tls, APlainTextServerBehindRedissIsAnErrorWithinTheTimeouts) {
  RedisServer server;
  server.start();
  Config config = single_node_config(server);
  config.backends["default"].tls.enabled = true;
  config.backends["default"].tls.ca_file = test_pki().ca_file;
  const auto started = Clock::now();
  Lease lease = Client(config).acquire("job", settings(5s));
  EXPECT_LT(elapsed_ms(started), 500 + 500 + 200);
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(lease.error().find("TLS"), std::string::npos) << lease.error();
  EXPECT_NE(lease.error().find("is it a TLS port?"), std::string::npos) << lease.error();
}

TEST(Tls, FilesThatCannotBeUsedFailInitNamingTheKey) {
  RedisServer server(good_server());
  server.start();
  Config encrypted = tls_config(server);
  encrypted.backends["default"].tls.cert_file = test_pki().client_cert;
  encrypted.backends["default"].tls.key_file = test_pki().client_key_encrypted;
  try {
    Client client(encrypted);
    FAIL() << "an encrypted key was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("backends.default.tls: cannot load key_file"), std::string::npos) << what;
    EXPECT_EQ(what.find("PRIVATE KEY"), std::string::npos) << what;
  }
  Config not_a_ca = tls_config(server);
  not_a_ca.backends["default"].tls.ca_file = test_pki().client_key;  // a key, no certificate
  EXPECT_THROW(Client{not_a_ca}, ConfigError);
}

// tls_config() trusting `copy`, a copy of the CA file `from`, for a test to replace.
Config with_ca_copy(const RedisServer& server, const std::string& from,
                    const std::filesystem::path& copy) {
  std::filesystem::copy_file(from, copy);
  Config config = tls_config(server);
  config.backends["default"].tls.ca_file = copy.string();
  return config;
}

TEST(Tls, AReplacedCaFileIsReadByTheNextConnection) {
  RedisServer server(good_server());
  server.start();
  const std::filesystem::path ca = server.dir() / "rotated-ca.crt";
  const Config config = with_ca_copy(server, test_pki().other_ca_file, ca);
  Client client(config);
  Lease refused = client.acquire("job", settings(5s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(refused.error().find("did not verify"), std::string::npos) << refused.error();

  std::filesystem::copy_file(test_pki().ca_file, ca,
                             std::filesystem::copy_options::overwrite_existing);
  Lease lease = client.acquire("job", settings(5s));
  EXPECT_TRUE(lease) << lease.error();
}

TEST(Tls, AReplacedFileThatCannotBeUsedKeepsThePreviousSettings) {
  RedisServer server(good_server());
  server.start();
  const std::filesystem::path ca = server.dir() / "renewed-ca.crt";
  const Config config = with_ca_copy(server, test_pki().ca_file, ca);
  Client client(config);
  ASSERT_TRUE(client.acquire("job", settings(5s)));
  { std::ofstream(ca, std::ios::trunc) << "half-written\n"; }  // caught mid-renewal
  LogCapture log;
  const BackendConfig& backend = config.backends.at("default");
  std::string error;
  for (int i = 0; i < 3; ++i) {  // new connections, not the client's pooled one
    auto conn = internal::Connection::open({server.host(), server.tls_port()}, backend, error);
    ASSERT_TRUE(conn) << error;
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("TLS files changed but cannot be used"), std::string::npos) << text;
  EXPECT_EQ(text.find("TLS files changed"), text.rfind("TLS files changed")) << "logged once";
}

TEST(Tls, NeitherThePasswordNorKeyMaterialReachesTheLog) {
  RedisServerOptions options = good_server();
  options.password = "s3cr3t-pw";
  RedisServer server(options);
  server.start();
  LogCapture log;
  Config wrong = tls_config(server);
  wrong.backends["default"].password = "wrong-pw-123";
  Lease refused = Client(wrong).acquire("job", settings(5s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_EQ(refused.error().find("wrong-pw-123"), std::string::npos) << refused.error();
  const std::string text = log.text() + refused.error();
  EXPECT_EQ(text.find("wrong-pw-123"), std::string::npos) << text;
  EXPECT_EQ(text.find("PRIVATE KEY"), std::string::npos) << text;
}

double thread_cpu_ms() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
}

// OpenSSL holding part of a record is not a reply on its way: the wait goes to the socket,
// bounded by the command timeout, and does not spin.
TEST(Tls, ARecordArrivingInPiecesIsCutOffAtTheCommandTimeoutWithoutSpinning) {
  RedisServer server(good_server());
  server.start();
  ASSERT_TRUE(RedisAdmin(server).ok({"SET", "big", std::string(4000, 'x')}));
  TcpProxy proxy(server.host(), server.tls_port());
  const BackendConfig backend = tls_config(server).backends["default"];  // 500 ms
  std::string error;
  auto conn = internal::Connection::open({server.host(), proxy.port()}, backend, error);
  ASSERT_TRUE(conn) << error;
  proxy.trickle();  // 4 KB at a byte every 5 ms: 20 s
  const double cpu_before = thread_cpu_ms();
  const auto started = Clock::now();
  const internal::Reply reply = conn->command({"GET", "big"});
  EXPECT_EQ(reply.status(), internal::Reply::Status::kTimeout) << reply.error();
  EXPECT_LT(elapsed_ms(started), 1500);
  EXPECT_LT(thread_cpu_ms() - cpu_before, 250.0) << "the wait spun";
}

// One connection to the server's TLS port, as a backend configured by tls_config() opens it.
std::unique_ptr<internal::Connection> open_tls_connection(const RedisServer& server) {
  const BackendConfig backend = tls_config(server).backends["default"];
  std::string error;
  auto conn = internal::Connection::open({server.host(), server.tls_port()}, backend, error);
  EXPECT_TRUE(conn) << error;
  return conn;
}

// QUIT is answered, then the server closes (over TLS with a close_notify behind the reply):
// the replies that came before the close are the caller's, not a failure.
TEST(Tls, RepliesThatCameBeforeTheServerClosedAreDelivered) {
  RedisServer server(good_server());
  server.start();
  auto conn = open_tls_connection(server);
  ASSERT_TRUE(conn);
  conn->append({"PING"});
  conn->append({"ECHO", "second"});
  conn->append({"QUIT"});
  ASSERT_TRUE(conn->flush());
  std::this_thread::sleep_for(50ms);  // all three replies and the close are in by now
  const internal::Reply ping = conn->read_reply();
  const internal::Reply echo = conn->read_reply();
  const internal::Reply quit = conn->read_reply();
  EXPECT_EQ(ping.text(), "PONG") << ping.error();
  EXPECT_EQ(echo.text(), "second") << echo.error();
  EXPECT_EQ(quit.text(), "OK") << quit.error();
}

// A reply far larger than one TLS record, pipelined before a small one: OpenSSL may hold
// decrypted bytes that poll() cannot see, and neither reply may wait for the deadline.
TEST(Tls, AFanOutReadsALargeReplyAndTheOneBehindItWellBeforeTheDeadline) {
  RedisServer server(good_server());
  server.start();
  auto conn = open_tls_connection(server);
  ASSERT_TRUE(conn);
  const std::string big_text = "return string.rep('x', 200000)";
  const std::string small_text = "return 'small'";
  const internal::Script big{"big", big_text, internal::sha1_hex(big_text)};
  const internal::Script small{"small", small_text, internal::sha1_hex(small_text)};
  const internal::ScriptCall big_call{&big, {}, {}}, small_call{&small, {}, {}};
  std::vector<internal::FanOutRequest> requests(1);
  requests[0].conn = conn.get();
  requests[0].calls = {&big_call, &small_call, &big_call, &small_call};
  const auto started = Clock::now();
  internal::fan_out(requests, started + 5s);  // EVALSHA, NOSCRIPT, then EVAL
  EXPECT_LT(elapsed_ms(started), 2000);
  ASSERT_EQ(requests[0].replies.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(requests[0].replies[i].ok()) << requests[0].replies[i].error();
    EXPECT_EQ(requests[0].replies[i].text().size(), i % 2 == 0 ? 200000u : 5u);
  }
}

}  // namespace
}  // namespace dlock::test
