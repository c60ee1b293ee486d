// The lock + release cycle that several benchmark programs time on different backends: one
// client, one key, no contention, acquire through the public API and release at once.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>

#include "dlock/dlock.hpp"

namespace dlock::bench {

/// Times acquire + release of one key through a client of `config`, once per iteration.
inline void lock_release_cycles(benchmark::State& state, const dlock::Config& config) {
  dlock::Client client(config);
  dlock::LockSettings settings;
  settings.lease = std::chrono::seconds(30);
  settings.wait = std::chrono::milliseconds(0);
  for (auto _ : state) {
    dlock::Lease lease = client.acquire("bench-key", settings);
    if (!lease) state.SkipWithError("not acquired");
    benchmark::DoNotOptimize(lease.token());
  }
}

}  // namespace dlock::bench
