// A non-blocking byte stream to one server: a TCP socket, with TLS on top when the backend
// uses it. Opening is bounded by a deadline (connect and handshake alike); reads and writes
// never block, and say what they are waiting for. OpenSSL types stay in stream.cpp and tls.cpp.
#pragma once

#include <poll.h>

#include <cstddef>
#include <memory>
#include <string>

#include "backend.hpp"

struct ssl_st;

namespace dlock::internal {

class TlsContext;

/// What a read or write did.
enum class Io {
  kDone,       ///< `bytes` moved (at least one)
  kWantRead,   ///< nothing moved; wait until the socket is readable, then call again
  kWantWrite,  ///< nothing moved; wait until the socket is writable, then call again
  kClosed,     ///< the server closed the connection
  kError,      ///< the connection failed: `error` says why
};

struct IoResult {
  Io what = Io::kError;
  std::size_t bytes = 0;
  std::string error;
};

class Stream {
 public:
  /// Resolves `endpoint`, connects to its addresses in turn and, with `tls`, completes the
  /// handshake and checks the certificate, all by `deadline`. Returns nullptr and sets
  /// `error` on failure; a TLS failure starts with "TLS:". The socket is close-on-exec and
  /// has TCP_NODELAY and keep-alive probes.
  static std::unique_ptr<Stream> open(const Endpoint& endpoint,
                                      std::shared_ptr<const TlsContext> tls,
                                      Clock::time_point deadline, std::string& error);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  IoResult write_some(const char* data, std::size_t length);
  IoResult read_some(char* data, std::size_t capacity);
  /// Bytes received and decrypted (or read ahead) inside TLS that poll() cannot see: read
  /// them before waiting on the socket.
  [[nodiscard]] bool has_buffered() const noexcept;
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  Stream(int fd, Endpoint endpoint) : fd_(fd), endpoint_(std::move(endpoint)) {}
  bool handshake(Clock::time_point deadline, std::string& error);
  IoResult tls_result(int status, std::size_t moved, const char* doing);
  IoResult tls_failure(int status, const char* doing);

  int fd_;
  Endpoint endpoint_;
  std::shared_ptr<const TlsContext> tls_;
  ssl_st* ssl_ = nullptr;
  bool received_ = false;  ///< a read has returned data since the handshake
};

/// Waits until `fd` has one of `events` or `deadline` passes; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline);

}  // namespace dlock::internal
