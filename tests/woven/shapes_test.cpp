// Woven guards of every supported shape, compiled with g++ and run against a real
// redis-server. A separate process (woven_probe) checks that each lock is really held
// during the body and free after it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dlock/dlock.hpp"
#include "redis_process.hpp"
#include "shapes.hpp"

namespace woven {
namespace {

using namespace std::chrono_literals;

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    server.start();
    config_path = (std::filesystem::temp_directory_path() /
                   ("dlock-woven-" + std::to_string(::getpid()) + ".yaml")).string();
    std::ofstream(config_path)
        << "service: woven\n"
        << "backends:\n  default: { topology: single, address: " << server.address() << " }\n"
        << "defaults: { lease: 5s, wait: 5s }\n"
        << "locks:\n"
        << "  \"woven::free_function\": { wait: 200ms }\n"  // operators' override, no rebuild
        << "  \"woven::skip_bool\": { wait: 0s }\n";
    dlock::init(config_path);
  }
  void TearDown() override {
    dlock::shutdown();
    std::filesystem::remove(config_path);
    server.stop();
  }
  dlock::test::RedisServer server;
  std::string config_path;
};

Environment* env = nullptr;

std::string ask_probe(const std::string& key) {
  dlock::test::ChildProcess probe({DLOCK_WOVEN_PROBE, env->config_path, key});
  return probe.read_line(10s).value_or("no answer");
}

class Woven : public ::testing::Test {
 protected:
  void SetUp() override {
    probe = &ask_probe;
    seen_inside.clear();
  }
  // Held by someone else: another client, as another instance would.
  dlock::Lease hold_elsewhere(const std::string& key) {
    static dlock::Client other(dlock::load_config(env->config_path));
    dlock::LockSettings s;
    s.lease = 10s;
    return other.acquire(key, s);
  }
};

TEST_F(Woven, FreeFunctionHoldsItsLockDuringTheBodyOnly) {
  EXPECT_EQ(free_function(21), 42);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(ask_probe("free:21"), "free");
}

TEST_F(Woven, OverloadsEachKeepTheirOwnGuard) {
  EXPECT_EQ(overloaded(5), 5);
  EXPECT_EQ(seen_inside, "");  // the unguarded overload
  EXPECT_EQ(overloaded(std::string("abc")), 3);
  EXPECT_EQ(seen_inside, "held");
}

TEST_F(Woven, MembersInClassOutOfLineAndStatic) {
  Ledger ledger;
  ledger.in_class_member(3);
  EXPECT_EQ(seen_inside, "held");
  ledger.out_of_line(4);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(Ledger::static_member(9), 10);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(ask_probe("ledger:main:3"), "free");
}

TEST_F(Woven, ReferenceMoveOnlyAndNoexceptReturns) {
  Ledger ledger;
  ledger.reference_return(2) = 7;
  EXPECT_EQ(ledger.slots_[2], 7);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(*move_only(4), 4);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(no_throw(6), 6);
  EXPECT_EQ(seen_inside, "held");
}

TEST_F(Woven, DefaultArgumentsAndVariadicParameters) {
  EXPECT_EQ(with_default(2), 6);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(c_variadic(3, 1, 2, 3), 6);
  EXPECT_EQ(seen_inside, "held");
}

TEST_F(Woven, TemplatesAreWovenPerInstantiation) {
  EXPECT_EQ(use_templates(5), 15);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(ask_probe("template:5"), "free");
  EXPECT_EQ(ask_probe("box:5"), "free");
}

TEST_F(Woven, AnExceptionReleasesTheLock) {
  EXPECT_THROW(throws(8), std::runtime_error);
  EXPECT_EQ(seen_inside, "held");
  EXPECT_EQ(ask_probe("throws:8"), "free");
}

TEST_F(Woven, BusyWithOnBusyThrowThrowsLockNotAcquiredAfterTheConfiguredWait) {
  dlock::Lease elsewhere = hold_elsewhere("free:13");
  ASSERT_TRUE(elsewhere);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(free_function(13), dlock::LockNotAcquired);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 180ms) << "the YAML override (wait: 200ms) applies to the guard";
  EXPECT_LT(waited, 2s);
}

TEST_F(Woven, BusyWithOnBusySkipSkipsTheBody) {
  dlock::Lease elsewhere = hold_elsewhere("skip:1");
  ASSERT_TRUE(elsewhere);
  EXPECT_FALSE(skip_bool(1));
  EXPECT_EQ(seen_inside, "") << "the body ran";
  EXPECT_EQ(skip_optional(1), std::nullopt);
  bool ran = false;
  skip_void(1, &ran);
  EXPECT_FALSE(ran);
  elsewhere.release();
  EXPECT_TRUE(skip_bool(1));
  EXPECT_EQ(skip_optional(1), 1);
  skip_void(1, &ran);
  EXPECT_TRUE(ran);
}

TEST_F(Woven, NestedGuardsOnOneKeyReenter) {
  EXPECT_EQ(nested_outer(1), 2) << "the inner guard is a second hold of the same lease";
  EXPECT_EQ(ask_probe("nested:1"), "free");
}

TEST_F(Woven, MinHoldKeepsTheLockAfterTheCallReturns) {
  const auto start = std::chrono::steady_clock::now();
  min_hold(3);
  EXPECT_EQ(ask_probe("min-hold:3"), "held");
  std::this_thread::sleep_until(start + 900ms);
  EXPECT_EQ(ask_probe("min-hold:3"), "free");
}

TEST_F(Woven, MemberChainAndThisPlaceholdersFormTheKey) {
  const Account::Owner manager{7};
  const Account account{Account::Owner{42}, &manager};
  EXPECT_EQ(member_chain(account), 42);
  EXPECT_EQ(seen_inside, "held");
  dlock::Lease elsewhere = hold_elsewhere("chain:42:7");
  ASSERT_TRUE(elsewhere) << "the guard released exactly the key it formed";
}

TEST_F(Woven, CurrentLeaseInsideTheBodyNamesTheGuardAndKey) {
  EXPECT_EQ(current_name(1), "woven::current_name|current:1");
  EXPECT_FALSE(dlock::current_lease()) << "nothing is held once the call returned";
}

TEST_F(Woven, UnreachableBackendThrowsBackendUnavailable) {
  dlock::Config dead = dlock::load_config(env->config_path);
  dead.backends["default"].endpoints = {dlock::Endpoint{"127.0.0.1", dlock::test::free_loopback_port()}};
  dlock::init(dead);
  EXPECT_THROW(skip_bool(2), dlock::BackendUnavailable) << "unavailable throws whatever on_busy says";
  EXPECT_THROW(free_function(2), dlock::BackendUnavailable);
  dlock::init(env->config_path);
}

}  // namespace
}  // namespace woven

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  woven::env = new woven::Environment;
  ::testing::AddGlobalTestEnvironment(woven::env);
  return RUN_ALL_TESTS();
}
