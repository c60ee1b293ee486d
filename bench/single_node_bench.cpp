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
#include <utility>
#include <vector>

#include "bench_support.hpp"
#include "cycle_bench.hpp"
#include "dlock/dlock.hpp"

namespace {

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

// dlock's acquire and release calls for one lock, with the keys, owner id and metadata dlock
// would send (see lock_scripts.cpp), the scripts loaded on `raw`. Two owners take turns, as
// every dlock acquisition has an owner of its own: a release that was not applied makes the
// next acquire find the lock busy, and the benchmark stops instead of measuring a reentry.
class DlockCalls {
 public:
  explicit DlockCalls(RawConnection& raw) {
    using dlock::bench::lua_source;
    const std::string acquire_sha = raw.load_script(lua_source("acquire.lua").c_str());
    const std::string release_sha = raw.load_script(lua_source("release.lua").c_str());
    for (const char* owner : {"5f3a9c1e2b7d4a605f3a9c1e2b7d4a60:1a", "5f3a9c1e2b7d4a605f3a9c1e2b7d4a60:1b"}) {
      const std::string keys = std::string(
          " 5 dlock:{bench:raw-key}:lock dlock:{bench:raw-key}:fence dlock:{bench:raw-key}:holders "
          "dlock:{bench:raw-key}:queue dlock:{bench:raw-key}:places ") + owner;
      acquire_.push_back("EVALSHA " + acquire_sha + keys +
                         " 30000 0 bench-host 12345 12345 raw-key 604800000 0 0 0");
      release_.push_back("EVALSHA " + release_sha + keys +
                         " 0 dlock:{bench:raw-key}:released 0 604800000");
    }
  }
  [[nodiscard]] const char* acquire() const { return acquire_[turn_].c_str(); }
  [[nodiscard]] const char* release() const { return release_[turn_].c_str(); }
  void next_owner() { turn_ = 1 - turn_; }

  /// Frees an acquire's reply; an error unless it granted the lock with a token above the
  /// last one.
  std::string check_granted(redisReply* reply) {
    const bool granted = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2 &&
                         reply->element[0]->type == REDIS_REPLY_INTEGER &&
                         reply->element[0]->integer == 1 && reply->element[1]->integer > token_;
    if (granted) token_ = reply->element[1]->integer;
    freeReplyObject(reply);
    return granted ? "" : "the acquire script did not grant the lock with a new token";
  }
  /// Frees a release's reply; an error unless it released the lock.
  static std::string check_released(redisReply* reply) {
    const bool released = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    return released ? "" : "the release script did not release the lock";
  }

 private:
  std::vector<std::string> acquire_, release_;
  int turn_ = 0;
  long long token_ = 0;
};

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
    DlockCalls calls(raw);
    bool release_unread = false;
    for (auto _ : state) {
      raw.send(calls.acquire());
      // Both replies are read before either is judged: the connection stays in step.
      const std::string released =
          std::exchange(release_unread, false) ? DlockCalls::check_released(raw.next_reply()) : "";
      const std::string granted = calls.check_granted(raw.next_reply());
      const std::string& error = released.empty() ? granted : released;
      if (!error.empty()) {
        state.SkipWithError(error.c_str());
        break;
      }
      raw.send(calls.release());
      release_unread = true;
      calls.next_owner();
    }
    if (release_unread) freeReplyObject(raw.next_reply());
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
