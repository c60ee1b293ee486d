#include "tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <list>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPollMs = 5;

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Bytes go on at once, as through a real proxy (HAProxy, PgBouncer): without it, Nagle's
// algorithm holds a small write back while an earlier one waits for its delayed ACK (up to
// 40 ms), which a client that pipelines its requests meets on every second one.
void no_delay(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// Closes with RST rather than FIN: the peer's next read or write fails with ECONNRESET.
void close_with_reset(int fd) {
  linger abort{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  ::close(fd);
}

// Bytes read from one side, to be written to the other once due.
struct Chunk {
  Clock::time_point due;
  std::string bytes;
};

// One direction of a connection.
struct Pipe {
  int from = -1;
  int to = -1;
  std::deque<Chunk> queued;  // read, not yet due or not yet fully written
  bool closed = false;       // `from` reached EOF or failed
};

struct Connection {
  int client = -1;
  int server = -1;
  Pipe up;    // client -> server
  Pipe down;  // server -> client
};

}  // namespace

struct TcpProxy::State {
  std::string host;
  int target_port = 0;
  int listener = -1;
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::list<Connection> connections;
};

namespace {

// Writes what is due, `budget` bytes at most; returns false if the destination failed.
bool flush(Pipe& pipe, Clock::time_point now, std::size_t budget = SIZE_MAX) {
  while (!pipe.queued.empty() && pipe.queued.front().due <= now && budget > 0) {
    Chunk& chunk = pipe.queued.front();
    const ssize_t n =
        ::send(pipe.to, chunk.bytes.data(), std::min(chunk.bytes.size(), budget), MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    chunk.bytes.erase(0, static_cast<std::size_t>(n));
    budget -= static_cast<std::size_t>(n);
    if (!chunk.bytes.empty()) return true;  // the socket is full, or the budget spent
    pipe.queued.pop_front();
  }
  return true;
}

// Reads what `from` has; returns false on EOF or failure.
bool fill(Pipe& pipe, Clock::time_point due) {
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::recv(pipe.from, buffer, sizeof buffer, 0);
    if (n > 0) {
      pipe.queued.push_back(Chunk{due, std::string(buffer, static_cast<std::size_t>(n))});
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

int connect_to(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
  // Loopback: the kernel completes or refuses the connect at once, even for a stopped server.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  set_nonblocking(fd);
  no_delay(fd);
  return fd;
}

}  // namespace

TcpProxy::TcpProxy(std::string target_host, int target_port) : state_(std::make_unique<State>()) {
  state_->host = std::move(target_host);
  state_->target_port = target_port;
  state_->listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (state_->listener < 0 ||
      ::bind(state_->listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(state_->listener, 64) != 0 ||
      ::getsockname(state_->listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (state_->listener >= 0) ::close(state_->listener);
    throw std::runtime_error("TcpProxy: cannot listen on loopback");
  }
  set_nonblocking(state_->listener);
  port_ = ntohs(address.sin_port);
  state_->thread = std::thread([this] {
    State& s = *state_;
    std::vector<pollfd> fds;
    while (!s.stopping.load()) {
      const Mode mode = mode_.load();
      const auto now = Clock::now();
      if (mode == Mode::kReset) {
        for (auto& c : s.connections) {
          close_with_reset(c.client);
          close_with_reset(c.server);
        }
        s.connections.clear();
      }
      // Accept whatever waits; in kReset it is reset at once.
      for (;;) {
        const int client = ::accept4(s.listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) break;
        accepted_.fetch_add(1);
        if (mode == Mode::kReset) {
          close_with_reset(client);
          continue;
        }
        const int server = connect_to(s.host, s.target_port);
        if (server < 0) {
          close_with_reset(client);
          continue;
        }
        set_nonblocking(client);
        no_delay(client);
        Connection c;
        c.client = client;
        c.server = server;
        c.up = Pipe{client, server, {}, false};
        c.down = Pipe{server, client, {}, false};
        s.connections.push_back(std::move(c));
      }
      // Copy, hold or delay.
      const auto late = now + std::chrono::milliseconds(delay_ms_.load());
      const auto up_due = mode == Mode::kDelay || mode == Mode::kDelayRequests ? late : now;
      const auto down_due = mode == Mode::kDelay ? late : now;
      for (auto it = s.connections.begin(); it != s.connections.end();) {
        bool alive = true;
        if (mode != Mode::kBlackhole) {
          for (Pipe* pipe : {&it->up, &it->down}) {
            const std::size_t before = pipe->queued.size();
            if (!pipe->closed && !fill(*pipe, pipe == &it->up ? up_due : down_due)) pipe->closed = true;
            // The server's bytes passed (they are flushed below, before the client can answer
            // them): the client's next bytes are late, unless another mode was set meanwhile.
            if (mode == Mode::kDelayRequestsArmed && pipe == &it->down && pipe->queued.size() > before) {
              Mode armed = Mode::kDelayRequestsArmed;
              mode_.compare_exchange_strong(armed, Mode::kDelayRequests);
            }
          }
        }
        for (Pipe* pipe : {&it->up, &it->down}) {
          // Held bytes stay held in a blackhole, as a partition would hold them.
          const std::size_t budget = mode == Mode::kTrickle && pipe == &it->down ? 1 : SIZE_MAX;
          if (mode != Mode::kBlackhole && !flush(*pipe, now, budget)) alive = false;
          if (pipe->closed && pipe->queued.empty()) alive = false;
        }
        if (alive) {
          ++it;
        } else {
          ::close(it->client);
          ::close(it->server);
          it = s.connections.erase(it);
        }
      }
      // Wait for anything to read (or a bounded tick for due chunks and mode changes).
      fds.clear();
      fds.push_back(pollfd{s.listener, POLLIN, 0});
      if (mode != Mode::kBlackhole) {
        for (const auto& c : s.connections) {
          if (!c.up.closed) fds.push_back(pollfd{c.client, POLLIN, 0});
          if (!c.down.closed) fds.push_back(pollfd{c.server, POLLIN, 0});
        }
      }
      ::poll(fds.data(), fds.size(), kPollMs);
    }
    for (auto& c : s.connections) {
      ::close(c.client);
      ::close(c.server);
    }
    s.connections.clear();
  });
}

TcpProxy::~TcpProxy() { stop(); }

void TcpProxy::delay(std::chrono::milliseconds delay) {
  delay_ms_.store(delay.count());
  set(Mode::kDelay);
}

void TcpProxy::delay_requests_after_reply(std::chrono::milliseconds delay) {
  delay_ms_.store(delay.count());
  set(Mode::kDelayRequestsArmed);
}

void TcpProxy::stop() noexcept {
  if (!state_ || state_->stopping.exchange(true)) return;
  if (state_->thread.joinable()) state_->thread.join();
  ::close(state_->listener);
}

std::string TcpProxy::endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

std::string TcpProxy::address() const { return "redis://" + endpoint(); }

}  // namespace dlock::test
