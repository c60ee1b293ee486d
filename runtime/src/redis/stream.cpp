#include "redis/stream.hpp"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "redis/connection.hpp"
#include "redis/tls.hpp"

namespace dlock::internal {
namespace {

// Keep-alive probes as hiredis sets them: a peer gone without a word is noticed in about
// 30 s even on a connection that waits for nothing.
void tune(int fd) {
  const int on = 1;
  const int idle = 15, interval = 5, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

// A connected socket to one of `endpoint`'s addresses, tried in the resolver's order, or -1.
int connect_socket(const Endpoint& endpoint, Clock::time_point deadline, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(endpoint.port);
  if (const int status = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &found)) {
    error = fmt::format("cannot resolve {}: {}", endpoint.host, ::gai_strerror(status));
    return -1;
  }
  int fd = -1;
  error = "no address to connect to";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int status = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (status < 0 && errno == EINPROGRESS) {
      if (!wait_for(fd, POLLOUT, deadline)) {
        error = "no connection within the connect timeout";
        ::close(fd);
        fd = -1;
        break;
      }
      socklen_t length = sizeof status;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &status, &length) < 0) status = errno;
      errno = status;
      status = status == 0 ? 0 : -1;
    }
    if (status < 0) {
      error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd >= 0) tune(fd);
  return fd;
}

}  // namespace

bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<Millis>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // let the next read or write say why
  }
}

std::unique_ptr<Stream> Stream::open(const Endpoint& endpoint,
                                     std::shared_ptr<const TlsContext> tls,
                                     Clock::time_point deadline, std::string& error) {
  const int fd = connect_socket(endpoint, deadline, error);
  if (fd < 0) return nullptr;
  std::unique_ptr<Stream> stream(new Stream(fd, endpoint));
  if (!tls) return stream;
  stream->tls_ = std::move(tls);
  stream->ssl_ = stream->tls_->new_session(fd, endpoint.host, error);
  if (stream->ssl_ == nullptr) {
    error = "TLS: " + error;
    return nullptr;
  }
  if (!stream->handshake(deadline, error)) return nullptr;
  return stream;
}

Stream::~Stream() {
  SSL_free(ssl_);  // and the BIO; no close_notify: the server needs none
  ::close(fd_);
}

bool Stream::handshake(Clock::time_point deadline, std::string& error) {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int status = SSL_do_handshake(ssl_);
    if (status == 1) return true;
    const int kind = SSL_get_error(ssl_, status);
    if (kind == SSL_ERROR_WANT_READ || kind == SSL_ERROR_WANT_WRITE) {
      if (wait_for(fd_, kind == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) continue;
      error = fmt::format(
          "TLS: no handshake with {} within the connect timeout (is it a TLS port? a plain-text "
          "server does not answer one)",
          to_string(endpoint_));
      return false;
    }
    const long verified = SSL_get_verify_result(ssl_);
    if (tls_->config().verify && verified != X509_V_OK) {
      ERR_clear_error();
      error =
          fmt::format("TLS: the certificate of {} did not verify: {}{}", to_string(endpoint_),
                      X509_verify_cert_error_string(verified),
                      tls_->config().ca_file.empty() ? " (against the system trust store)" : "");
      return false;
    }
    const IoResult result = tls_failure(status, "handshake");
    error =
        fmt::format("TLS: handshake with {} failed: {}", to_string(endpoint_),
                    result.what == Io::kClosed ? "the server closed the connection" : result.error);
    if (result.error.find("wrong version number") != std::string::npos ||
        result.error.find("packet length too long") != std::string::npos) {
      error += " (is it a TLS port?)";
    }
    return false;
  }
}

IoResult Stream::tls_result(int status, std::size_t moved, const char* doing) {
  if (status == 1) return {Io::kDone, moved, {}};
  IoResult result = tls_failure(status, doing);
  // TLS 1.3 refuses a missing client certificate after the handshake, at the first
  // exchange, often with a reset that lost the server's alert ("certificate required"). A
  // server that asked for one and then failed before any reply likely refused it: say so,
  // as a likely cause (it may have failed for another reason, a restart say).
  const bool failed = result.what == Io::kClosed || result.what == Io::kError;
  if (failed && !received_ && SSL_version(ssl_) >= TLS1_3_VERSION &&
      asked_for_missing_certificate(ssl_) &&
      result.error.find("certificate required") == std::string::npos) {
    result = {Io::kError, 0,
              fmt::format("TLS: {} asked for a client certificate, and none is configured "
                          "(tls: cert_file, key_file), which is the likely cause; the "
                          "connection failed: {}",
                          to_string(endpoint_), result.error)};
  }
  return result;
}

IoResult Stream::tls_failure(int status, const char* doing) {
  switch (SSL_get_error(ssl_, status)) {
    case SSL_ERROR_WANT_READ: return {Io::kWantRead, 0, {}};
    case SSL_ERROR_WANT_WRITE: return {Io::kWantWrite, 0, {}};
    case SSL_ERROR_ZERO_RETURN: return {Io::kClosed, 0, "closed by the server"};
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      if (errno == 0) return {Io::kClosed, 0, "closed by the server"};
      return {Io::kError, 0, std::strerror(errno)};
    default:
      return {Io::kError, 0, fmt::format("TLS {} failed: {}", doing, tls_error_text("unknown"))};
  }
}

IoResult Stream::write_some(const char* data, std::size_t length) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    errno = 0;
    std::size_t written = 0;
    const int status = SSL_write_ex(ssl_, data, length, &written);
    return tls_result(status, written, "write");
  }
  for (;;) {
    const ssize_t sent = ::send(fd_, data, length, MSG_NOSIGNAL);
    if (sent >= 0) return {Io::kDone, static_cast<std::size_t>(sent), {}};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantWrite, 0, {}};
    return {Io::kError, 0, std::strerror(errno)};
  }
}

IoResult Stream::read_some(char* data, std::size_t capacity) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    errno = 0;
    std::size_t got = 0;
    const int status = SSL_read_ex(ssl_, data, capacity, &got);
    received_ = received_ || status == 1;
    return tls_result(status, got, "read");
  }
  for (;;) {
    const ssize_t got = ::recv(fd_, data, capacity, 0);
    if (got > 0) return {Io::kDone, static_cast<std::size_t>(got), {}};
    if (got == 0) return {Io::kClosed, 0, "closed by the server"};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantRead, 0, {}};
    return {Io::kError, 0, std::strerror(errno)};
  }
}

bool Stream::has_buffered() const noexcept { return ssl_ != nullptr && SSL_has_pending(ssl_) == 1; }

}  // namespace dlock::internal
