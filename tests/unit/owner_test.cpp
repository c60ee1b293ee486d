// Who a lock's holder is (owner.hpp). Each thread keeps a copy of the owner prefix, so these
// tests check that every thread and every child process gets ids of its own.
#include "owner.hpp"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace dlock::internal {
namespace {

std::string prefix_of(const std::string& owner) { return owner.substr(0, owner.find(':')); }

TEST(Owner, EachThreadGetsItsOwnKernelIdAndTheProcessId) {
  EXPECT_EQ(process_id(), ::getpid());
  EXPECT_EQ(thread_id(), static_cast<long>(::syscall(SYS_gettid)));
  std::vector<long> seen(4, 0);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      if (thread_id() != static_cast<long>(::syscall(SYS_gettid))) ++mismatches;
      if (process_id() != ::getpid()) ++mismatches;
      seen[i] = thread_id();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_NE(seen[i], thread_id());
    for (std::size_t j = i + 1; j < seen.size(); ++j) EXPECT_NE(seen[i], seen[j]);
  }
}

TEST(Owner, OwnerIdsShareTheProcessPrefixAndNeverRepeat) {
  const std::string a = new_owner_id();
  std::string b;
  std::thread([&] { b = new_owner_id(); }).join();
  EXPECT_EQ(prefix_of(a).size(), 32U);
  EXPECT_EQ(prefix_of(a), prefix_of(b));
  EXPECT_NE(a, b);
}

// The child must not pass for its parent: not by pid, not by thread id, not by owner prefix.
TEST(Owner, AForkedChildHasIdsOfItsOwn) {
  const std::string parent_owner = new_owner_id();
  const long parent_pid = process_id();
  const long parent_tid = thread_id();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    if (process_id() != ::getpid() || process_id() == parent_pid) code |= 1;
    if (thread_id() != static_cast<long>(::syscall(SYS_gettid)) || thread_id() == parent_tid)
      code |= 2;
    if (prefix_of(new_owner_id()) == prefix_of(parent_owner)) code |= 4;
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: pid, 2: thread id, 4: owner prefix taken from the parent";
  EXPECT_EQ(process_id(), parent_pid);
  EXPECT_EQ(prefix_of(new_owner_id()), prefix_of(parent_owner));
}

// _Fork() runs no atfork handlers (nor does a raw clone): the child still tells itself apart.
TEST(Owner, AChildMadeWithoutForkHandlersHasAnOwnerPrefixOfItsOwn) {
  const std::string parent_owner = new_owner_id();
  const pid_t child = ::_Fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const bool own = prefix_of(new_owner_id()) != prefix_of(parent_owner) &&
                     process_id() == ::getpid();
    ::_exit(own ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child took its parent's owner prefix";
}

}  // namespace
}  // namespace dlock::internal
