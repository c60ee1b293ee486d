// Test harness: a loopback server that plays Redis where a real one cannot misbehave on
// cue (an old version, a huge or trickled reply, a connection closed after a command).
//
//   dlock::test::FakeRedis fake([](const std::vector<std::string>& argv) {
//     return argv[0] == "PING" ? std::string("+PONG\r\n") : std::string(":1\r\n");
//   });
//   // 127.0.0.1:fake.port()
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

// A loopback server that speaks just enough RESP for a test: each command (an array of
// bulk strings) is answered with what `answer` returns, already RESP-encoded; an empty
// answer closes the connection instead, as a server or network failing after the command
// arrived would. Serves one connection at a time until destroyed; every wait is bounded by
// a poll timeout. With `pacing`, replies from the connection's `pacing.from_command`-th
// command on (counted from 0) are written a byte every `pacing.pace`, as a server or network
// trickling them.
class FakeRedis {
 public:
  using Answer = std::function<std::string(const std::vector<std::string>& argv)>;
  using Millis = std::chrono::milliseconds;
  struct Pacing {
    Millis pace{0};
    int from_command = 0;
  };

  explicit FakeRedis(Answer answer) : FakeRedis(std::move(answer), Pacing{}) {}
  FakeRedis(Answer answer, Pacing pacing) : answer_(std::move(answer)), pacing_(pacing) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listener_, 4) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("FakeRedis: cannot listen on loopback");
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeRedis() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  [[nodiscard]] int port() const { return port_; }

 private:
  static bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 50) == 1;
  }
  void serve() {
    while (!stop_) {
      if (!readable(listener_)) continue;
      const int conn = ::accept(listener_, nullptr, nullptr);
      if (conn < 0) continue;
      std::string pending;
      int answered = 0;
      char buffer[4096];
      while (!stop_) {
        if (!readable(conn)) continue;
        const ssize_t n = ::read(conn, buffer, sizeof buffer);
        if (n <= 0) break;
        pending.append(buffer, static_cast<std::size_t>(n));
        if (!answer(conn, pending, answered)) break;
      }
      ::close(conn);
    }
  }
  // Answers each complete command in `pending` (arrays of bulk strings) and drops it.
  // Returns false when the connection is to be closed.
  bool answer(int conn, std::string& pending, int& answered) {
    for (;;) {
      std::size_t at = 0;
      std::vector<std::string> argv;
      if (pending.empty() || pending[0] != '*') return true;
      std::size_t eol = pending.find("\r\n");
      if (eol == std::string::npos) return true;
      const int count = std::stoi(pending.substr(1, eol - 1));
      at = eol + 2;
      for (int i = 0; i < count; ++i) {
        eol = pending.find("\r\n", at);
        if (eol == std::string::npos) return true;
        const std::size_t size = std::stoul(pending.substr(at + 1, eol - at - 1));
        if (pending.size() < eol + 2 + size + 2) return true;
        argv.push_back(pending.substr(eol + 2, size));
        at = eol + 2 + size + 2;
      }
      pending.erase(0, at);
      const std::string reply = argv.empty() ? std::string("+OK\r\n") : answer_(argv);
      if (reply.empty()) return false;
      write_reply(conn, reply, answered++ >= pacing_.from_command ? pacing_.pace : Millis{0});
    }
  }
  // Writes `reply` at once, or a byte every `pace` (ending early on a stop or a failure).
  void write_reply(int conn, const std::string& reply, Millis pace) {
    if (pace == Millis{0}) {
      (void)!::send(conn, reply.data(), reply.size(), MSG_NOSIGNAL);
      return;
    }
    for (std::size_t i = 0; i < reply.size() && !stop_; ++i) {
      if (::send(conn, &reply[i], 1, MSG_NOSIGNAL) != 1) return;
      std::this_thread::sleep_for(pace);
    }
  }

  const Answer answer_;
  const Pacing pacing_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// `text` as a RESP bulk string.
inline std::string bulk(const std::string& text) {
  return "$" + std::to_string(text.size()) + "\r\n" + text + "\r\n";
}

}  // namespace dlock::test
