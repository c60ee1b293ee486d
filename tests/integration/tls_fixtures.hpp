// Shared set-up for the TLS tests: servers with test_pki()'s certificates (or others) and
// client configurations that trust its CA.
#pragma once

#include <string>

#include "dlock/config.hpp"
#include "redis_process.hpp"
#include "test_pki.hpp"

namespace dlock::test {

/// A server that also listens for TLS with `cert` and `key`.
inline RedisServerOptions tls_server(const std::string& cert, const std::string& key,
                                     bool auth_clients = false) {
  RedisServerOptions options;
  options.tls.enabled = true;
  options.tls.cert_file = cert;
  options.tls.key_file = key;
  options.tls.auth_clients = auth_clients;
  return options;
}

/// A server with test_pki()'s server certificate.
inline RedisServerOptions good_server(bool auth_clients = false) {
  return tls_server(test_pki().server_cert, test_pki().server_key, auth_clients);
}

/// TLS on `backend`, trusting test_pki()'s CA; with `client_cert`, showing its client
/// certificate too.
inline void use_test_tls(BackendConfig& backend, bool client_cert) {
  backend.tls.enabled = true;
  backend.tls.ca_file = test_pki().ca_file;
  if (client_cert) {
    backend.tls.cert_file = test_pki().client_cert;
    backend.tls.key_file = test_pki().client_key;
  }
}

/// Whether an error names a missing client certificate: the server's alert when it arrived
/// ("tlsv13 alert certificate required"), else the client's note that the server asked for
/// one (the alert is often lost to a reset when a request was already on its way).
inline bool names_missing_client_certificate(const std::string& error) {
  return error.find("certificate required") != std::string::npos ||
         error.find("asked for a client certificate") != std::string::npos;
}

}  // namespace dlock::test
