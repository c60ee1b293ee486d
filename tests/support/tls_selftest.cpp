// Tests of the harness's TLS side: the test PKI, TLS servers, and TLS sentinel and cluster
// groups, checked with OpenSSL's own verification and with redis-cli over TLS.
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "redis_groups.hpp"
#include "redis_process.hpp"
#include "test_pki.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<X509, decltype(&X509_free)> load_cert(const std::string& path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> file(std::fopen(path.c_str(), "r"), &std::fclose);
  EXPECT_TRUE(file) << path;
  X509* cert = file ? PEM_read_X509(file.get(), nullptr, nullptr, nullptr) : nullptr;
  return {cert, &X509_free};
}

// The key in `path`, decrypted with `password` (none: a callback that offers no password,
// so OpenSSL never prompts on a terminal); nullptr if it cannot be read.
std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> load_key(const std::string& path,
                                                             const char* password) {
  std::unique_ptr<FILE, decltype(&std::fclose)> file(std::fopen(path.c_str(), "r"), &std::fclose);
  pem_password_cb* no_password = [](char*, int, int, void*) { return 0; };
  EVP_PKEY* key =
      file ? PEM_read_PrivateKey(file.get(), nullptr, password != nullptr ? nullptr : no_password,
                                 const_cast<char*>(password))
           : nullptr;
  ERR_clear_error();
  return {key, &EVP_PKEY_free};
}

// The ports a CLUSTER SLOTS reply names, from redis-cli's raw output (host line, port line).
std::set<int> ports_in_slots_output(const std::string& output) {
  std::set<int> ports;
  std::istringstream lines(output);
  std::string line;
  bool after_host = false;
  while (std::getline(lines, line)) {
    if (after_host) ports.insert(std::stoi(line));
    after_host = line == "127.0.0.1";
  }
  return ports;
}

TEST(TestPkiTest, IsMadeOnceWithPrivateKeys) {
  const TestPki* from_thread = nullptr;
  std::thread([&] { from_thread = &test_pki(); }).join();
  const TestPki& pki = test_pki();
  EXPECT_EQ(&pki, from_thread);
  for (const auto& key : {pki.server_key, pki.client_key, pki.client_key_encrypted, pki.expired_key,
                          pki.stranger_key, pki.wrong_name_key}) {
    struct stat st {};
    ASSERT_EQ(::stat(key.c_str(), &st), 0) << key;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << key;
  }
  for (const auto& cert : {pki.ca_file, pki.other_ca_file, pki.server_cert, pki.client_cert,
                           pki.expired_cert, pki.stranger_cert, pki.wrong_name_cert}) {
    EXPECT_EQ(std::filesystem::path(cert).parent_path(), pki.dir);
    EXPECT_TRUE(load_cert(cert)) << cert;
  }
}

