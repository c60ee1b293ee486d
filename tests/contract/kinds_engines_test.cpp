// The kinds on the engines that queue every request as an entry (ZooKeeper's znodes, etcd's
// keys, the entries of a PostgreSQL lock row's queue): an entry of another kind than the one
// asked (a request refused, its delete not yet applied) is waited for, never passed over.
// Each test puts such an entry in by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "dlock/dlock.hpp"
#include "topos.hpp"

namespace dlock::test {
namespace {

LockSettings kind(LockMode mode, int permits, Millis wait) {
  LockSettings s = settings(10s, wait);
  s.mode = mode;
  s.permits = permits;
  return s;
}

class ForeignEntries : public LockContract {
 protected:
  // Puts an entry (a permit of a semaphore of 2, or a shared hold) that is no request of
  // this test's clients into the queue of the only lock of this test's service; removed
  // again by the returned call.
  std::function<void()> foreign(bool permit = true) {
    const Config config = topo_->config();
    const BackendConfig& b = config.backends.at("default");
    const std::string service = MemoryTopo::service();
    if (GetParam() == "postgres") return foreign_row_entry(b.dsn, b.table, service, permit);
    if (GetParam() == "zookeeper") {
      auto zk = std::make_shared<ZookeeperClient>(connect_string(b));
      std::string root = "/dlock/";
      for (const char ch : service) root += ch == '/' ? std::string("%2F") : std::string(1, ch);
      std::string dir;
      for (const std::string& name : zk->children(root + "/locks")) dir = root + "/locks/" + name;
      const std::string path = zk->create(dir + (permit ? "/p2-refused-" : "/s-refused-"), "",
                                          ZOO_EPHEMERAL_SEQUENTIAL);
      return [zk, path] { zk->remove(path); };
    }
    auto etcd = std::make_shared<EtcdClient>(fmt::format("127.0.0.1:{}", b.endpoints[0].port));
    std::string prefix;
    for (const auto& kv : etcd->range("/dlock/" + service + "/locks/")) {
      prefix = kv.key.substr(0, kv.key.rfind('/') + 1);
    }
    const std::string key = prefix + (permit ? "p2-00000000deadbeef" : "s00000000deadbeef");
    etcd->put(key, "a refused request", etcd->grant(30));
    return [etcd, key] { etcd->remove(key); };
  }
  // The entry goes at the end of the queue of the service's one lock row (its token above
  // every token of the key, as the queue's statements make them), living 30 s.
  static std::function<void()> foreign_row_entry(const std::string& dsn, const std::string& table,
                                                 const std::string& service, bool permit) {
    auto pg = std::make_shared<PostgresClient>(dsn);
    std::string quoted;
    for (const char ch : service) quoted += ch == '\'' ? std::string("''") : std::string(1, ch);
    const std::string row = fmt::format("service = '{}'", quoted);
    const char* now_us = "(extract(epoch FROM clock_timestamp()) * 1000000)::int8";
    const char* next_token = "greatest(coalesce(token, 0), coalesce(queue_token, 0)) + 1";
    const auto added = pg->exec(fmt::format(R"(
UPDATE {table} SET
  queue = coalesce(queue, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
    'o', 'foreign:refused', 'k', {kind}, 'n', {permits}, 'f', false,
    't', {next}, 'e', {now} + 30000000, 'r', false,
    'w', 0, 'a', {now}, 'ls', 30000, 'h', '', 'p', 0, 'th', 0, 'nm', '')),
  queue_token = {next},
  queue_until = greatest(queue_until, clock_timestamp() + interval '30 seconds')
WHERE {row} RETURNING 1)",
                                            fmt::arg("kind", permit ? 2 : 1),
                                            fmt::arg("permits", permit ? 2 : 0),
                                            fmt::arg("now", now_us), fmt::arg("next", next_token),
                                            fmt::arg("row", row),
                                            fmt::arg("table", table)));
    EXPECT_EQ(added.size(), 1u) << "no lock row of " << service;
    return [pg, table, row] {
      pg->exec(fmt::format(R"(
UPDATE {} SET (queue, queue_until) = (
  SELECT coalesce(jsonb_agg(x ORDER BY (x->>'t')::int8), '[]'::jsonb),
         coalesce(timestamptz 'epoch' + max((x->>'e')::int8) * interval '1 microsecond', clock_timestamp())
  FROM jsonb_array_elements(queue) x WHERE x->>'o' <> 'foreign:refused')
WHERE {})", table, row));
    };
  }
  static std::string connect_string(const BackendConfig& b) {
    std::string hosts;
    for (const Endpoint& e : b.endpoints) {
      hosts += fmt::format("{}{}:{}", hosts.empty() ? "" : ",", e.host, e.port);
    }
    return hosts;
  }
};

TEST_P(ForeignEntries, AReaderWaitsForAPermitEntryBehindTheReaderBeforeIt) {
  Client a = make_client(), b = make_client(), c = make_client();
  Lease reader = a.try_acquire("doc", kind(LockMode::kShared, 0, 0ms));
  ASSERT_TRUE(reader) << reader.error();
  const auto remove = foreign();
  Lease second = b.acquire("doc", kind(LockMode::kShared, 0, 300ms));
  EXPECT_EQ(second.status(), AcquireStatus::kBusy) << "a reader passed over the permit entry";
  remove();
  second = b.acquire("doc", kind(LockMode::kShared, 0, 3s));
  EXPECT_TRUE(second) << "the entry is gone: " << second.error();
  reader.release();
  Lease permit = c.try_acquire("doc", kind(LockMode::kExclusive, 2, 0ms));
  EXPECT_EQ(permit.status(), AcquireStatus::kRefused) << "held shared";
  EXPECT_FALSE(second && permit) << "a shared hold and a permit at once";
}

// A permit waiter that was queued behind permits outlasts an entry of another kind that
// comes first when the permits before it go: it waits for it, it is not refused.
TEST_P(ForeignEntries, AQueuedPermitIsNotRefusedByAnEntryThatComesFirst) {
  Client a = make_client(), c = make_client();
  Lease holder = a.try_acquire("doc", kind(LockMode::kExclusive, 1, 0ms));
  ASSERT_TRUE(holder) << holder.error();
  const auto remove = foreign(false);
  Lease waited;
  std::atomic<bool> answered{false};
  std::thread waiter([&] {
    waited = c.acquire("doc", kind(LockMode::kExclusive, 1, 8s));
    answered = true;
  });
  JoinOnExit join_waiter{waiter};
  // Queued once a waiting try was answered busy. Where a watch costs a connection
  // (postgres), the first busy answer is a try that keeps no place; the waiting one follows.
  const std::uint64_t queued = GetParam() == "postgres" ? 2 : 1;
  ASSERT_TRUE(wait_until([&] { return c.metrics().contention >= queued; }, 5s, 1ms));
  const auto before = c.metrics().contention;
  holder.release();  // the shared entry is first now
  // The waiter looked again with the entry first, and still waits.
  EXPECT_TRUE(wait_until([&] { return c.metrics().contention > before; }, 3s, 1ms));
  EXPECT_FALSE(answered.load()) << "the waiter was answered while the shared entry came first";
  remove();
  waiter.join();
  EXPECT_TRUE(waited) << waited.error();
}

TEST_P(ForeignEntries, AWriterAndAPermitNeverHoldTogether) {
  Client a = make_client(), x = make_client(), c = make_client();
  Lease holder = a.try_acquire("doc", kind(LockMode::kExclusive, 0, 0ms));
  ASSERT_TRUE(holder) << holder.error();
  const auto remove = foreign();
  Lease writer;
  std::thread waiter([&] { writer = x.acquire("doc", kind(LockMode::kExclusive, 0, 8s)); });
  ASSERT_TRUE(wait_until([&] { return x.metrics().contention >= 1; }, 5s, 1ms));
  holder.release();
  std::this_thread::sleep_for(300ms);
  // The permit entry is first now: the writer is refused (the key looks held as a
  // semaphore), or, if it still waits, the permit must wait for it.
  Lease permit = c.try_acquire("doc", kind(LockMode::kExclusive, 2, 0ms));
  remove();
  waiter.join();
  EXPECT_FALSE(writer && permit) << "an exclusive hold and a permit at once";
  EXPECT_TRUE(writer || permit) << writer.error() << "; " << permit.error();
}

INSTANTIATE_TEST_SUITE_P(Engines, ForeignEntries, ::testing::Values("zookeeper", "etcd", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::test
