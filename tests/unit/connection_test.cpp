// The connection layer below the backends, against a server played in-process where a real
// one cannot misbehave on cue: how commands are encoded, and that a command's timeout bounds
// the whole wait for its reply (a server that trickles bytes is cut off).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "redis/connection.hpp"
#include "redis/resp.hpp"

namespace dlock::internal {
namespace {

using namespace std::chrono_literals;

std::string hiredis_encoding(const std::vector<std::string>& argv) {
  std::vector<const char*> pointers;
  std::vector<size_t> lengths;
  for (const auto& a : argv) {
    pointers.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* out = nullptr;
  const int length =
      redisFormatCommandArgv(&out, static_cast<int>(argv.size()), pointers.data(), lengths.data());
  std::string encoded(out, static_cast<std::size_t>(length));
  std::free(out);
  return encoded;
}

TEST(AppendCommand, EncodesAsHiredisDoesForAnyArguments) {
  std::mt19937 random(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::string> argv(1 + random() % 6);
    for (auto& arg : argv) {
      arg.resize(random() % 3 == 0 ? 0 : random() % (round % 50 == 0 ? 70000 : 40));
      for (auto& c : arg) c = static_cast<char>(random() % 256);  // \r, \n and \0 included
    }
    const std::vector<std::string_view> views(argv.begin(), argv.end());
    std::string encoded = "prefix";
    append_command(encoded, views);
    ASSERT_EQ(encoded, "prefix" + hiredis_encoding(argv)) << "round " << round;
  }
}

// One connection accepted on a loopback port; answers INFO and TIME (what Connection::open
// asks), then answers the next command by sending `reply` a byte every `pace`.
class TricklingServer {
 public:
  TricklingServer(std::string reply, std::chrono::milliseconds pace)
      : reply_(std::move(reply)), pace_(pace) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TricklingServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  [[nodiscard]] int port() const { return port_; }

 private:
  // Reads until `count` commands have arrived (counted by their leading '*'), or stop.
  bool read_commands(int fd, int count) {
    int seen = 0;
    char buffer[4096];
    while (seen < count && !stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0) return false;
      for (ssize_t i = 0; i < got; ++i) seen += buffer[i] == '*';
    }
    return seen >= count;
  }
  void serve() {
    pollfd p{listener_, POLLIN, 0};
    while (!stop_ && ::poll(&p, 1, 50) == 0) {
    }
    if (stop_) return;
    const int fd = ::accept(listener_, nullptr, nullptr);
    const std::string info = "$0\r\n\r\n";
    const std::string time = "*2\r\n$10\r\n1700000000\r\n$1\r\n0\r\n";
    if (read_commands(fd, 1) && ::send(fd, info.data(), info.size(), MSG_NOSIGNAL) > 0 &&
        read_commands(fd, 1) && ::send(fd, time.data(), time.size(), MSG_NOSIGNAL) > 0 &&
        read_commands(fd, 1)) {
      for (std::size_t i = 0; i < reply_.size() && !stop_; ++i) {
        if (::send(fd, &reply_[i], 1, MSG_NOSIGNAL) != 1) break;
        std::this_thread::sleep_for(pace_);
      }
    }
    ::close(fd);
  }

  std::string reply_;
  std::chrono::milliseconds pace_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

BackendConfig timeouts(Millis command_timeout) {
  BackendConfig config;
  config.connect_timeout = Millis{1000};
  config.command_timeout = command_timeout;
  return config;
}

TEST(ConnectionTimeout, AServerTricklingItsReplyIsCutOffAtTheCommandTimeout) {
  // 40 bytes at 50 ms each: 2 s to send it all. The command timeout is 300 ms.
  TricklingServer server("$30\r\n" + std::string(30, 'x') + "\r\n", 50ms);
  std::string error;
  auto conn = Connection::open({"127.0.0.1", server.port()}, timeouts(Millis{300}), error);
  ASSERT_TRUE(conn) << error;
  const auto started = Clock::now();
  const Reply reply = conn->command({"PING"});
  const auto waited = Clock::now() - started;
  EXPECT_EQ(reply.status(), Reply::Status::kTimeout) << reply.error();
  EXPECT_NE(reply.error().find("within the command timeout"), std::string::npos) << reply.error();
  EXPECT_LT(waited, 1500ms);
  EXPECT_GE(waited, 290ms);
  EXPECT_TRUE(conn->broken());
}

TEST(ConnectionTimeout, AReplyThatArrivesInPiecesWithinTheTimeoutIsRead) {
  TricklingServer server("$5\r\nhello\r\n", 10ms);
  std::string error;
  auto conn = Connection::open({"127.0.0.1", server.port()}, timeouts(Millis{2000}), error);
  ASSERT_TRUE(conn) << error;
  const Reply reply = conn->command({"GET", "k"});
  ASSERT_TRUE(reply.ok()) << reply.error();
  EXPECT_EQ(reply.text(), "hello");
}

TEST(ConnectionTimeout, ARefusedConnectSaysSo) {
  int port = 0;
  {
    TricklingServer closed("", 1ms);  // a port that was free a moment ago
    port = closed.port();
  }
  std::string error;
  auto conn = Connection::open({"127.0.0.1", port}, timeouts(Millis{300}), error);
  EXPECT_FALSE(conn);
  EXPECT_NE(error.find("Connection refused"), std::string::npos) << error;
}

}  // namespace
}  // namespace dlock::internal
