// One client, one key, no contention: the cost of a lock+release cycle next to the round
// trips it cannot avoid, measured against the same redis-server in the same run.
//
//   BM_RawPing            one PING round trip through hiredis
//   BM_RawSetNxPxAndDel   the floor of any Redis lock: SET NX PX, then an owner-checked
//                         release by EVALSHA (two round trips)
//   BM_LockReleaseCycle   dlock: acquire + release through the public API
//   BM_WovenCycle         dlock: one call of a function with [[dlock::guard]], woven by
//                         dlock_weave() (the figure users get; built when the generator is)
//
// The server: see bench_support.hpp (DLOCK_BENCH_PORT, else one started here).
#include <benchmark/benchmark.h>

#include <chrono>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::bench::RawConnection;

void BM_RawPing(benchmark::State& state) {
  RawConnection raw;
  for (auto _ : state) raw.run("PING");
}
BENCHMARK(BM_RawPing);

void BM_RawSetNxPxAndDel(benchmark::State& state) {
  RawConnection raw;
  const std::string sha = raw.load_script(dlock::bench::kFloorRelease);
  for (auto _ : state) {
    raw.run("SET raw-lock owner-1 NX PX 30000");
    raw.run("EVALSHA %s 1 raw-lock owner-1", sha.c_str());
  }
}
BENCHMARK(BM_RawSetNxPxAndDel);

void BM_LockReleaseCycle(benchmark::State& state) {
  dlock::Client client(dlock::bench::single_node_config("bench"));
  dlock::LockSettings settings;
  settings.lease = 30s;
  settings.wait = 0ms;
  for (auto _ : state) {
    dlock::Lease lease = client.acquire("bench-key", settings);
    if (!lease) state.SkipWithError("not acquired");
    benchmark::DoNotOptimize(lease.token());
  }
}
BENCHMARK(BM_LockReleaseCycle);

#ifdef DLOCK_BENCH_WOVEN
// Woven: every call acquires bench:<id>, runs the body, releases. wait=0s: a busy lock
// throws dlock::LockNotAcquired, which would end the benchmark with an error.
[[dlock::guard("bench:<id>", lease=30s, wait=0s)]]
long guarded_step(long id) {
  return id + 1;
}

void BM_WovenCycle(benchmark::State& state) {
  static const bool configured = [] {
    dlock::init(dlock::bench::single_node_config("bench"));
    return true;
  }();
  benchmark::DoNotOptimize(configured);
  for (auto _ : state) benchmark::DoNotOptimize(guarded_step(7));
}
BENCHMARK(BM_WovenCycle);
#endif

}  // namespace

BENCHMARK_MAIN();
