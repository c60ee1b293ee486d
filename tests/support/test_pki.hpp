// Test harness: a throw-away public-key infrastructure for TLS tests, made with the OpenSSL 3
// C API (EC P-256 keys, SHA-256 signatures) the first time it is asked for, once per process.
//
//   const auto& pki = dlock::test::test_pki();
//   RedisServerOptions options;
//   options.tls.enabled = true;                 // uses pki.server_cert / server_key / ca_file
//   ...
//   EXPECT_EQ(dlock::test::verify_certificate(pki.expired_cert, pki.ca_file),
//             X509_V_ERR_CERT_HAS_EXPIRED);
//
// The files live in a mkdtemp directory (under $TMPDIR or /tmp) that an atexit handler
// removes (kept when DLOCK_TEST_KEEP_DIRS=1). Keys are written with mode 0600. Certificates
// are valid from a day ago to ten days ahead, except the expired one.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "redis_process.hpp"

namespace dlock::test {

/// Paths of the PEM files of test_pki().
struct TestPki {
  /// The directory holding every file below.
  std::string dir;
  /// The CA (CN "dlock test CA", CA:TRUE) that signs every certificate below but the stranger.
  std::string ca_file;
  /// SAN IP:127.0.0.1 and DNS:localhost; EKU serverAuth and clientAuth, since Redis also
  /// presents it as a client certificate on replication and cluster-bus links.
  std::string server_cert;
  std::string server_key;
  /// EKU clientAuth.
  std::string client_cert;
  std::string client_key;
  /// client_key encrypted (PKCS#8, AES-256-CBC) with key_password.
  std::string client_key_encrypted;
  std::string key_password = "secret";
  /// The server certificate's names, but its notAfter lies an hour in the past (notBefore
  /// two hours).
  std::string expired_cert;
  std::string expired_key;
  /// A second CA, which signs nothing the first one trusts.
  std::string other_ca_file;
  /// The server certificate's names, signed by other_ca_file's CA.
  std::string stranger_cert;
  std::string stranger_key;
  /// Signed by the CA, but its only name is SAN DNS:other.example.
  std::string wrong_name_cert;
  std::string wrong_name_key;
};

/// The process's test PKI, generated on first use (thread-safe). Throws std::runtime_error
/// with OpenSSL's error text if generation fails.
const TestPki& test_pki();

/// Verifies the certificate in `cert_file` against the CA certificates in `ca_file` at the
/// current time (X509_verify_cert) and, when `host` is given, that it names `host` (an IP
/// address or a DNS name). Returns X509_V_OK (0) or the X509_V_ERR_* code. Throws
/// std::runtime_error if a file cannot be read.
int verify_certificate(const std::string& cert_file, const std::string& ca_file,
                       const std::string& host = "");

/// Which certificate redis_cli_tls presents.
enum class ClientCert { client, none };

/// Runs `redis-cli --tls --cacert CA [--cert C --key K] -h 127.0.0.1 -p PORT ARGS...` with
/// test_pki()'s files: a real TLS client for checks that RedisAdmin (plaintext) cannot do.
/// Output is redis-cli's raw form (one reply element a line, no types), stderr merged.
CommandResult redis_cli_tls(int port, const std::vector<std::string>& args,
                            ClientCert cert = ClientCert::client,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5));

/// The arguments redis-cli needs to speak TLS with test_pki()'s CA and client certificate
/// (`--tls --cacert CA --cert C --key K`), for `redis-cli --cluster` and the like.
std::vector<std::string> redis_cli_tls_arguments(ClientCert cert = ClientCert::client);

}  // namespace dlock::test
