// The process-wide registry of the harness's child processes, and the safety nets that kill
// whatever is registered when the test program exits or dies of a signal.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "process_support.hpp"
#include "redis_process.hpp"

namespace dlock::test {
namespace detail {
namespace {

// Process registry. Slots are lock-free atomics so that the fatal-signal handler can read them.
// Each slot packs the owner's pid (the process that spawned the child; a fork of the test
// program, e.g. a gtest death test, must not kill its parent's servers) and the child's pid.
// Invariant: a child is registered from fork until it is reaped, so a registered pid can
// never have been reused by an unrelated process.

constexpr std::size_t kMaxChildren = 1024;
std::array<std::atomic<std::uint64_t>, kMaxChildren> g_children{};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

constexpr std::uint64_t pack(pid_t owner, pid_t child) {
  return (std::uint64_t{static_cast<std::uint32_t>(owner)} << 32) |
         std::uint64_t{static_cast<std::uint32_t>(child)};
}
constexpr pid_t owner_of(std::uint64_t slot) { return static_cast<pid_t>(slot >> 32); }
constexpr pid_t child_of(std::uint64_t slot) { return static_cast<pid_t>(slot & 0xffffffffu); }

constexpr std::array<int, 9> kFatalSignals = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL,
                                              SIGTERM, SIGINT,  SIGHUP, SIGQUIT};
std::array<struct sigaction, kFatalSignals.size()> g_previous_actions{};

// Async-signal-safe: only atomics, getpid and kill.
void kill_registered_children() noexcept {
  const pid_t self = ::getpid();
  for (auto& slot : g_children) {
    const std::uint64_t value = slot.load();
    if (value != 0 && owner_of(value) == self) {
      ::kill(-child_of(value), SIGKILL);  // its process group: fork children of the server
      ::kill(child_of(value), SIGKILL);
    }
  }
}

void kill_children_at_exit() {
  kill_registered_children();
  const pid_t self = ::getpid();
  for (auto& slot : g_children) {
    const std::uint64_t value = slot.load();
    if (value != 0 && owner_of(value) == self) {
      reap(child_of(value), std::chrono::seconds(2));
      unregister_child(child_of(value));
    }
  }
}

extern "C" void on_fatal_signal(int sig) {
  const int saved_errno = errno;
  kill_registered_children();
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals[i] == sig) ::sigaction(sig, &g_previous_actions[i], nullptr);
  }
  errno = saved_errno;
  // Delivered again once this handler returns, now to the previous disposition.
  ::raise(sig);
}

}  // namespace

void unregister_child(pid_t child) noexcept {
  const std::uint64_t value = pack(::getpid(), child);
  for (auto& slot : g_children) {
    std::uint64_t expected = value;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

bool is_registered(pid_t child) noexcept {
  const std::uint64_t value = pack(::getpid(), child);
  for (auto& slot : g_children) {
    if (slot.load() == value) return true;
  }
  return false;
}

// Installs the exit and signal safety nets once per process. Also ignores SIGPIPE: hiredis
// writes with plain write(2), and a test that kills a server must not die when it next sends.
void install_process_safety_net() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit(kill_children_at_exit);
    for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
      struct sigaction previous {};
      ::sigaction(kFatalSignals[i], nullptr, &previous);
      // A signal the process ignores (SIGHUP under nohup) does not end it: leave it alone.
      if (previous.sa_handler == SIG_IGN) continue;
      g_previous_actions[i] = previous;
      struct sigaction action {};
      action.sa_handler = on_fatal_signal;
      sigemptyset(&action.sa_mask);
      ::sigaction(kFatalSignals[i], &action, nullptr);
    }
    struct sigaction pipe_action {};
    ::sigaction(SIGPIPE, nullptr, &pipe_action);
    if (pipe_action.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  });
}

void register_child(pid_t child) {
  const std::uint64_t value = pack(::getpid(), child);
  for (auto& slot : g_children) {
    std::uint64_t expected = 0;
    if (slot.compare_exchange_strong(expected, value)) return;
  }
  ::kill(child, SIGKILL);
  reap(child, std::chrono::seconds(2));
  throw std::runtime_error(fmt::format("more than {} live child processes", kMaxChildren));
}

}  // namespace detail

std::vector<pid_t> live_child_pids() {
  using namespace detail;
  std::vector<pid_t> pids;
  const pid_t self = ::getpid();
  for (auto& slot : g_children) {
    const std::uint64_t value = slot.load();
    if (value != 0 && owner_of(value) == self) pids.push_back(child_of(value));
  }
  return pids;
}

}  // namespace dlock::test
