// A loopback TCP proxy for network faults between clients and one server: clients connect to
// 127.0.0.1:port(), the proxy connects on to the target and copies bytes both ways, or holds,
// delays or resets them as told.
//
//   dlock::test::TcpProxy proxy("127.0.0.1", server.port());   // forwarding at once
//   config.endpoints = {Endpoint{"127.0.0.1", proxy.port()}};
//   proxy.blackhole();      // nothing crosses; new connections are accepted and hang
//   proxy.delay(200ms);     // every byte crosses 200 ms late
//   proxy.delay_requests_after_reply(1s);   // after the next reply, the client's bytes
//                                           // cross 1 s late
//   proxy.reset();          // every connection is reset (RST), new ones too
//   proxy.pass();           // back to normal
//
// One thread serves every connection with poll() (bounded waits of a few ms); the destructor
// (or stop()) closes everything and joins it. Modes switch at once and may be switched from
// any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace dlock::test {

class TcpProxy {
 public:
  enum class Mode {
    kPass,       ///< bytes are copied both ways as they come
    kBlackhole,  ///< bytes are left unread, as in a partition (TCP delivers them after it
                 ///< heals, unless the connection was given up); connects still complete
    kDelay,      ///< bytes are copied delay() late
    kReset,      ///< every connection is closed with RST; new ones are reset at once
    kTrickle,    ///< the server's bytes reach the client one every 5 ms (a TLS record
                 ///< arrives in pieces); the client's go as they come
    kDelayRequests,  ///< the client's bytes are copied delay() late; the server's as they come
    kDelayRequestsArmed,  ///< as kPass until the server's next bytes pass, then kDelayRequests
  };

  /// Listens on a free loopback port and forwards to target_host:target_port. Throws
  /// std::runtime_error if it cannot listen.
  TcpProxy(std::string target_host, int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  void pass() { set(Mode::kPass); }
  void blackhole() { set(Mode::kBlackhole); }
  void delay(std::chrono::milliseconds delay);
  void reset() { set(Mode::kReset); }
  void trickle() { set(Mode::kTrickle); }
  /// Passes on until the server's next bytes have passed (kDelayRequestsArmed), then holds the
  /// client's bytes back by `delay` (kDelayRequests): the request a client sends right after a
  /// reply reaches the server late, though the one before it was answered at once. Any other
  /// mode set meanwhile disarms it.
  void delay_requests_after_reply(std::chrono::milliseconds delay);
  [[nodiscard]] Mode mode() const { return mode_.load(); }

  /// Closes every connection and the listener and joins the thread. Idempotent.
  void stop() noexcept;

  [[nodiscard]] int port() const { return port_; }
  /// "127.0.0.1:PORT", the form used in node lists.
  [[nodiscard]] std::string endpoint() const;
  /// "redis://127.0.0.1:PORT", the form used in dlock's YAML `address`.
  [[nodiscard]] std::string address() const;
  /// Connections accepted so far (for tests of the proxy itself).
  [[nodiscard]] long accepted() const { return accepted_.load(); }

 private:
  struct State;
  void set(Mode mode) { mode_.store(mode); }

  int port_ = 0;
  std::atomic<Mode> mode_{Mode::kPass};
  std::atomic<long> delay_ms_{0};
  std::atomic<long> accepted_{0};
  std::unique_ptr<State> state_;
};

}  // namespace dlock::test
