// What a lock costs on PostgreSQL, next to that engine's own floor in the same run, against
// one server (DLOCK_BENCH_PG_DSN, or one started here):
//
//   BM_PostgresCycle     acquire + release through the public API (topology: postgres)
//   BM_PostgresPermitCycle  the same for a permit of a semaphore of 3 (the key's queue)
//   BM_RawFloor          the floor: the smallest acquiring statement (an INSERT ... ON
//                        CONFLICT DO UPDATE taking a free or expired row, RETURNING) and an
//                        owner-checked DELETE, prepared, over raw libpq
//   BM_RawDlockStatements  dlock's own acquire and release statements over raw libpq: what the
//                        statements cost without the client library around them
//   BM_RawQueueStatements  the same for the queue's statements of a permit (pg_queue_sql.hpp)
//   BM_Ping              `SELECT 1`, prepared: one round trip
//
// The handoff (--handoff ROUNDS, run instead of the above): a holder releases while a second
// client waits in acquire(), woken by LISTEN/NOTIFY; the time from release() to the waiter's
// acquire() returning, next to the raw floor of the same path (a DELETE that notifies, a
// thread blocked on its LISTEN connection that then runs the acquiring statement), in blocks
// of 25 rounds taken in turn.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "cycle_bench.hpp"
#include "dlock/dlock.hpp"
#include "postgres/pg_statements.hpp"
#include "postgres_server.hpp"

namespace {

using Clock = std::chrono::steady_clock;

const std::string& dsn() {
  static const std::string value = [] {
    if (const char* env = std::getenv("DLOCK_BENCH_PG_DSN"); env != nullptr && *env != '\0') {
      return std::string(env);
    }
    static dlock::test::PostgresServer server;
    server.start();
    return server.dsn();
  }();
  return value;
}

dlock::Config config(const std::string& service) {
  dlock::Config config;
  config.service = service;
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.topology = dlock::Topology::kPostgres;
  backend.dsn = dsn();
  config.backends["default"] = backend;
  return config;
}

/// One blocking libpq connection for the raw references.
class Raw {
 public:
  Raw() : conn_(PQconnectdb(dsn().c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(conn_));
  }
  ~Raw() { PQfinish(conn_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  void exec(const std::string& sql) { check(PQexec(conn_, sql.c_str()), sql); }
  void prepare(const char* name, const std::string& sql) {
    check(PQprepare(conn_, name, sql.c_str(), 0, nullptr), name);
  }
  /// Runs a prepared statement; returns the first column of the first row ("" for none).
  std::string run(const char* name, const std::vector<std::string>& params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p.c_str());
    PGresult* result = PQexecPrepared(conn_, name, static_cast<int>(values.size()),
                                      values.data(), nullptr, nullptr, 0);
    std::string first;
    if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0) {
      first = PQgetvalue(result, 0, 0);
    }
    check(result, name);
    return first;
  }
  PGconn* get() { return conn_; }

 private:
  void check(PGresult* result, const std::string& what) {
    const auto status = PQresultStatus(result);
    const std::string error = PQresultErrorMessage(result);
    PQclear(result);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      throw std::runtime_error(fmt::format("{}: {}", what.substr(0, 60), error));
    }
  }
  PGconn* conn_;
};

constexpr const char* kFloorTable = R"(
CREATE TABLE IF NOT EXISTS bench_floor (key text PRIMARY KEY, owner text NOT NULL,
                                        expires_at timestamptz NOT NULL))";
constexpr const char* kFloorAcquire = R"(
INSERT INTO bench_floor AS f (key, owner, expires_at)
VALUES ($1, $2, clock_timestamp() + interval '30 seconds')
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE f.expires_at <= clock_timestamp()
RETURNING 1)";
constexpr const char* kFloorRelease = "DELETE FROM bench_floor WHERE key = $1 AND owner = $2";
constexpr const char* kFloorReleaseNotify = R"(
WITH gone AS (DELETE FROM bench_floor WHERE key = $1 AND owner = $2 RETURNING 1)
SELECT pg_notify('bench_floor', $1) FROM gone)";

void prepare_floor(Raw& raw) {
  raw.prepare("floor_acquire", kFloorAcquire);
  raw.prepare("floor_release", kFloorRelease);
  raw.prepare("floor_release_notify", kFloorReleaseNotify);
}

Raw& floor_connection() {
  static Raw raw;
  static const bool ready = [] {
    raw.exec(kFloorTable);
    prepare_floor(raw);
    raw.prepare("ping", "SELECT 1");
    return true;
  }();
  (void)ready;
  return raw;
}

void BM_PostgresCycle(benchmark::State& state) {
  dlock::bench::lock_release_cycles(state, config("bench-postgres"));
}

// The cycle of a permit of a semaphore of 3: the key's queue (an UPDATE of its jsonb entries
// and the RETURNING of them) instead of the row's own holder.
void BM_PostgresPermitCycle(benchmark::State& state) {
  dlock::bench::lock_release_cycles(state, config("bench-postgres"), 3);
}

void BM_RawFloor(benchmark::State& state) {
  Raw& raw = floor_connection();
  for (auto _ : state) {
    if (raw.run("floor_acquire", {"bench-key", "owner"}) != "1") state.SkipWithError("busy");
    raw.run("floor_release", {"bench-key", "owner"});
  }
}

