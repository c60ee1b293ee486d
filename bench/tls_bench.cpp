// What TLS costs a lock cycle: acquire + release through the public API over rediss:// next
// to the same cycle over plain TCP, against one redis-server that listens on both ports
// (started here, with the test certificates of tests/support/test_pki.hpp), in one run.
//
//   BM_PlainCycle   acquire + release over redis://
//   BM_TlsCycle     acquire + release over rediss:// (one handshake per pooled connection,
//                   done before the timing starts)
//   BM_PlainPing    one PING round trip on one connection over TCP
//   BM_TlsPing      the same over TLS: the floor of what TLS adds to a round trip, from the
//                   record layer on both ends and the server's TLS reads, which no client
//                   can avoid
#include <benchmark/benchmark.h>

#include "cycle_bench.hpp"
#include "dlock/dlock.hpp"
#include "redis/connection.hpp"
#include "redis_process.hpp"
#include "test_pki.hpp"

namespace {

dlock::test::RedisServer& tls_server() {
  static dlock::test::RedisServer server = [] {
    dlock::test::RedisServerOptions options;
    options.tls.enabled = true;
    dlock::test::RedisServer started(options);
    started.start();
    return started;
  }();
  return server;
}

dlock::Config config(bool tls) {
  dlock::test::RedisServer& server = tls_server();
  dlock::Config config;
  config.service = tls ? "bench-tls" : "bench-plain";
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.endpoints = {dlock::Endpoint{server.host(), tls ? server.tls_port() : server.port()}};
  backend.tls.enabled = tls;
  backend.tls.ca_file = dlock::test::test_pki().ca_file;
  config.backends["default"] = backend;
  return config;
}

void ping(benchmark::State& state, bool tls) {
  const dlock::BackendConfig backend = config(tls).backends["default"];
  std::string error;
  auto conn = dlock::internal::Connection::open(backend.endpoints.front(), backend, error);
  if (!conn) {
    state.SkipWithError(error.c_str());
    return;
  }
  for (auto _ : state) {
    if (!conn->command({"PING"}).ok()) state.SkipWithError("no PONG");
  }
}

void BM_PlainCycle(benchmark::State& state) {
  dlock::bench::lock_release_cycles(state, config(false));
}
void BM_TlsCycle(benchmark::State& state) {
  dlock::bench::lock_release_cycles(state, config(true));
}
void BM_PlainPing(benchmark::State& state) { ping(state, false); }
void BM_TlsPing(benchmark::State& state) { ping(state, true); }
BENCHMARK(BM_PlainCycle);
BENCHMARK(BM_TlsCycle);
BENCHMARK(BM_PlainPing);
BENCHMARK(BM_TlsPing);

}  // namespace

BENCHMARK_MAIN();
