#include "owner.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <string_view>

namespace dlock::internal {
namespace {

// The owner prefix is drawn once per process. Each thread keeps a copy, tagged with the pid
// it was drawn for: a child (forked, or cloned without atfork handlers) has another pid and
// draws its own, so it can never pass for its parent. The mutex is held across fork(), so a
// child never inherits it locked.
std::mutex g_identity_mutex;
void lock_before_fork() { g_identity_mutex.lock(); }
void unlock_after_fork() { g_identity_mutex.unlock(); }
[[maybe_unused]] const int g_fork_handlers =
    ::pthread_atfork(lock_before_fork, unlock_after_fork, unlock_after_fork);

// The calling thread's copy of the prefix: valid until the thread ends.
std::string_view owner_prefix() {
  // Trivially destructible, so that a lock taken from another thread_local's destructor
  // still finds it.
  thread_local long cached_pid = -1;
  thread_local std::array<char, 32> cached{};
  const long pid = ::getpid();
  if (cached_pid != pid) {
    static long drawn_for = -1;
    static std::string drawn;
    std::lock_guard lock(g_identity_mutex);
    if (drawn_for != pid) {
      std::random_device device;
      std::array<std::uint32_t, 4> words{};
      for (auto& w : words) w = device();
      drawn = fmt::format("{:08x}{:08x}{:08x}{:08x}", words[0], words[1], words[2], words[3]);
      drawn_for = pid;
    }
    drawn.copy(cached.data(), cached.size());
    cached_pid = pid;
  }
  return {cached.data(), cached.size()};
}

}  // namespace

std::string new_owner_id() {
  static std::atomic<std::uint64_t> counter{0};
  return fmt::format("{}:{:x}", owner_prefix(), counter.fetch_add(1, std::memory_order_relaxed));
}

const std::string& host_name() {
  static const std::string name = [] {
    std::array<char, 256> buffer{};
    if (::gethostname(buffer.data(), buffer.size() - 1) != 0) return std::string("unknown");
    return std::string(buffer.data());
  }();
  return name;
}

long process_id() { return ::getpid(); }

long thread_id() { return static_cast<long>(::syscall(SYS_gettid)); }

}  // namespace dlock::internal
