// Redlock next to a single node: one client, one key, no contention, the lock+release
// cycle through the public API against a single redis-server and against Redlock groups
// of 3 and 5 independent redis-servers, all started by the benchmark in the same run.
//
//   BM_SingleCycle        topology single: acquire + release
//   BM_RedlockCycle/3     topology redlock over 3 instances
//   BM_RedlockCycle/5     topology redlock over 5 instances (target: <= 1.6x BM_SingleCycle)
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "dlock/dlock.hpp"
#include "redis_groups.hpp"

namespace {

using namespace std::chrono_literals;

dlock::test::RedlockGroup& group() {
  static dlock::test::RedlockGroup& g = *[] {
    static dlock::test::RedlockGroup started(5);
    started.start();
    return &started;
  }();
  return g;
}

dlock::Config config_for(dlock::Topology topology, std::size_t instances) {
  dlock::Config config;
  config.service = "bench";
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.topology = topology;
  for (std::size_t i = 0; i < instances; ++i) {
    backend.endpoints.push_back(dlock::Endpoint{group().instance(i).host(), group().instance(i).port()});
  }
  config.backends["default"] = backend;
  return config;
}

void cycle(benchmark::State& state, const dlock::Config& config) {
  dlock::Client client(config);
  dlock::LockSettings settings;
  settings.lease = 30s;
  settings.wait = 0ms;
  for (auto _ : state) {
    dlock::Lease lease = client.acquire("bench-key", settings);
    if (!lease) state.SkipWithError("not acquired");
    benchmark::DoNotOptimize(lease.token());
  }
}

// The single node is instance 0 of the same group: same kind of server, same machine load.
void BM_SingleCycle(benchmark::State& state) { cycle(state, config_for(dlock::Topology::kSingle, 1)); }
BENCHMARK(BM_SingleCycle);

void BM_RedlockCycle(benchmark::State& state) {
  cycle(state, config_for(dlock::Topology::kRedlock, static_cast<std::size_t>(state.range(0))));
}
BENCHMARK(BM_RedlockCycle)->Arg(3)->Arg(5);

}  // namespace

BENCHMARK_MAIN();
