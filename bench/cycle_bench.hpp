// The lock + release cycle that several benchmark programs time on different backends: one
// client, one key, no contention, acquire through the public API and release at once.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>

#include "dlock/dlock.hpp"

namespace dlock::bench {

/// Times acquire + release of one key through a client of `config`, once per iteration: an
/// exclusive lock, or with `permits` > 0 a permit of a semaphore of that size.
inline void lock_release_cycles(benchmark::State& state, const dlock::Config& config,
                                int permits = 0) {
  dlock::Client client(config);
  dlock::LockSettings settings;
  settings.lease = std::chrono::seconds(30);
  settings.wait = std::chrono::milliseconds(0);
  settings.permits = permits;
  const char* key = permits > 0 ? "bench-permits" : "bench-key";
  for (auto _ : state) {
    dlock::Lease lease = client.acquire(key, settings);
    if (!lease) state.SkipWithError("not acquired");
    benchmark::DoNotOptimize(lease.token());
  }
}

}  // namespace dlock::bench
