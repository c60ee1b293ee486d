// What the harness's own selftests of server groups share (zookeeper_selftest.cpp,
// etcd_selftest.cpp): timing, whether processes have ended, and the line a holder program
// prints once its servers run. Header-only; for those selftests, not for tests of dlock.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "process_support.hpp"
#include "redis_process.hpp"

namespace dlock::test::selftest {

using Clock = std::chrono::steady_clock;

inline long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

/// Gone, or a zombie waiting for init (not ours to reap): both count as ended.
inline bool ended(pid_t pid) {
  const char state = detail::process_state(pid);
  return state == '?' || state == 'Z' || state == 'X';
}

/// Waits (10 s at most) until every one of `pids` has ended.
inline bool all_ended(const std::vector<pid_t>& pids) {
  return wait_until([&] { return std::all_of(pids.begin(), pids.end(), ended); },
                    std::chrono::seconds(10));
}

inline bool in_proc(pid_t pid) { return std::filesystem::exists("/proc/" + std::to_string(pid)); }

/// What follows "holding " on the first line of `holder`'s output that starts with it (a
/// holder prints its servers' pids and directories so), or std::nullopt when no such line
/// comes within `timeout` a line.
inline std::optional<std::string> holding_line(ChildProcess& holder,
                                               std::chrono::milliseconds timeout) {
  const std::string prefix = "holding ";
  for (;;) {
    auto line = holder.read_line(timeout);
    if (!line) return std::nullopt;
    if (line->rfind(prefix, 0) == 0) return line->substr(prefix.size());
  }
}

}  // namespace dlock::test::selftest