// One connection with dlock's statements prepared as the backend prepares them, for the table
// a client made (the exclusive pair and the queue's pair).
Raw& dlock_statements_connection() {
  static Raw& raw = *[] {
    dlock::Client(config("bench-raw")).acquire("warm", dlock::LockSettings{}).release();
    static Raw made;
    using dlock::internal::PgStatement;
    const dlock::internal::PgStatements statements("dlock_locks");
    made.prepare("acquire", statements.sql(PgStatement::kAcquire));
    made.prepare("release", statements.sql(PgStatement::kRelease));
    made.prepare("queue_acquire", statements.sql(PgStatement::kQueueAcquire));
    made.prepare("queue_release", statements.sql(PgStatement::kQueueRelease));
    return &made;
  }();
  return raw;
}

void BM_RawDlockStatements(benchmark::State& state) {
  Raw& raw = dlock_statements_connection();
  for (auto _ : state) {
    // A grant answers its token; a refusal, no row.
    if (raw.run("acquire", {"bench-raw", "6b6579", "owner", "30000", "0", "", "1", "1", ""})
            .empty()) {
      state.SkipWithError("busy");
    }
    raw.run("release", {"bench-raw", "6b6579", "owner", "0", "dlock_locks", "bench-raw k"});
  }
}

// The queue's acquire and release statements (a permit of 3) over raw libpq: what the
// permit's statements cost without the client library around them.
void BM_RawQueueStatements(benchmark::State& state) {
  Raw& raw = dlock_statements_connection();
  for (auto _ : state) {
    raw.run("queue_acquire", {"bench-raw", "7065726d6974", "raw:1", "30000", "0", "", "1", "1",
                              "", "2", "3", "false"});
    raw.run("queue_release",
            {"bench-raw", "7065726d6974", "raw:1", "0", "dlock_locks", "bench-raw p"});
  }
}

void BM_Ping(benchmark::State& state) {
  Raw& raw = floor_connection();
  for (auto _ : state) raw.run("ping", {});
}

BENCHMARK(BM_PostgresCycle);
BENCHMARK(BM_PostgresPermitCycle);
BENCHMARK(BM_RawFloor);
BENCHMARK(BM_RawDlockStatements);
BENCHMARK(BM_RawQueueStatements);
BENCHMARK(BM_Ping);

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples.empty() ? 0.0 : samples[samples.size() / 2];
}

// One dlock handoff: `holder` holds the key; a thread of `waiter` waits for it; the clock
// runs from the holder's release() to the waiter's acquire() returning.
double dlock_handoff(dlock::Client& holder, dlock::Client& waiter, int round) {
  dlock::LockSettings lease;
  lease.wait = std::chrono::seconds(5);
  const std::string key = fmt::format("handoff-{}", round);
  dlock::Lease held = holder.acquire(key, lease);
  std::atomic<Clock::time_point::rep> acquired{0};
  const auto waits_before = waiter.metrics().waits;
  std::thread thread([&] {
    dlock::Lease got = waiter.acquire(key, lease);
    acquired = Clock::now().time_since_epoch().count();
  });
  while (waiter.metrics().waits == waits_before) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const auto released = Clock::now();
  held.release();
  thread.join();
  return std::chrono::duration<double, std::micro>(
             Clock::time_point(Clock::duration(acquired.load())) - released)
      .count();
}

// The raw floor of the same path: a thread blocked on its LISTEN connection runs the
// acquiring statement as soon as the DELETE's notification arrives.
double raw_handoff(Raw& holder, Raw& listener, Raw& taker, int round) {
  const std::string key = fmt::format("raw-handoff-{}", round);
  holder.run("floor_acquire", {key, "holder"});
  std::atomic<bool> ready{false};
  Clock::time_point taken;
  std::thread thread([&] {
    ready = true;
    for (;;) {
      pollfd p{PQsocket(listener.get()), POLLIN, 0};
      ::poll(&p, 1, 5000);
      PQconsumeInput(listener.get());
      bool heard = false;
      while (PGnotify* note = PQnotifies(listener.get())) {
        heard = heard || key == note->extra;
        PQfreemem(note);
      }
      if (heard) break;
    }
    taker.run("floor_acquire", {key, "taker"});
    taken = Clock::now();
  });
  while (!ready) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const auto released = Clock::now();
  holder.run("floor_release_notify", {key, "holder"});
  thread.join();
  taker.run("floor_release", {key, "taker"});
  return std::chrono::duration<double, std::micro>(taken - released).count();
}

int handoff(int rounds) {
  dlock::Client holder(config("bench-handoff")), waiter(config("bench-handoff"));
  floor_connection();
  Raw raw_holder, listener, taker;
  listener.exec("LISTEN bench_floor");
  prepare_floor(raw_holder);
  prepare_floor(taker);
  std::vector<double> ours, floor, ratios;
  constexpr int kBlock = 25;
  for (int done = 0; done < rounds; done += kBlock) {
    std::vector<double> a, b;
    for (int i = 0; i < kBlock; ++i) a.push_back(dlock_handoff(holder, waiter, done + i));
    for (int i = 0; i < kBlock; ++i) b.push_back(raw_handoff(raw_holder, listener, taker, done + i));
    ratios.push_back(median(a) / median(b));
    ours.insert(ours.end(), a.begin(), a.end());
    floor.insert(floor.end(), b.begin(), b.end());
  }
  fmt::print("postgres handoff over {} rounds: median {:.0f} us; raw floor (DELETE + NOTIFY, "
             "a thread on LISTEN takes the row) median {:.0f} us; dlock / floor {:.2f} (blocks "
             "of {} in turn)\n",
             ours.size(), median(ours), median(floor), median(ratios), kBlock);
  fmt::print("RESULT postgres_handoff rounds={} median_us={:.1f} floor_median_us={:.1f} "
             "floor_ratio={:.2f}\n",
             ours.size(), median(ours), median(floor), median(ratios));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--handoff") return handoff(std::max(1, std::atoi(argv[i + 1])));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
