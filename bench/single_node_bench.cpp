// One client, one key, no contention: the cost of a lock+release cycle next to the round
// trips it cannot avoid, measured against the same redis-server in the same run.
//
//   BM_RawPing            one PING round trip through hiredis
//   BM_RawSetNxPxAndDel   the floor of any Redis lock: SET NX PX, then an owner-checked
//                         release by EVALSHA (two round trips)
//   BM_LockReleaseCycle   dlock: acquire + release through the public API
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>

#include "dlock/dlock.hpp"
#include "redis_process.hpp"

namespace {

using namespace std::chrono_literals;

dlock::test::RedisServer& server() {
  static dlock::test::RedisServer s = [] {
    dlock::test::RedisServer started;
    started.start();
    return started;
  }();
  return s;
}

struct Raw {
  redisContext* ctx;
  Raw() : ctx(redisConnect(server().host().c_str(), server().port())) {}
  ~Raw() { redisFree(ctx); }
  redisReply* run(const char* fmt_text, const char* a = nullptr, const char* b = nullptr) {
    return static_cast<redisReply*>(redisCommand(ctx, fmt_text, a, b));
  }
};

void BM_RawPing(benchmark::State& state) {
  Raw raw;
  for (auto _ : state) freeReplyObject(raw.run("PING"));
}
BENCHMARK(BM_RawPing);

void BM_RawSetNxPxAndDel(benchmark::State& state) {
  Raw raw;
  constexpr const char* kRelease =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
  auto* loaded = raw.run("SCRIPT LOAD %s", kRelease);
  const std::string sha(loaded->str, loaded->len);
  freeReplyObject(loaded);
  for (auto _ : state) {
    freeReplyObject(raw.run("SET raw-lock owner-1 NX PX 30000"));
    freeReplyObject(static_cast<redisReply*>(
        redisCommand(raw.ctx, "EVALSHA %s 1 raw-lock owner-1", sha.c_str())));
  }
}
BENCHMARK(BM_RawSetNxPxAndDel);

void BM_LockReleaseCycle(benchmark::State& state) {
  dlock::Config config;
  config.service = "bench";
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.endpoints = {dlock::Endpoint{server().host(), server().port()}};
  config.backends["default"] = backend;
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
BENCHMARK(BM_LockReleaseCycle);

}  // namespace

BENCHMARK_MAIN();
