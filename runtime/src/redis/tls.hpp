// One OpenSSL client context per TLS configuration: what to trust, which client
// certificate to show, and how each connection checks the server's name. OpenSSL types stay
// inside runtime/src/redis/tls.cpp and stream.cpp.
#pragma once

#include <memory>
#include <string>

#include "dlock/config.hpp"

struct ssl_ctx_st;
struct ssl_st;

namespace dlock::internal {

class TlsContext {
 public:
  /// The context for `config`, shared by every connection made with the same settings: the
  /// one made before, else a new one (the files are read now). When a file has changed
  /// since (a renewed certificate), a new context is made from the files as they are now; if
  /// they cannot be used, the one made before is kept (and a warning logged) until they
  /// change again. Returns
  /// nullptr and sets `error` ("cannot load ca_file /path: reason") when a file cannot be
  /// used; never includes key material.
  static std::shared_ptr<const TlsContext> get(const TlsConfig& config, std::string& error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  /// A client session over `fd`, checking the certificate against `server_name` or else
  /// `host` (an IP address as an address, a DNS name with SNI). nullptr and `error` on failure.
  [[nodiscard]] ssl_st* new_session(int fd, const std::string& host, std::string& error) const;
  [[nodiscard]] const TlsConfig& config() const noexcept { return config_; }

 private:
  TlsContext(ssl_ctx_st* ctx, TlsConfig config) : ctx_(ctx), config_(std::move(config)) {}
  static std::shared_ptr<const TlsContext> make(const TlsConfig& config, std::string& error);

  ssl_ctx_st* ctx_;
  TlsConfig config_;
};

/// Whether the server of `ssl` asked for a client certificate while the configuration has
/// none (the handshake went on without one).
[[nodiscard]] bool asked_for_missing_certificate(ssl_st* ssl);

/// The reason OpenSSL gave for the last failure on this thread (its error queue, emptied),
/// or `fallback`.
[[nodiscard]] std::string tls_error_text(const char* fallback);

}  // namespace dlock::internal
