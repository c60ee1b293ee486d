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

namespace dlock::internal {
namespace {

// Ids are looked up on every acquire, by many threads: each thread keeps its own copies, and
// a fork() makes them stale (the child has a pid, a thread id and an owner prefix of its own).
std::mutex g_identity_mutex;
std::atomic<unsigned> g_generation{1};  // bumped in a forked child

void lock_before_fork() { g_identity_mutex.lock(); }
void unlock_in_parent() { g_identity_mutex.unlock(); }
void forked_child() {
  g_generation.fetch_add(1, std::memory_order_relaxed);
  g_identity_mutex.unlock();
}
[[maybe_unused]] const int g_fork_handlers =
    ::pthread_atfork(lock_before_fork, unlock_in_parent, forked_child);

unsigned generation() noexcept { return g_generation.load(std::memory_order_relaxed); }

// 128 random bits, drawn once per process (again in a forked child).
const std::string& owner_prefix() {
  thread_local unsigned cached_generation = 0;
  thread_local std::string cached;
  const unsigned now = generation();
  if (cached_generation != now) {
    static std::string process_prefix;  // of prefix_generation
    static unsigned prefix_generation = 0;
    std::lock_guard lock(g_identity_mutex);
    if (prefix_generation != now) {
      std::random_device device;
      std::array<std::uint32_t, 4> words{};
      for (auto& w : words) w = device();
      process_prefix = fmt::format("{:08x}{:08x}{:08x}{:08x}", words[0], words[1], words[2], words[3]);
      prefix_generation = now;
    }
    cached = process_prefix;
    cached_generation = now;
  }
  return cached;
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

long process_id() {
  thread_local unsigned cached_generation = 0;
  thread_local long pid = 0;
  if (const unsigned now = generation(); cached_generation != now) {
    pid = ::getpid();
    cached_generation = now;
  }
  return pid;
}

long thread_id() {
  thread_local unsigned cached_generation = 0;
  thread_local long tid = 0;
  if (const unsigned now = generation(); cached_generation != now) {
    tid = static_cast<long>(::syscall(SYS_gettid));
    cached_generation = now;
  }
  return tid;
}

}  // namespace dlock::internal
