// The connection layer below the backends, against a server played in-process where a real
// one cannot misbehave on cue (tests/support/fake_redis.hpp): how commands are encoded, and
// that a command's timeout bounds the whole wait for its reply (a server that trickles bytes
// is cut off).
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <random>
#include <string>

#include "fake_redis.hpp"
#include "redis/connection.hpp"
#include "redis/resp.hpp"
#include "redis_process.hpp"

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

// Answers INFO and TIME (what Connection::open asks), then every other command with
// `reply`, written a byte every `pace`.
test::FakeRedis trickling(std::string reply, std::chrono::milliseconds pace) {
  return test::FakeRedis(
      [reply = std::move(reply)](const std::vector<std::string>& argv) {
        if (argv[0] == "INFO") return std::string("$0\r\n\r\n");
        if (argv[0] == "TIME") return std::string("*2\r\n$10\r\n1700000000\r\n$1\r\n0\r\n");
        return reply;
      },
      {pace, 2});
}

BackendConfig timeouts(Millis command_timeout) {
  BackendConfig config;
  config.connect_timeout = Millis{1000};
  config.command_timeout = command_timeout;
  return config;
}

TEST(ConnectionTimeout, AServerTricklingItsReplyIsCutOffAtTheCommandTimeout) {
  // 40 bytes at 50 ms each: 2 s to send it all. The command timeout is 300 ms.
  const test::FakeRedis server = trickling("$30\r\n" + std::string(30, 'x') + "\r\n", 50ms);
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
  const test::FakeRedis server = trickling("$5\r\nhello\r\n", 10ms);
  std::string error;
  auto conn = Connection::open({"127.0.0.1", server.port()}, timeouts(Millis{2000}), error);
  ASSERT_TRUE(conn) << error;
  const Reply reply = conn->command({"GET", "k"});
  ASSERT_TRUE(reply.ok()) << reply.error();
  EXPECT_EQ(reply.text(), "hello");
}

TEST(ConnectionTimeout, ARefusedConnectSaysSo) {
  std::string error;
  auto conn =
      Connection::open({"127.0.0.1", test::free_loopback_port()}, timeouts(Millis{300}), error);
  EXPECT_FALSE(conn);
  EXPECT_NE(error.find("Connection refused"), std::string::npos) << error;
}

}  // namespace
}  // namespace dlock::internal
