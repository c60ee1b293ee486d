#include "section.hpp"

#include <dlock/dlock.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "fenced_store.hpp"

namespace checker {

void record(const Run& run, const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] const auto written = ::write(run.history_fd, text.data(), text.size());
}

namespace {

// How long from `begin` the client counts the current lease held at least, in whole
// milliseconds (-1 outside a guard): what it has left (rounded down by remaining()) plus
// what had passed since `begin` before that was read (rounded down), so never past the
// client's own deadline.
long long valid_ms_from(const dlock::LeaseView& lease, long long begin) {
  if (!lease) return -1;
  const long long passed = monotonic_ns() - begin;
  const long long left = lease.remaining().count();
  if (left <= 0) return 0;
  return left + passed / 1'000'000;
}

// " kind keys tokens t_call t_answer valid_ms" of the current lease ("" outside a guard).
std::string grant_fields(const Run& run, long long begin) {
  const dlock::LeaseView lease = dlock::current_lease();
  if (!lease) return "";
  std::vector<std::string> keys;
  for (const dlock::Key& key : lease.keys()) keys.push_back(key.str());
  const char* kind = lease.permits() > 0                         ? "permit"
                     : lease.mode() == dlock::LockMode::kShared ? "shared"
                                                                 : "exclusive";
  const long long call = run.call_ns.load(), answer = run.answer_ns.load();
  return fmt::format(" {} {} {} {} {} {}", kind, fmt::join(keys, ","), fmt::join(lease.tokens(), ","),
                     call > 0 ? call : begin, answer > 0 ? std::min(answer, begin) : begin,
                     valid_ms_from(lease, begin));
}

// "V seq t valid_ms": how long from t the client counts the lease held, so that a holder
// killed later in its body (a watchdog renewal in between) is counted held that long.
void record_validity(const Run& run) {
  const long long now = monotonic_ns();
  const long long valid_ms = valid_ms_from(dlock::current_lease(), now);
  if (valid_ms >= 0) record(run, fmt::format("V {} {} {}", run.sequence, now, valid_ms));
}

// " valid" while the current lease is still known to be held, " expired" after; read after the
// end time is taken, so "valid" covers the whole body ("" outside a guard).
std::string validity() {
  const dlock::LeaseView lease = dlock::current_lease();
  if (!lease) return "";
  return lease.remaining().count() > 0 ? " valid" : " expired";
}

}  // namespace

void fenced_increment(Run& run, std::uint64_t token, long long begin_ns) {
  const std::string t = std::to_string(token);
  const long long begin = begin_ns > 0 ? begin_ns : monotonic_ns();
  record(run, fmt::format("B {} {} {}{}", run.sequence, t, begin, grant_fields(run, begin)));
  const auto read = run.resource->array(fence_call("read", t));
  const long long t_read = monotonic_ns();
  const long value = std::stol(read.at(1));
  // The unfenced counter, updated by the same sections: what the lock alone protects.
  const long raw = std::stol(run.resource->string({"GET", kRawKey}).value_or("0"));
  std::this_thread::sleep_for(std::chrono::microseconds(run.work_us));
  record_validity(run);
  const long long t_write_sent = monotonic_ns();
  const auto written = run.resource->array(fence_call("write", t, std::to_string(value + 1)));
  const long long t_write_done = monotonic_ns();
  run.resource->command({"SET", kRawKey, std::to_string(raw + 1)});
  const long long end = monotonic_ns();
  record(run, fmt::format("E {} {} {} {} {} {} {}{}", run.sequence, t, t_read, t_write_sent,
                          t_write_done, written.at(0) == "1" ? "accepted" : "rejected", end,
                          validity()));
}

void observe(Run& run) {
  const std::string t = std::to_string(dlock::current_lease().token());
  const long long begin = monotonic_ns();
  record(run, fmt::format("B {} {} {}{}", run.sequence, t, begin, grant_fields(run, begin)));
  std::this_thread::sleep_for(std::chrono::microseconds(run.work_us));
  record_validity(run);
  const long long end = monotonic_ns();
  record(run, fmt::format("E {} {} {} {} {} none {}{}", run.sequence, t, end, end, end, end, validity()));
}

[[dlock::guard("<key>", lease=1s, wait=20s)]]
void section(const std::string& key, Run& run) {
  fenced_increment(run, dlock::current_lease().token());
}

[[dlock::guard("<key>", mode=shared, lease=1s, wait=20s)]]
void shared_section(const std::string& key, Run& run) {
  observe(run);
}

[[dlock::guard("<key>", permits=2, lease=1s, wait=20s)]]
void permit_section(const std::string& key, Run& run) {
  observe(run);
}

[[dlock::guard("<key>", fair=true, lease=1s, wait=20s)]]
void fair_section(const std::string& key, Run& run) {
  fenced_increment(run, dlock::current_lease().token());
}

[[dlock::guard("<first>", "<second>", lease=1s, wait=20s)]]
void multi_section(const std::string& first, const std::string& second, Run& run) {
  observe(run);
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