TEST(TestPkiTest, CertificatesVerifyOrFailAsTheirNamesSay) {
  const TestPki& pki = test_pki();
  EXPECT_EQ(verify_certificate(pki.server_cert, pki.ca_file, "127.0.0.1"), X509_V_OK);
  EXPECT_EQ(verify_certificate(pki.server_cert, pki.ca_file, "localhost"), X509_V_OK);
  EXPECT_EQ(verify_certificate(pki.client_cert, pki.ca_file), X509_V_OK);
  EXPECT_EQ(verify_certificate(pki.expired_cert, pki.ca_file, "127.0.0.1"),
            X509_V_ERR_CERT_HAS_EXPIRED);
  EXPECT_EQ(verify_certificate(pki.stranger_cert, pki.ca_file, "127.0.0.1"),
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  EXPECT_EQ(verify_certificate(pki.stranger_cert, pki.other_ca_file, "127.0.0.1"), X509_V_OK);
  EXPECT_EQ(verify_certificate(pki.server_cert, pki.other_ca_file),
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
  EXPECT_EQ(verify_certificate(pki.wrong_name_cert, pki.ca_file), X509_V_OK);
  EXPECT_EQ(verify_certificate(pki.wrong_name_cert, pki.ca_file, "localhost"),
            X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(verify_certificate(pki.wrong_name_cert, pki.ca_file, "127.0.0.1"),
            X509_V_ERR_IP_ADDRESS_MISMATCH);

  // Extended key usage: the server certificate serves both ends (Redis's own links).
  const auto server = load_cert(pki.server_cert);
  const auto client = load_cert(pki.client_cert);
  const auto ca = load_cert(pki.ca_file);
  EXPECT_EQ(X509_check_purpose(server.get(), X509_PURPOSE_SSL_SERVER, 0), 1);
  EXPECT_EQ(X509_check_purpose(server.get(), X509_PURPOSE_SSL_CLIENT, 0), 1);
  EXPECT_EQ(X509_check_purpose(client.get(), X509_PURPOSE_SSL_CLIENT, 0), 1);
  EXPECT_EQ(X509_check_purpose(client.get(), X509_PURPOSE_SSL_SERVER, 0), 0);
  EXPECT_EQ(X509_check_ca(ca.get()), 1);
  EXPECT_EQ(X509_check_ca(server.get()), 0);
}

TEST(TestPkiTest, TheEncryptedKeyOpensOnlyWithItsPassword) {
  const TestPki& pki = test_pki();
  EXPECT_FALSE(load_key(pki.client_key_encrypted, nullptr));
  EXPECT_FALSE(load_key(pki.client_key_encrypted, "wrong"));
  const auto key = load_key(pki.client_key_encrypted, pki.key_password.c_str());
  ASSERT_TRUE(key);
  const auto cert = load_cert(pki.client_cert);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1) << "not the client certificate's key";
  EXPECT_TRUE(load_key(pki.client_key, nullptr));
}

TEST(TlsServerTest, AnswersOverTlsAndRefusesClientsWithoutATrustedCertificate) {
  RedisServerOptions options;
  options.tls.enabled = true;
  options.tls.auth_clients = true;
  RedisServer server(options);
  server.start();
  ASSERT_GT(server.tls_port(), 0);
  EXPECT_NE(server.tls_port(), server.port());
  EXPECT_EQ(server.tls_endpoint(), "127.0.0.1:" + std::to_string(server.tls_port()));
  EXPECT_EQ(server.tls_address(), "rediss://127.0.0.1:" + std::to_string(server.tls_port()));
  EXPECT_TRUE(RedisAdmin(server).ping()) << "the plaintext port stays";

  const auto answered = redis_cli_tls(server.tls_port(), {"PING"});
  EXPECT_EQ(answered.status, 0) << answered.output;
  EXPECT_EQ(answered.output, "PONG\n");
  const auto anonymous = redis_cli_tls(server.tls_port(), {"PING"}, ClientCert::none);
  EXPECT_EQ(anonymous.output.find("PONG"), std::string::npos) << anonymous.output;
  const TestPki& pki = test_pki();
  const auto stranger = run_command(
      {redis_cli_program(), "--tls", "--cacert", pki.ca_file, "--cert", pki.stranger_cert, "--key",
       pki.stranger_key, "-p", std::to_string(server.tls_port()), "PING"},
      5s);
  EXPECT_EQ(stranger.output.find("PONG"), std::string::npos) << stranger.output;

  const int tls_port = server.tls_port();
  server.kill();
  server.start();
  EXPECT_EQ(server.tls_port(), tls_port) << "a restart keeps the TLS port";
  EXPECT_EQ(redis_cli_tls(server.tls_port(), {"PING"}).output, "PONG\n");

  RedisServer plain;
  plain.start();
  EXPECT_EQ(plain.tls_port(), 0);
}

TEST(TlsServerTest, AClientRefusesAServerWithAnExpiredCertificate) {
  const TestPki& pki = test_pki();
  RedisServerOptions options;
  options.tls.enabled = true;
  options.tls.cert_file = pki.expired_cert;
  options.tls.key_file = pki.expired_key;
  RedisServer server(options);
  server.start();  // Redis loads an expired certificate; the client's check is what fails
  const auto refused = redis_cli_tls(server.tls_port(), {"PING"});
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("certificate verify failed"), std::string::npos) << refused.output;
}

// Replicas and sentinels link over TLS with client certificates (tls-auth-clients), and the
// sentinels name TLS ports: those are what a client following them will dial.
TEST(TlsSentinelGroupTest, NamesMasterReplicasAndSentinelsByTlsPorts) {
  SentinelGroup::Options options;
  options.tls = true;
  options.tls_auth_clients = true;
  options.replicas = 1;
  options.sentinels = 2;
  options.quorum = 1;
  SentinelGroup group(options);
  group.start();
  auto sentinel = group.sentinel_admin(0);
  EXPECT_EQ(sentinel.array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"}),
            (std::vector<std::string>{"127.0.0.1", std::to_string(group.data(0).tls_port())}));
  EXPECT_EQ(group.master_index(), 0);
  const auto replicas = sentinel.array({"SENTINEL", "REPLICAS", "mymaster"});
  EXPECT_NE(std::find(replicas.begin(), replicas.end(), group.data(1).tls_endpoint()),
            replicas.end())
      << "replica named by its TLS port";
  const auto peers = sentinel.array({"SENTINEL", "SENTINELS", "mymaster"});
  EXPECT_NE(std::find(peers.begin(), peers.end(), std::to_string(group.sentinel(1).tls_port())),
            peers.end())
      << "sentinel peer known by its TLS port";
  EXPECT_EQ(group.sentinel_tls_endpoints().at(1), group.sentinel(1).tls_endpoint());

  const auto over_tls = redis_cli_tls(group.sentinel(1).tls_port(),
                                      {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"});
  EXPECT_EQ(over_tls.output, "127.0.0.1\n" + std::to_string(group.data(0).tls_port()) + "\n");

  EXPECT_EQ(group.failover(20s), 1);
  EXPECT_EQ(sentinel.array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"}).at(1),
            std::to_string(group.data(1).tls_port()));
}

// CLUSTER SLOTS names the ports of the connection's kind: TLS ports over TLS (what a client
// follows), plaintext ports over plaintext. A reshard with a key in a moved slot works.
TEST(TlsClusterTest, SlotsOverTlsNameTlsPortsAndReshardMovesKeys) {
  RedisClusterGroup::Options options;
  options.tls = true;
  options.replicas_per_master = 0;
  RedisClusterGroup cluster(options);
  cluster.start();
  std::set<int> tls_ports;
  std::set<int> plain_ports;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    tls_ports.insert(cluster.node(i).tls_port());
    plain_ports.insert(cluster.node(i).port());
  }
  const auto over_tls = redis_cli_tls(cluster.node(0).tls_port(), {"CLUSTER", "SLOTS"});
  ASSERT_EQ(over_tls.status, 0) << over_tls.output;
  EXPECT_EQ(ports_in_slots_output(over_tls.output), tls_ports) << over_tls.output;
  RedisAdmin plain(cluster.node(0));
  EXPECT_EQ(ports_in_slots_output(plain.command({"CLUSTER", "SLOTS"})), plain_ports);
  EXPECT_EQ(cluster.master_tls_endpoints().size(), 3u);

  const int owner = cluster.master_of_slot(0);
  ASSERT_GE(owner, 0);
  RedisAdmin owner_admin(cluster.node(static_cast<std::size_t>(owner)));
  ASSERT_EQ(owner_admin.integer({"CLUSTER", "KEYSLOT", "{06S}"}), 0);
  ASSERT_TRUE(owner_admin.ok({"SET", "{06S}", "moved"}));
  const auto target = static_cast<std::size_t>((owner + 1) % 3);
  const auto resharded = cluster.reshard(static_cast<std::size_t>(owner), target, 10, 30s);
  ASSERT_EQ(resharded.status, 0) << resharded.output;
  ASSERT_TRUE(cluster.wait_ok(10s));
  EXPECT_EQ(cluster.master_of_slot(0), static_cast<int>(target));
  EXPECT_EQ(RedisAdmin(cluster.node(target)).string({"GET", "{06S}"}), "moved");
}

}  // namespace
}  // namespace dlock::test
