#include "redis/tls.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "log.hpp"

namespace dlock::internal {
namespace {

// dlock's own socket BIO: OpenSSL's writes with write(), which raises SIGPIPE on a socket the
// server closed; this one sends with MSG_NOSIGNAL, for the alerts OpenSSL writes too.
int bio_fd(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int bio_write(BIO* bio, const char* data, int length) {
  BIO_clear_retry_flags(bio);
  const ssize_t sent = ::send(bio_fd(bio), data, static_cast<std::size_t>(length), MSG_NOSIGNAL);
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(sent);
}

int bio_read(BIO* bio, char* data, int capacity) {
  BIO_clear_retry_flags(bio);
  const ssize_t got = ::recv(bio_fd(bio), data, static_cast<std::size_t>(capacity), 0);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return static_cast<int>(got);
}

long bio_ctrl(BIO* bio, int command, long /*number*/, void* pointer) {
  switch (command) {
    case BIO_CTRL_FLUSH:
    case BIO_CTRL_PUSH:
    case BIO_CTRL_POP: return 1;
    case BIO_C_GET_FD:
      if (pointer != nullptr) *static_cast<int*>(pointer) = bio_fd(bio);
      return bio_fd(bio);
    default: return 0;
  }
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dlock socket");
    if (m != nullptr) {
      BIO_meth_set_write(m, bio_write);
      BIO_meth_set_read(m, bio_read);
      BIO_meth_set_ctrl(m, bio_ctrl);
      BIO_meth_set_create(m, bio_create);
    }
    return m;
  }();
  return method;
}

// Marks a session whose server asked for a client certificate when none is configured.
// With TLS 1.3 the server refuses the missing certificate after the client has finished its
// handshake, and its alert ("certificate required") is often lost: the request the client
// sent meanwhile makes the server's close a reset. The mark lets the error say why anyway.
int certificate_request_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

int note_certificate_request(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  SSL_set_ex_data(ssl, certificate_request_index(), ssl);
  return 0;  // no certificate: the handshake goes on without one
}

// An encrypted key would make OpenSSL prompt on the terminal; refusing the password makes it
// fail instead.
int no_password(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return 0; }

// The address in `host` without an IPv6 zone ("fe80::1%eth0" is fe80::1), or empty when
// `host` is a name.
std::string ip_address_of(const std::string& host) {
  const std::string address = host.substr(0, host.find('%'));
  unsigned char bytes[sizeof(in6_addr)];
  const bool ip = inet_pton(AF_INET, address.c_str(), bytes) == 1 ||
                  inet_pton(AF_INET6, address.c_str(), bytes) == 1;
  return ip ? address : std::string();
}

// A file as of now: its size and time of change, so that a renewed certificate is noticed.
std::string file_version(const std::string& path) {
  struct stat info {};
  if (path.empty() || ::stat(path.c_str(), &info) != 0) return "-";
  return fmt::format("{}.{}:{}", info.st_mtim.tv_sec, info.st_mtim.tv_nsec, info.st_size);
}

std::string settings_key(const TlsConfig& c) {
  return fmt::format("{}\n{}\n{}\n{}\n{}", c.ca_file, c.cert_file, c.key_file, c.server_name,
                     c.verify);
}

std::string files_version(const TlsConfig& c) {
  return fmt::format("{} {} {}", file_version(c.ca_file), file_version(c.cert_file),
                     file_version(c.key_file));
}

// One TLS configuration's last good context, and the version of its files it was made
// from. Kept for the life of the process (one per configuration the process has used), so
// that files caught mid-renewal find it even after every connection has gone.
struct Registered {
  std::string files;
  std::shared_ptr<const TlsContext> context;
};

// Loads what `config` names into `ctx`; an error names the key and the file.
bool load_files(SSL_CTX* ctx, const TlsConfig& config, std::string& error) {
  if (!config.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1) {
      error = fmt::format("cannot load ca_file {}: {}", config.ca_file,
                          tls_error_text("no certificate in it"));
      return false;
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    error = fmt::format("cannot load the system trust store: {}", tls_error_text("unknown"));
    return false;
  }
  if (config.cert_file.empty()) return true;
  if (SSL_CTX_use_certificate_chain_file(ctx, config.cert_file.c_str()) != 1) {
    error = fmt::format("cannot load cert_file {}: {}", config.cert_file,
                        tls_error_text("no certificate in it"));
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, config.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    error = fmt::format("cannot load key_file {}: {} (dlock reads unencrypted PEM keys)",
                        config.key_file, tls_error_text("no key in it"));
    return false;
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    error =
        fmt::format("key_file {} does not match cert_file {}", config.key_file, config.cert_file);
    ERR_clear_error();
    return false;
  }
  return true;
}

}  // namespace

std::string tls_error_text(const char* fallback) {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    if (!text.empty()) continue;  // the first is the cause; the rest is how it surfaced
    if (const char* reason = ERR_reason_error_string(code)) {
      text = reason;
    } else {
      char buffer[256];
      ERR_error_string_n(code, buffer, sizeof buffer);
      text = buffer;
    }
  }
  return text.empty() ? fallback : text;
}

