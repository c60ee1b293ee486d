// Connections shared by threads (a shared ConnectionPool, Connection::share()) against a real
// redis-server: each thread's batch goes out whole and it reads its own replies, a slow reply
// holds no other caller past its own deadline, and a connection that breaks fails only the
// commands sent on it.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include <hiredis/hiredis.h>

#include "fixtures.hpp"
#include "redis/pool.hpp"

namespace dlock::test {
namespace {

using internal::Connection;
using internal::ConnectionPool;
using internal::Reply;

class SharedConnection : public OneServerSuite {
 protected:
  static std::shared_ptr<ConnectionPool> shared_pool(int size, Millis command_timeout = 2s) {
    BackendConfig config = single_node_config(*server_).backends.at("default");
    config.pool_size = size;
    config.command_timeout = command_timeout;
    return std::make_shared<ConnectionPool>(Endpoint{server_->host(), server_->port()}, config,
                                            ConnectionPool::Sharing::kShared);
  }
  // A PING from a caller of its own (a thread of its own) on `pool`, waited for `within`.
  static Reply ping_in_another_thread(ConnectionPool& pool, Millis within) {
    Reply reply = Reply::failed(Reply::Status::kNotSent, "no connection");
    std::thread([&] {
      std::string error;
      ConnectionPool::Handle conn = pool.take(Clock::now() + 1s, error);
      if (!conn) return;
      conn->append({"PING"});
      reply = conn->read_reply(Clock::now() + within);
    }).join();
    return reply;
  }
  static long long blocked_clients() {
    const std::string info = RedisAdmin(*server_).command({"INFO", "clients"});
    const auto at = info.find("blocked_clients:");
    return at == std::string::npos ? -1 : std::atoll(info.c_str() + at + 16);
  }
};

// Eight threads on one connection, each sending MULTI, INCR, EXEC and ECHO as one batch: a
// command of another thread inside the transaction would be queued (and answered) in it.
TEST_F(SharedConnection, EachThreadsBatchGoesOutWholeAndItReadsItsOwnReplies) {
  const auto pool = shared_pool(1);
  constexpr int kThreads = 8;
  constexpr int kRounds = 300;
  std::atomic<int> wrong{0};
  std::mutex serials_mutex;
  std::set<std::uint64_t> serials;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string counter = "shared:counter:" + std::to_string(t);
      for (int i = 1; i <= kRounds; ++i) {
        const std::string tag = std::to_string(t) + ":" + std::to_string(i);
        const Reply echo = pool->run([&](Connection& conn) {
          {
            std::lock_guard lock(serials_mutex);
            serials.insert(conn.serial());
          }
          conn.append({"MULTI"});
          conn.append({"INCR", counter});
          conn.append({"EXEC"});
          conn.append({"ECHO", tag});
          const Reply multi = conn.read_reply();
          const Reply queued = conn.read_reply();
          const Reply exec = conn.read_reply();
          const bool in_order = multi.text() == "OK" && queued.text() == "QUEUED" &&
                                exec.element(0) != nullptr && exec.element(0)->integer == i;
          if (!in_order) ++wrong;
          return conn.read_reply();
        });
        if (!echo.ok() || echo.text() != tag) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(serials.size(), 1u) << "the threads did not share the one connection";
}

// A caller behind a command the server holds (BLPOP) gets its timeout at its own deadline;
// the held command's reply still comes, in step, and new callers go to a new connection.
TEST_F(SharedConnection, ASlowReplyHoldsNoOtherCallerPastItsOwnDeadline) {
  const auto pool = shared_pool(1);
  std::uint64_t held_serial = 0;
  std::optional<Reply> held;
  std::thread holder([&] {
    held = pool->run([&](Connection& conn) {
      held_serial = conn.serial();
      conn.append({"BLPOP", "shared:nothing", "1"});
      return conn.read_reply(Clock::now() + 3s);
    });
  });
  ASSERT_TRUE(wait_until([&] { return blocked_clients() == 1; }, 2s, 5ms));
  std::string error;
  ConnectionPool::Handle conn = pool->take(Clock::now() + 1s, error);
  ASSERT_TRUE(conn) << error;
  EXPECT_EQ(conn->serial(), held_serial) << "not shared";
  const auto before = Clock::now();
  conn->append({"PING"});
  const Reply ping = conn->read_reply(Clock::now() + 150ms);
  EXPECT_EQ(ping.status(), Reply::Status::kTimeout);
  EXPECT_LT(elapsed_ms(before), 500) << "held up by the other caller's command";
  EXPECT_TRUE(conn->retiring());
  conn = {};
  holder.join();
  ASSERT_TRUE(held && held->ok()) << (held ? held->error() : "no reply");
  EXPECT_EQ(held->get()->type, REDIS_REPLY_NIL);  // BLPOP's timeout
  const Reply fresh = pool->run([&](Connection& c) {
    EXPECT_NE(c.serial(), held_serial) << "a retiring connection was lent again";
    return c.command({"PING"});
  });
  EXPECT_EQ(fresh.text(), "PONG") << fresh.error();
}

// Two connections, a command held on each; one connection is killed by the server. Its
// command fails at once; the other's is answered, and its connection stays in use.
TEST_F(SharedConnection, ABrokenConnectionFailsOnlyTheCommandsSentOnIt) {
  const auto pool = shared_pool(2, 5s);
  std::string error;
  ConnectionPool::Handle first = pool->take(Clock::now() + 1s, error);
  ConnectionPool::Handle second = pool->take(Clock::now() + 1s, error);
  ASSERT_TRUE(first && second) << error;
  ASSERT_NE(first->serial(), second->serial());
  const long long id = first->command({"CLIENT", "ID"}).integer();
  std::optional<Reply> killed;
  std::optional<Reply> kept;
  std::thread a([&] { killed = first->command({"BLPOP", "shared:a", "3"}); });
  std::thread b([&] { kept = second->command({"BLPOP", "shared:b", "0.5"}); });
  ASSERT_TRUE(wait_until([&] { return blocked_clients() == 2; }, 2s, 5ms));
  const auto before = Clock::now();
  RedisAdmin(*server_).command({"CLIENT", "KILL", "ID", std::to_string(id)});
  a.join();
  EXPECT_LT(elapsed_ms(before), 400);
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->status(), Reply::Status::kBroken);
  b.join();
  ASSERT_TRUE(kept && kept->ok()) << (kept ? kept->error() : "no reply");
  EXPECT_EQ(second->command({"PING"}).text(), "PONG");
  EXPECT_TRUE(first->broken());
  EXPECT_FALSE(second->broken());
  first = {};
  second = {};
  // The broken connection is gone; the pool opens another in its place.
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(pool->run([](Connection& c) { return c.command({"PING"}); }).text(), "PONG");
}

// A handle assigned over gives its connection back: a pool of one lends it again.
TEST_F(SharedConnection, AHandleAssignedOverGivesItsConnectionBack) {
  BackendConfig config = single_node_config(*server_).backends.at("default");
  config.pool_size = 1;
  ConnectionPool pool(Endpoint{server_->host(), server_->port()}, config);
  std::string error;
  ConnectionPool::Handle handle = pool.take(Clock::now() + 1s, error);
  ASSERT_TRUE(handle) << error;
  const std::uint64_t serial = handle->serial();
  handle = ConnectionPool::Handle();
  handle = pool.take(Clock::now() + 200ms, error);
  ASSERT_TRUE(handle) << error;
  EXPECT_EQ(handle->serial(), serial);
}

// A release nobody waits for keeps its answer when another caller on its connection times
// out: the connection retires, but stays until the answer is read.
TEST_F(SharedConnection, AnotherCallersTimeoutLeavesADetachedReplyToCome) {
  const auto pool = shared_pool(1);
  std::atomic<int> status{-1};
  std::string error;
  ASSERT_TRUE(pool->send_detached(
      [](Connection& conn) {
        conn.append({"BLPOP", "shared:detached", "0.4"});
      },
      [&](Reply reply, ConnectionPool::Pin) { status = static_cast<int>(reply.status()); },
      Clock::now() + 1s, error))
      << error;
  EXPECT_EQ(ping_in_another_thread(*pool, 50ms).status(), Reply::Status::kTimeout);
  ASSERT_TRUE(wait_until([&] { return status.load() >= 0; }, 3s, 2ms));
  EXPECT_EQ(status.load(), static_cast<int>(Reply::Status::kOk));
}

// A retiring connection does not count against pool_size: a new caller gets a new one at
// once instead of waiting for the held command to end.
TEST_F(SharedConnection, ARetiringConnectionMakesRoomForANewOne) {
  const auto pool = shared_pool(1, 3s);
  std::thread holder([&] {
    (void)pool->run([&](Connection& conn) {
      conn.append({"BLPOP", "shared:room", "1"});
      return conn.read_reply(Clock::now() + 3s);
    });
  });
  ASSERT_TRUE(wait_until([&] { return blocked_clients() == 1; }, 2s, 5ms));
  EXPECT_EQ(ping_in_another_thread(*pool, 50ms).status(), Reply::Status::kTimeout);
  std::string error;
  const auto before = Clock::now();
  ConnectionPool::Handle conn = pool->take(Clock::now() + 300ms, error);
  EXPECT_TRUE(conn) << error;
  EXPECT_LT(elapsed_ms(before), 250);
  conn = {};
  holder.join();
}

// Three callers on one connection: A reads for all, B and C wait. B's deadline passes about
// when A's reply comes, so A may hand the reading over to B just as B leaves; C's reply,
// which comes 20 ms after B's deadline, must still reach C (the reading passes on to it).
TEST_F(SharedConnection, ACallerLeavingAtItsDeadlinePassesTheReadingOn) {
  const auto pool = shared_pool(1, 5s);
  int late = 0;
  for (int offset_us = 0; offset_us <= 300; offset_us += 15) {
    std::string error;
    ConnectionPool::Handle conn = pool->take(Clock::now() + 1s, error);
    if (conn && conn->retiring()) {
      conn = {};
      conn = pool->take(Clock::now() + 1s, error);
    }
    ASSERT_TRUE(conn) << error;
    const auto b_deadline = Clock::now() + 150ms;
    std::optional<Reply> c_reply;
    std::thread a([&] { (void)conn->command({"BLPOP", "shared:pass:a", "5"}); });
    std::this_thread::sleep_for(20ms);
    std::thread b([&] {
      conn->append({"BLPOP", "shared:pass:b", "5"});
      (void)conn->read_reply(b_deadline);
    });
    std::this_thread::sleep_for(20ms);
    std::thread c([&] {
      conn->append({"PING"});
      c_reply = conn->read_reply(b_deadline + 400ms);
    });
    RedisAdmin admin(*server_);
    std::this_thread::sleep_until(b_deadline - std::chrono::microseconds(offset_us));
    admin.command({"LPUSH", "shared:pass:a", "x"});
    std::this_thread::sleep_until(b_deadline + 20ms);
    admin.command({"LPUSH", "shared:pass:b", "x"});
    a.join();
    b.join();
    c.join();
    if (!c_reply || !c_reply->ok()) ++late;
    admin.command({"DEL", "shared:pass:a", "shared:pass:b"});
  }
  EXPECT_EQ(late, 0) << "a reply that came was not read for its caller";
}

// While a caller's command is owed its reply, commands other threads queue on the connection
// stay here, to go out together when that reply wakes the reader: none of them waits in the
// server's buffer behind the held command, and each is answered once the reply comes.
TEST_F(SharedConnection, CommandsQueuedWhileAReplyIsOwedGoOutWhenItComes) {
  const auto pool = shared_pool(1, 5s);
  std::string error;
  ConnectionPool::Handle conn = pool->take(Clock::now() + 1s, error);
  ASSERT_TRUE(conn) << error;
  const std::string id = std::to_string(conn->command({"CLIENT", "ID"}).integer());
  std::optional<Reply> held;
  std::thread reader([&] { held = conn->command({"BLPOP", "shared:owed", "3"}); });
  ASSERT_TRUE(wait_until([&] { return blocked_clients() == 1; }, 2s, 5ms));
  constexpr int kQueued = 4;
  std::vector<std::optional<Reply>> queued(kQueued);
  std::vector<std::thread> others;
  for (int i = 0; i < kQueued; ++i) {
    others.emplace_back([&, i] { queued[i] = conn->command({"INCR", "shared:queued"}); });
  }
  RedisAdmin admin(*server_);
  ASSERT_TRUE(wait_until([&] { return conn->due() == 1 + kQueued; }, 2s, 2ms))
      << "the other threads did not queue their commands";
  std::this_thread::sleep_for(50ms);  // time for bytes sent now to reach the server
  const std::string client = admin.command({"CLIENT", "LIST", "ID", id});
  const auto at = client.find(" qbuf=");
  ASSERT_NE(at, std::string::npos) << client;
  EXPECT_EQ(std::atoll(client.c_str() + at + 6), 0) << "sent behind the held command: " << client;
  EXPECT_EQ(admin.command({"GET", "shared:queued"}), "(nil)");
  admin.command({"LPUSH", "shared:owed", "x"});
  reader.join();
  for (auto& thread : others) thread.join();
  ASSERT_TRUE(held && held->ok()) << (held ? held->error() : "no reply");
  std::set<long long> counts;
  for (const auto& reply : queued) {
    ASSERT_TRUE(reply && reply->ok()) << (reply ? reply->error() : "no reply");
    counts.insert(reply->integer());
  }
  EXPECT_EQ(counts, (std::set<long long>{1, 2, 3, 4}));
}

// A shared pool's connections spin as the backend says (spin_us), the default when it says
// nothing.
TEST_F(SharedConnection, APoolsConnectionsSpinAsTheBackendSays) {
  for (const auto spin : {std::chrono::microseconds{0}, std::chrono::microseconds{7}}) {
    BackendConfig config = single_node_config(*server_).backends.at("default");
    config.spin = spin;
    ConnectionPool pool(Endpoint{server_->host(), server_->port()}, config,
                        ConnectionPool::Sharing::kShared);
    std::string error;
    ConnectionPool::Handle conn = pool.take(Clock::now() + 1s, error);
    ASSERT_TRUE(conn) << error;
    EXPECT_EQ(conn->spin(), spin);
  }
  const auto pool = shared_pool(1);
  std::string error;
  ConnectionPool::Handle conn = pool->take(Clock::now() + 1s, error);
  ASSERT_TRUE(conn) << error;
  EXPECT_EQ(conn->spin(), kDefaultSpin);
}

// A command queued by the reading thread itself (a detached reply's handler sends another)
// while nothing else is owed goes out at once: no reply is coming to carry it.
TEST_F(SharedConnection, ACommandQueuedWithNothingElseOwedGoesOutAtOnce) {
  const BackendConfig config = single_node_config(*server_).backends.at("default");
  std::string error;
  const std::unique_ptr<Connection> conn =
      Connection::open(Endpoint{server_->host(), server_->port()}, config, error);
  ASSERT_TRUE(conn) << error;
  conn->share(config.spin);
  std::atomic<long long> second{-1};
  conn->append({"PING"});
  ASSERT_TRUE(conn->flush(Clock::now() + 1s));
  conn->detach_last([&](Reply) {
    conn->append({"INCR", "shared:chained"});
    (void)conn->flush(Clock::now() + 1s);
    conn->detach_last([&](Reply reply) { second = reply.integer(); });
  });
  const auto before = Clock::now();
  EXPECT_TRUE(conn->settle(Clock::now() + 3s));
  EXPECT_LT(elapsed_ms(before), 1000) << "the second command waited for the reader's deadline";
  EXPECT_EQ(second.load(), 1);
}

// Sixteen threads, two connections: acquires, releases nobody waits for, and each thread's
// next acquire with wait 0 finds its own release applied.
TEST_F(SharedConnection, ManyThreadsLockThroughTwoConnections) {
  Config config = single_node_config(*server_);
  config.backends.at("default").pool_size = 2;
  Client client(config);
  constexpr int kThreads = 16;
  constexpr int kRounds = 100;
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "many:" + std::to_string(t);
      std::uint64_t last_token = 0;
      for (int i = 0; i < kRounds; ++i) {
        Lease lease = client.acquire(key, settings(10s));
        if (!lease || lease.token() <= last_token) {
          ++refused;
          continue;
        }
        last_token = lease.token();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(refused.load(), 0);
  const std::string clients = RedisAdmin(*server_).command({"CLIENT", "LIST"});
  std::size_t lines = 0;
  for (char c : clients) lines += c == '\n' ? 1 : 0;
  // Two shared connections, the renewal connection, the release subscriber and this one.
  EXPECT_LE(lines, 5u) << clients;
}

}  // namespace
}  // namespace dlock::test
