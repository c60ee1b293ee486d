// Tests of the harness's etcd clusters with TLS on the client URLs (EtcdClusterOptions::tls):
// the members serve https:// only, the harness's own client and EtcdCluster::client() speak
// TLS with test_pki()'s files, mutual TLS asks every client for a certificate, and a member
// whose certificate is meant to fail still starts when the harness is told not to check it.
#include <chrono>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "etcd_cluster.hpp"
#include "selftest_support.hpp"
#include "test_pki.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using namespace selftest;

constexpr int kUnavailable = 14;  // grpc::StatusCode

// The message of the EtcdError `call` throws, or "" when it succeeds.
template <class Call>
std::string failure(Call&& call, int* code = nullptr) {
  try {
    call();
    return "";
  } catch (const EtcdError& error) {
    if (code != nullptr) *code = error.code();
    return error.what();
  }
}

EtcdClusterOptions tls_options(bool client_cert_auth) {
  EtcdClusterOptions options;
  options.members = 1;
  options.name = "etcd-tls";
  options.tls.enabled = true;
  options.tls.client_cert_auth = client_cert_auth;
  return options;
}

TEST(EtcdClusterTlsTest, MembersServeHttpsOnlyAndTheHarnessClientSpeaksTls) {
  EtcdCluster etcd(tls_options(false));
  const auto before = Clock::now();
  etcd.start();
  std::cout << "[   TIME   ] TLS cluster start (1 member) " << ms_since(before) << " ms\n";
  const std::string url = "https://127.0.0.1:" + std::to_string(etcd.client_port(0));
  EXPECT_EQ(etcd.endpoint(0), url);
  EXPECT_EQ(etcd.endpoints(), std::vector<std::string>{url});
  EXPECT_EQ(etcd.direct_endpoint(0), url);
  EXPECT_EQ(etcd.role(0), "leader");
  ASSERT_TRUE(etcd.client_tls());
  EXPECT_EQ(etcd.client_tls()->ca_file, test_pki().ca_file);

  EtcdClient client = etcd.client(0);
  EXPECT_GT(client.put("/tls/a", "x"), 0);
  EXPECT_EQ(client.get("/tls/a")->value, "x");
  // Plain HTTP/2 to the TLS port is no answer; https:// without TLS settings is refused.
  int code = 0;
  const std::string plain = failure(
      [&] { EtcdClient("127.0.0.1:" + std::to_string(etcd.client_port(0)), 1s).get("/tls/a"); },
      &code);
  EXPECT_FALSE(plain.empty());
  EXPECT_THROW(EtcdClient(etcd.endpoint(0)), std::invalid_argument);
  // A client that trusts another CA is refused by the handshake.
  EtcdClientTls stranger;
  stranger.ca_file = test_pki().other_ca_file;
  code = 0;
  const std::string refused = failure([&] { EtcdClient(url, stranger, 1s).get("/tls/a"); }, &code);
  EXPECT_EQ(code, kUnavailable) << refused;
  EXPECT_NE(refused.find("andshake failed"), std::string::npos) << refused;
  std::cout << "[   INFO   ] plain text to TLS: " << plain << "\n[   INFO   ] other CA: " << refused
            << "\n";
}

TEST(EtcdClusterTlsTest, MutualTlsAsksEveryClientForACertificate) {
  EtcdCluster etcd(tls_options(true));
  etcd.start();
  EXPECT_EQ(etcd.role(0), "leader");
  EXPECT_GT(etcd.client(0).put("/mtls/a", "x"), 0);
  EtcdClientTls anonymous;
  anonymous.ca_file = test_pki().ca_file;
  int code = 0;
  const std::string refused =
      failure([&] { EtcdClient(etcd.endpoint(0), anonymous, 1s).get("/mtls/a"); }, &code);
  EXPECT_FALSE(refused.empty());
  std::cout << "[   INFO   ] no client certificate: " << refused << "\n";
}

TEST(EtcdClusterTlsTest, AMemberWithAnExpiredCertificateStartsWhenTheHarnessDoesNotCheckIt) {
  EtcdClusterOptions options = tls_options(false);
  options.tls.cert_file = test_pki().expired_cert;
  options.tls.key_file = test_pki().expired_key;
  options.tls.client.verify = false;
  EtcdCluster etcd(options);
  etcd.start();
  EXPECT_EQ(etcd.role(0), "leader");
  EXPECT_GT(etcd.client(0).put("/expired/a", "x"), 0);
  // A client that checks is refused.
  EtcdClientTls checking;
  checking.ca_file = test_pki().ca_file;
  const std::string refused =
      failure([&] { EtcdClient(etcd.endpoint(0), checking, 1s).get("/expired/a"); });
  EXPECT_FALSE(refused.empty());
  std::cout << "[   INFO   ] expired certificate: " << refused << "\n";
}

}  // namespace
}  // namespace dlock::test
