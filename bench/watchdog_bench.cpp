// Holds many leases in one process and reports how late the single watchdog thread starts
// their renewals, and what that thread costs.
//
//   dlock_bench_watchdog [--leases N] [--seconds S] [--lease-ms L]
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client_core.hpp"
#include "dlock/dlock.hpp"
#include "redis_process.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  int leases = 1000;
  int seconds = 10;
  int lease_ms = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--leases") == 0) leases = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::stoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--lease-ms") == 0) lease_ms = std::stoi(argv[i + 1]);
  }
  dlock::test::RedisServer server;
  server.start();
  dlock::Config config;
  config.service = "bench-watchdog";
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.endpoints = {dlock::Endpoint{server.host(), server.port()}};
  config.backends["default"] = backend;
  dlock::Client client(config);
  dlock::LockSettings settings;
  settings.lease = std::chrono::milliseconds(lease_ms);
  settings.wait = 0ms;

  std::vector<dlock::Lease> held;
  held.reserve(leases);
  for (int i = 0; i < leases; ++i) {
    held.push_back(client.acquire(fmt::format("lease-{}", i), settings));
    if (!held.back()) {
      fmt::print(stderr, "lease {} not acquired: {}\n", i, held.back().error());
      return 1;
    }
  }
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  rusage after{};
  getrusage(RUSAGE_SELF, &after);

  const dlock::MetricsSnapshot m = client.metrics();
  int lost = 0;
  for (const auto& lease : held) lost += lease.lost() ? 1 : 0;
  const auto cpu_us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000L + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
  };
  const double cpu_share = double(cpu_us(after) - cpu_us(before)) / (seconds * 1e6);
  const auto& lag = m.renewal_lag;
  fmt::print("watchdog: {} leases of {} ms held {} s: {} renewals, {} lost\n", leases, lease_ms,
             seconds, m.renewals, lost);
  fmt::print("renewal lag: mean {:.0f} us, p50 <= {} us, p99 <= {} us, max {} us ({:.2f}% of the lease)\n",
             lag.mean_us(), lag.percentile_us(0.5), lag.percentile_us(0.99), lag.max_us,
             100.0 * double(lag.max_us) / (lease_ms * 1000.0));
  fmt::print("process CPU while holding: {:.2f}% of one core\n", 100.0 * cpu_share);
  return lost == 0 && m.renewals > 0 ? 0 : 1;
}
