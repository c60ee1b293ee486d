// Holds many leases in one process and reports how late the watchdog starts their renewals,
// what its threads cost in CPU, and what a held lease costs in memory
// (client process and server).
//
//   dlock_bench_watchdog [--leases N] [--seconds S] [--lease-ms L]
//
// CPU of the watchdog: utime + stime of its threads ("dlock-watchdog", the scheduler, and
// "dlock-renew", the backend's renewal worker) in /proc/self/task/*/stat over the holding
// period. Memory per lease: growth of the process's
// resident set and of the server's used_memory while the leases were acquired, divided by N.
// Last line, for scripts/bench:
//   RESULT watchdog leases=N lease_ms=L renewals=R lost=0 lag_p99_us=.. lag_max_us=..
//          lag_p99_pct=.. watchdog_cpu_pct=.. process_cpu_pct=.. client_bytes_per_lease=..
//          server_bytes_per_lease=..
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"

using namespace std::chrono_literals;

namespace {

// CPU seconds (user + system) of this process's threads called one of `names`, or -1 if
// there is none.
double thread_cpu_seconds(const std::vector<std::string>& names) {
  double total = -1;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string thread_name;
    std::getline(comm, thread_name);
    if (std::find(names.begin(), names.end(), thread_name) == names.end()) continue;
    std::ifstream stat_file(task.path() / "stat");
    std::string stat;
    std::getline(stat_file, stat);
    // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::vector<std::string> fields;
    for (std::string field; rest >> field;) fields.push_back(field);
    if (fields.size() < 13) continue;
    const double ticks = std::stod(fields[11]) + std::stod(fields[12]);
    total = std::max(total, 0.0) + ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return total;
}

const std::vector<std::string> kWatchdogThreads{"dlock-watchdog", "dlock-renew"};

long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

long server_used_memory(dlock::bench::RawConnection& raw) {
  redisReply* reply = raw.command("INFO memory");
  const std::string info(reply->str != nullptr ? reply->str : "", reply->len);
  freeReplyObject(reply);
  const auto at = info.find("used_memory:");
  return at == std::string::npos ? 0 : std::stol(info.substr(at + 12));
}

}  // namespace

int main(int argc, char** argv) try {
  dlock::bench::check_options(argc, argv, {"--leases", "--seconds", "--lease-ms"});
  const long leases = dlock::bench::option(argc, argv, "--leases", 1000);
  const long seconds = dlock::bench::option(argc, argv, "--seconds", 10);
  const long lease_ms = dlock::bench::option(argc, argv, "--lease-ms", 3000);

  dlock::Client client(dlock::bench::single_node_config("bench-watchdog"));
  dlock::LockSettings settings;
  settings.lease = std::chrono::milliseconds(lease_ms);
  settings.wait = 0ms;
  dlock::bench::RawConnection raw;
  client.acquire("warm-up", settings).release();  // connections, watchdog threads

  std::vector<dlock::Lease> held;
  held.reserve(static_cast<std::size_t>(leases));
  const long rss_before = resident_bytes();
  const long server_before = server_used_memory(raw);
  for (long i = 0; i < leases; ++i) {
    held.push_back(client.acquire(fmt::format("lease-{}", i), settings));
    if (!held.back()) {
      fmt::print(stderr, "lease {} not acquired: {}\n", i, held.back().error());
      return 1;
    }
  }
  const long rss_after = resident_bytes();
  const long server_after = server_used_memory(raw);
  // Acquisition takes a while with many leases: the first renewals are already under way.
  const dlock::MetricsSnapshot start = client.metrics();
  const double watchdog_before = thread_cpu_seconds(kWatchdogThreads);
  const double process_before = dlock::bench::cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double watchdog_after = thread_cpu_seconds(kWatchdogThreads);
  const double process_after = dlock::bench::cpu_seconds();

  const dlock::MetricsSnapshot m = client.metrics();
  long lost = 0;
  for (const auto& lease : held) lost += lease.lost() ? 1 : 0;
  const auto& lag = m.renewal_lag;
  const double lease_us = double(lease_ms) * 1000.0;
  const double watchdog_cpu = watchdog_before < 0 ? -1 : 100.0 * (watchdog_after - watchdog_before) / double(seconds);
  const double process_cpu = 100.0 * (process_after - process_before) / double(seconds);
  const double client_per_lease = double(rss_after - rss_before) / double(leases);
  const double server_per_lease = double(server_after - server_before) / double(leases);
  fmt::print("watchdog: {} leases of {} ms held {} s: {} renewals ({} during the hold), {} lost\n", leases,
             lease_ms, seconds, m.renewals, m.renewals - start.renewals, lost);
  fmt::print("renewal lag: mean {:.0f} us, p50 <= {} us, p99 <= {} us ({:.2f}% of the lease), max {} us\n",
             lag.mean_us(), lag.percentile_us(0.5), lag.percentile_us(0.99),
             100.0 * double(lag.percentile_us(0.99)) / lease_us, lag.max_us);
  fmt::print("CPU while holding: watchdog threads {:.2f}% of one core, whole process {:.2f}%\n", watchdog_cpu,
             process_cpu);
  fmt::print("memory per lease: client {:.0f} bytes (resident set), server {:.0f} bytes (used_memory)\n",
             client_per_lease, server_per_lease);
  fmt::print(
      "RESULT watchdog leases={} lease_ms={} renewals={} lost={} lag_p99_us={} lag_max_us={} lag_p99_pct={:.3f} "
      "watchdog_cpu_pct={:.2f} process_cpu_pct={:.2f} client_bytes_per_lease={:.0f} server_bytes_per_lease={:.0f}\n",
      leases, lease_ms, m.renewals, lost, lag.percentile_us(0.99), lag.max_us,
      100.0 * double(lag.percentile_us(0.99)) / lease_us, watchdog_cpu, process_cpu, client_per_lease,
      server_per_lease);
  return lost == 0 && m.renewals > 0 && watchdog_cpu >= 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "dlock_bench_watchdog: {}\n", e.what());
  return 1;
}
