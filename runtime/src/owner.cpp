#include "owner.hpp"

#include <fmt/format.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>

namespace dlock::internal {
namespace {

struct ProcessIdentity {
  long pid = -1;
  std::string prefix;
};

// Recomputed after fork(): a child must not reuse its parent's owner prefix.
std::string owner_prefix() {
  static std::mutex mutex;
  static ProcessIdentity identity;
  const long pid = ::getpid();
  std::lock_guard lock(mutex);
  if (identity.pid != pid) {
    std::random_device device;
    std::array<std::uint32_t, 4> words{};
    for (auto& w : words) w = device();
    identity.prefix =
        fmt::format("{:08x}{:08x}{:08x}{:08x}", words[0], words[1], words[2], words[3]);
    identity.pid = pid;
  }
  return identity.prefix;
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
