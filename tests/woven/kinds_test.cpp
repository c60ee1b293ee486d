// Woven guards of every lock kind, run on the memory backend (the one that offers them all):
// readers overlap, a writer excludes them, a semaphore of two admits two, fair waiters are
// served in order of arrival, a guard over two keys reads both tokens through
// current_lease(), and an exclusive guard called inside a shared one on the same key (through
// a pointer, out of the generator's sight) is refused at run time as an upgrade.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/dlock.hpp"
#include "kinds.hpp"
#include "redis_process.hpp"

namespace woven_kinds {
namespace {

using namespace std::chrono_literals;

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    dlock::Config config;
    config.service = "woven-kinds";
    dlock::BackendConfig memory;
    memory.name = "default";
    memory.topology = dlock::Topology::kMemory;
    config.backends["default"] = memory;
    dlock::init(config);
  }
  void TearDown() override { dlock::shutdown(); }
};

// Who is inside which body, the most at once, and the order of entries.
struct Inside {
  std::mutex mutex;
  std::map<std::string, int> now;
  std::map<std::string, int> most;
  std::vector<std::string> entered;  // the callers' names, in order
  bool writer_met_someone = false;
  std::uint64_t account1 = 0, account2 = 0;  // tokens the lock server shows inside transfer
};

Inside* inside = nullptr;
thread_local std::string caller;                       // the name of this test thread
thread_local const std::atomic<bool>* leave = nullptr;  // stay in the body until it is true

void track(const std::string& what) {
  {
    std::lock_guard lock(inside->mutex);
    const int here = ++inside->now[what];
    inside->most[what] = std::max(inside->most[what], here);
    inside->entered.push_back(caller);
    if (inside->now["write"] > 0 && inside->now["read"] + inside->now["write"] > 1) {
      inside->writer_met_someone = true;
    }
  }
  if (what == "transfer") {
    const dlock::Admin admin(dlock::client());
    inside->account1 = admin.inspect("account:1")->token;
    inside->account2 = admin.inspect("account:2")->token;
  }
  if (leave != nullptr) {
    while (!leave->load()) std::this_thread::sleep_for(1ms);
  } else {
    std::this_thread::sleep_for(150ms);
  }
  std::lock_guard lock(inside->mutex);
  --inside->now[what];
}

// Runs `call` on a thread of its own named `name`.
template <typename F>
std::thread start(std::string name, F call, const std::atomic<bool>* until = nullptr) {
  return std::thread([name = std::move(name), call, until] {
    caller = name;
    leave = until;
    call();
  });
}

int now_inside(const std::string& what) {
  std::lock_guard lock(inside->mutex);
  return inside->now[what];
}

class WovenKinds : public ::testing::Test {
 protected:
  void SetUp() override {
    inside = new Inside;
    body = &track;
  }
  void TearDown() override {
    body = nullptr;
    delete inside;
  }
};

TEST_F(WovenKinds, TwoReadersOverlap) {
  std::thread a = start("a", [] { read_doc(1); });
  std::thread b = start("b", [] { read_doc(1); });
  a.join();
  b.join();
  EXPECT_EQ(inside->most["read"], 2);
}

TEST_F(WovenKinds, TheWriterExcludesTheReaders) {
  std::vector<std::thread> threads;
  threads.push_back(start("r1", [] { read_doc(2); }));
  threads.push_back(start("r2", [] { read_doc(2); }));
  ASSERT_TRUE(dlock::test::wait_until([] { return now_inside("read") == 2; }, 5s, 1ms));
  threads.push_back(start("w1", [] { write_doc(2); }));
  threads.push_back(start("r3", [] { read_doc(2); }));
  threads.push_back(start("w2", [] { write_doc(2); }));
  for (auto& t : threads) t.join();
  EXPECT_FALSE(inside->writer_met_someone);
  EXPECT_EQ(inside->most["write"], 1);
  EXPECT_EQ(inside->entered.size(), 5u);
}

TEST_F(WovenKinds, AtMostTwoPermitHoldersAtOnce) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 5; ++i) threads.push_back(start("p" + std::to_string(i), [] { use_pool(1); }));
  for (auto& t : threads) t.join();
  EXPECT_EQ(inside->most["pool"], 2);
  EXPECT_EQ(inside->entered.size(), 5u);
}

TEST_F(WovenKinds, FairWaitersAreServedInOrderOfArrival) {
  const dlock::Admin admin(dlock::client());
  auto queued = [&] {
    const auto lock = admin.inspect("ticket:1");
    return lock ? lock->queue.size() : 0u;
  };
  std::atomic<bool> done{false};
  std::thread first = start("first", [] { serve(1); }, &done);
  ASSERT_TRUE(dlock::test::wait_until([] { return now_inside("serve") == 1; }, 5s, 1ms));
  std::vector<std::thread> waiters;
  for (const char* name : {"second", "third", "fourth"}) {
    waiters.push_back(start(name, [] { serve(1); }));
    const std::size_t place = waiters.size();
    ASSERT_TRUE(dlock::test::wait_until([&] { return queued() == place; }, 5s, 1ms));
  }
  EXPECT_TRUE(admin.inspect("ticket:1")->queue.front().fair);
  done = true;
  first.join();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(inside->entered, (std::vector<std::string>{"first", "second", "third", "fourth"}));
}

TEST_F(WovenKinds, BothTokensOfATwoKeyGuardAreReadableInTheBody) {
  const Seen seen = transfer(2, 1);
  EXPECT_EQ(seen.keys, (std::vector<std::string>{"account:2", "account:1"})) << "as written";
  EXPECT_NE(seen.first, 0u);
  EXPECT_NE(seen.second, 0u);
  EXPECT_NE(seen.first, seen.second);
  EXPECT_EQ(seen.first, inside->account2) << "token(0) is the first key written";
  EXPECT_EQ(seen.second, inside->account1);
  const dlock::Admin admin(dlock::client());
  EXPECT_FALSE(admin.inspect("account:1")) << "both released after the call";
  EXPECT_FALSE(admin.inspect("account:2"));
}

TEST_F(WovenKinds, AnExclusiveGuardInsideASharedOneIsARefusedUpgrade) {
  body = nullptr;
  try {
    read_then(3, &write_doc);
    FAIL() << "no exception";
  } catch (const dlock::LockNotAcquired& e) {
    EXPECT_NE(std::string(e.what()).find("upgrade"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(write_doc(3)) << "the shared hold was released when the exception left it";
  EXPECT_NO_THROW(read_then(3, &read_doc)) << "shared inside shared re-enters";
}

}  // namespace
}  // namespace woven_kinds

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new woven_kinds::Environment);
  return RUN_ALL_TESTS();
}