bool asked_for_missing_certificate(ssl_st* ssl) {
  return SSL_get_ex_data(ssl, certificate_request_index()) != nullptr;
}

std::shared_ptr<const TlsContext> TlsContext::get(const TlsConfig& config, std::string& error) {
  // Never destroyed: a connection may still be opened while the process exits.
  static auto* const mutex = new std::mutex;
  static auto* const contexts = new std::map<std::string, Registered>;
  const std::string files = files_version(config);
  std::lock_guard lock(*mutex);
  Registered& entry = (*contexts)[settings_key(config)];
  const std::shared_ptr<const TlsContext> current = entry.context;
  if (current && entry.files == files) return current;
  std::shared_ptr<const TlsContext> made = make(config, error);
  if (made) {
    entry = Registered{files, made};
  } else if (current) {
    // Files caught in the middle of a renewal (a new certificate beside the old key), or
    // replaced by ones that do not work: keep what worked until they change again.
    log(LogLevel::kWarn,
        "TLS files changed but cannot be used ({}); new connections keep "
        "using the ones read before",
        error);
    entry.files = files;
    return current;
  }
  return made;
}

std::shared_ptr<const TlsContext> TlsContext::make(const TlsConfig& config, std::string& error) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr || socket_method() == nullptr) {
    error = fmt::format("cannot set up TLS: {}", tls_error_text("out of memory"));
    SSL_CTX_free(ctx);
    return nullptr;
  }
  std::shared_ptr<const TlsContext> context(new TlsContext(ctx, config));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, config.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  SSL_CTX_set_default_passwd_cb(ctx, no_password);
  // A write retried after WANT_WRITE may come from a buffer that grew and moved.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Whole records per recv; what is read ahead is found with SSL_has_pending.
  SSL_CTX_set_read_ahead(ctx, 1);
  if (!load_files(ctx, config, error)) return nullptr;
  if (config.cert_file.empty()) SSL_CTX_set_client_cert_cb(ctx, note_certificate_request);
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

ssl_st* TlsContext::new_session(int fd, const std::string& host, std::string& error) const {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx_);
  BIO* bio = ssl != nullptr ? BIO_new(socket_method()) : nullptr;
  if (bio == nullptr) {
    error = fmt::format("cannot start TLS: {}", tls_error_text("out of memory"));
    SSL_free(ssl);
    return nullptr;
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);
  const std::string& name = config_.server_name.empty() ? host : config_.server_name;
  bool named = true;
  if (const std::string ip = ip_address_of(name); !ip.empty()) {
    // No SNI for an address (RFC 6066): it is checked against the certificate's IP entries.
    named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip.c_str()) == 1;
  } else {
    named =
        SSL_set_tlsext_host_name(ssl, name.c_str()) == 1 && SSL_set1_host(ssl, name.c_str()) == 1;
  }
  if (!named) {
    error = fmt::format("cannot check the server name '{}': {}", name, tls_error_text("refused"));
    SSL_free(ssl);
    return nullptr;
  }
  SSL_set_connect_state(ssl);
  return ssl;
}

}  // namespace dlock::internal
