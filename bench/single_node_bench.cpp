// One client, one key, no contention: the cost of a lock+release cycle next to the round
// trips it cannot avoid, measured against the same redis-server in the same run.
//
//   BM_RawPing            one PING round trip through hiredis
//   BM_RawSetNxPxAndDel   the floor of any Redis lock: SET NX PX, then an owner-checked
//                         release by EVALSHA (two round trips)
//   BM_RawDlockScripts    dlock's own acquire.lua + release.lua sent by raw hiredis with the
//                         arguments dlock sends: the server's share of a dlock cycle, without
//                         the client library (the difference to BM_LockReleaseCycle is the
//                         client's work)
//   BM_RawDlockScriptsOneWait  the same scripts with one awaited round trip, as a guarded call
//                         sends them: the release goes out at once and its reply is read
//                         with the next acquire's (the floor of the woven cycle for any
//                         client of these scripts)
//   BM_LockReleaseCycle   dlock: acquire + release through the public API
//   BM_WovenCycle         dlock: one call of a function with [[dlock::guard]], woven by
//                         dlock_weave() (the figure users get; built when the generator is)
//
// The server: see bench_support.hpp (DLOCK_BENCH_PORT, else one started here).
#include <benchmark/benchmark.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "cycle_bench.hpp"
#include "dlock_calls.hpp"
#include "dlock/dlock.hpp"

namespace {

using dlock::bench::RawConnection;
using dlock::bench::DlockCalls;

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

void BM_RawDlockScripts(benchmark::State& state) {
  try {
    RawConnection raw;
    DlockCalls calls(raw);
    for (auto _ : state) {
      std::string error = calls.check_granted(raw.command(calls.acquire()));
      if (error.empty()) error = DlockCalls::check_released(raw.command(calls.release()));
      if (!error.empty()) {
        state.SkipWithError(error.c_str());
        break;
      }
      calls.next_owner();
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(BM_RawDlockScripts);

void BM_RawDlockScriptsOneWait(benchmark::State& state) {
  try {
    RawConnection raw;
    dlock::bench::OneWaitCycles cycles(raw, "raw-key");
    for (auto _ : state) {
      if (const std::string error = cycles.step(); !error.empty()) {
        state.SkipWithError(error.c_str());
        break;
      }
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(BM_RawDlockScriptsOneWait);

void BM_LockReleaseCycle(benchmark::State& state) {
  dlock::bench::lock_release_cycles(state, dlock::bench::single_node_config("bench"));
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
  for (auto _ : state) {
    try {
      benchmark::DoNotOptimize(guarded_step(7));
    } catch (const std::exception& e) {  // LockNotAcquired, BackendUnavailable
      state.SkipWithError(e.what());
      break;
    }
  }
}
BENCHMARK(BM_WovenCycle);
#endif

}  // namespace

BENCHMARK_MAIN();
