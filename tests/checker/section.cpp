#include "section.hpp"

#include <dlock/dlock.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "fenced_store.hpp"

namespace checker {

void record(const Run& run, const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] const auto written = ::write(run.history_fd, text.data(), text.size());
}

void fenced_increment(Run& run, std::uint64_t token, long long begin_ns) {
  const std::string t = std::to_string(token);
  record(run, fmt::format("B {} {} {}", run.sequence, t, begin_ns > 0 ? begin_ns : monotonic_ns()));
  const auto read = run.resource->array(fence_call("read", t));
  const long long t_read = monotonic_ns();
  const long value = std::stol(read.at(1));
  // The unfenced counter, updated by the same sections: what the lock alone protects.
  const long raw = std::stol(run.resource->string({"GET", kRawKey}).value_or("0"));
  std::this_thread::sleep_for(std::chrono::microseconds(run.work_us));
  const long long t_write_sent = monotonic_ns();
  const auto written = run.resource->array(fence_call("write", t, std::to_string(value + 1)));
  const long long t_write_done = monotonic_ns();
  run.resource->command({"SET", kRawKey, std::to_string(raw + 1)});
  record(run, fmt::format("E {} {} {} {} {} {} {}", run.sequence, t, t_read, t_write_sent,
                          t_write_done, written.at(0) == "1" ? "accepted" : "rejected",
                          monotonic_ns()));
}

[[dlock::guard("<key>", lease=1s, wait=20s)]]
void section(const std::string& key, Run& run) {
  fenced_increment(run, dlock::current_lease().token());
}

void broken_section(Run& run, int lease_ms) {
  // The hold begins before its token is drawn: the INCR is not atomic with this "grant", so a
  // section that starts and ends between the INCR and a later timestamp would look like a
  // token regression, which no lock produces. (dlock issues the token inside the grant.)
  const long long begin = monotonic_ns();
  run.resource->command({"SET", kBrokenLockKey, std::to_string(::getpid()), "PX",
                         std::to_string(lease_ms)});
  const auto token = static_cast<std::uint64_t>(run.resource->integer({"INCR", kBrokenTokenKey}));
  fenced_increment(run, token, begin);
  run.resource->command({"DEL", kBrokenLockKey});
}

}  // namespace checker
