// The kinds on the engines that queue every request as an entry (ZooKeeper's znodes, etcd's
// keys): an entry of another kind than the one asked (a request refused, its delete not yet
// applied) is waited for, never passed over. Each test puts such an entry in by hand.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

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
  std::thread waiter([&] { waited = c.acquire("doc", kind(LockMode::kExclusive, 1, 8s)); });
  JoinOnExit join_waiter{waiter};
  ASSERT_TRUE(wait_until([&] { return c.metrics().contention >= 1; }, 5s, 1ms));
  holder.release();  // the shared entry is first now
  std::this_thread::sleep_for(500ms);
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

INSTANTIATE_TEST_SUITE_P(Engines, ForeignEntries, ::testing::Values("zookeeper", "etcd"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::test
