// Lock+release cycles per second with N threads, each on its own key (no contention), next
// to the server's own ceiling at the same concurrency: redis-benchmark running EVALSHA of a
// minimal lock script (SET NX PX) with N connections. A dlock cycle is two requests (acquire
// and release scripts), so the ceiling in cycles per second is redis-benchmark's requests per
// second / 2.
//
//   dlock_bench_throughput [--threads N] [--millis M] [--requests R] [--pool P] [--rounds K]
//
// The machine's speed drifts over tens of seconds (the ceiling alone, run again and again for
// a few seconds each, moved between 90,000 and 112,000 requests/s, in spells), so dlock and
// the ceiling are measured in K rounds (default 2), their order alternating (dlock, ceiling,
// ceiling, dlock, ...: with K even, a steady drift weighs on both alike), each phase with M/K
// milliseconds or R/K requests. Each rate is the mean of its phases' rates, each CPU figure
// per cycle that of all its phases' cycles; each round's own ratio is printed too. The
// ceiling's keys are deleted after each of its phases (untimed): they expire a second after
// they are set, and their expiry would cost whatever phase came next.
//
// After them it runs a raw reference, once (its ratio is to the ceiling's mean, not to a
// ceiling measured beside it): dlock's own scripts from N threads, each blocking
// on a hiredis connection of its own (one awaited round trip per cycle, as a guarded call).
// It is what a plain client built on hiredis gets at that thread count, not a floor: dlock's
// threads share pipelined connections, which costs the server less per cycle.
//
// Prints the figures and, last, one line for scripts/bench:
//   RESULT throughput threads=N cycles_per_s=X ceiling_cycles_per_s=Y ratio=X/Y
//          client_cpu_us=C server_cpu_us=S cpu_bound_cycles_per_s=B
//          server_bound_cycles_per_s=V ceiling_server_cpu_us=R ceiling_client_cpu_us=Q
//          lean_bound_cycles_per_s=L [raw_cycles_per_s=W raw_ratio=W/Y
//          raw_client_cpu_us=RC raw_server_cpu_us=RS]
// C and S are the CPU time per cycle of this process and of the server; B is what the
// machine's cores could do at that cost (cores / (C + S)); V what the server's one thread
// could do at S (1 / S), whatever the client; R and Q the CPU per cycle of the server and of
// redis-benchmark itself while it measures the ceiling; L what the cores would allow a client
// as cheap as redis-benchmark running dlock's scripts (cores / (Q + S)).
// The pool has P connections (default: the library's, kSharedPoolSize): with more threads than
// connections, threads share connections and their commands are pipelined.
#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "dlock_calls.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kCeilingScript = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";

// CPU seconds the bench server has used (INFO cpu: used_cpu_sys + used_cpu_user).
double server_cpu_seconds() {
  dlock::bench::RawConnection raw;
  redisReply* reply = raw.command("INFO cpu");
  const std::string info = reply != nullptr && reply->str != nullptr ? reply->str : "";
  freeReplyObject(reply);
  double total = 0;
  for (const char* field : {"used_cpu_sys:", "used_cpu_user:"}) {
    const auto at = info.find(field);
    if (at != std::string::npos) total += std::strtod(info.c_str() + at + strlen(field), nullptr);
  }
  return total;
}

// What one phase of cycles measured, or several added up: the rate is the mean of the
// phases' rates (each phase counts the same, whether its length was set in time or in
// requests), the CPU per cycle that of all their cycles.
struct Phase {
  Phase() = default;
  Phase(double cycles, double seconds, double client_cpu, double server_cpu)
      : cycles(cycles),
        client_cpu(client_cpu),
        server_cpu(server_cpu),
        rates(cycles / seconds),
        phases(1) {}
  double cycles = 0;
  double client_cpu = 0;  // CPU seconds of the client (this process, or redis-benchmark)
  double server_cpu = 0;  // CPU seconds of the server
  double rates = 0;       // the sum of the phases' cycles per second
  int phases = 0;
  double cycles_per_s() const { return rates / phases; }
  double client_us() const { return client_cpu * 1e6 / cycles; }  // per cycle
  double server_us() const { return server_cpu * 1e6 / cycles; }
  Phase& operator+=(const Phase& other) {
    cycles += other.cycles;
    client_cpu += other.client_cpu;
    server_cpu += other.server_cpu;
    rates += other.rates;
    phases += other.phases;
    return *this;
  }
};

// Deletes the keys the ceiling's script left (`ceiling:*`), so that their expiry does not
// cost the next phase its server time. At most a few hundred SCAN calls: each covers 10,000
// slots of the key space.
void remove_ceiling_keys(dlock::bench::RawConnection& raw) {
  std::string cursor = "0";
  for (int call = 0; call < 1000; ++call) {
    redisReply* reply = raw.command("SCAN %s MATCH ceiling:* COUNT 10000", cursor.c_str());
    const bool scanned = reply->type == REDIS_REPLY_ARRAY && reply->elements == 2;
    if (scanned) {
      cursor.assign(reply->element[0]->str, reply->element[0]->len);
      const redisReply* keys = reply->element[1];
      std::vector<const char*> argv{"UNLINK"};
      std::vector<std::size_t> lengths{6};
      for (std::size_t i = 0; i < keys->elements; ++i) {
        argv.push_back(keys->element[i]->str);
        lengths.push_back(keys->element[i]->len);
      }
      if (argv.size() > 1) freeReplyObject(raw.command_argv(argv, lengths));
    }
    freeReplyObject(reply);
    if (!scanned || cursor == "0") {
      if (!scanned) fmt::print(stderr, "SCAN failed: the ceiling's keys may be left to expire\n");
      return;
    }
  }
  fmt::print(stderr, "SCAN did not finish: the ceiling's keys may be left to expire\n");
}

// The ceiling: redis-benchmark with `connections` connections running the minimal script
// `requests` times on the bench server (two requests a cycle), from its CSV output
// ("test","rps",...); nothing when it could not be run. The client's CPU is redis-benchmark's
// (with the shell that runs it).
std::optional<Phase> ceiling_phase(int connections, long requests) {
  dlock::bench::RawConnection raw;
  const std::string sha = raw.load_script(kCeilingScript);
  const std::string command =
      fmt::format("timeout 120 redis-benchmark -h {} -p {} -c {} -n {} -r 1000000 --csv "
                  "EVALSHA {} 1 ceiling:__rand_int__ owner 1000 2>&1",
                  dlock::bench::bench_server().host, dlock::bench::bench_server().port, connections,
                  requests, sha);
  const double children_before = dlock::bench::cpu_seconds(RUSAGE_CHILDREN);
  const double server_before = server_cpu_seconds();
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  const double server_cpu = server_cpu_seconds() - server_before;
  const double client_cpu = dlock::bench::cpu_seconds(RUSAGE_CHILDREN) - children_before;
  remove_ceiling_keys(raw);
  // The data line: "EVALSHA ...","<rps>",...
  const auto quote = output.rfind("\"EVALSHA");
  const auto start = quote == std::string::npos ? quote : output.find(",\"", quote);
  const double rps =
      start == std::string::npos ? 0 : std::strtod(output.c_str() + start + 2, nullptr);
  if (status != 0 || rps <= 0) {
    fmt::print(stderr, "redis-benchmark failed (status {}): {}\n", status, output);
    return std::nullopt;
  }
  return Phase(double(requests) / 2, double(requests) / rps, client_cpu, server_cpu);
}

// Runs `cycle` (which returns false when a cycle failed) on `threads` threads for `length`,
// each thread with the state `make(t)` gives it; nothing when a cycle failed.
template <typename Make, typename Cycle>
std::optional<Phase> run_phase(int threads, std::chrono::milliseconds length, Make make,
                               Cycle cycle) {
  std::atomic<bool> go{false};
  std::atomic<bool> failed{false};
  std::atomic<int> ready{0};
  std::vector<long> counts(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> workers;
  Clock::time_point deadline;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        auto state = make(t);
        ++ready;
        while (!go.load()) std::this_thread::yield();
        long done = 0;
        while (Clock::now() < deadline && !failed.load(std::memory_order_relaxed)) {
          if (!cycle(*state)) {
            failed = true;
            break;
          }
          ++done;
        }
        counts[static_cast<std::size_t>(t)] = done;
      } catch (const std::exception& e) {
        fmt::print(stderr, "thread {}: {}\n", t, e.what());
        failed = true;
        ++ready;
      }
    });
  }
  // Whatever happens below, the workers are let go and joined (a thread left joinable would
  // end the program).
  struct JoinAll {
    std::vector<std::thread>& workers;
    std::atomic<bool>& go;
    std::atomic<bool>& failed;
    void now() {
      go = true;
      for (auto& w : workers) {
        if (w.joinable()) w.join();
      }
    }
    ~JoinAll() {
      if (!go) failed = true;  // ends the workers' loops at once
      now();
    }
  } join_all{workers, go, failed};
  // Connections are opened lazily (dlock) or by `make` before the start (raw): the
  // measurement is long enough for a pool to fill in its first milliseconds.
  while (ready.load() < threads) std::this_thread::yield();
  if (failed) return std::nullopt;
  const double cpu_before = dlock::bench::cpu_seconds();
  const double server_before = server_cpu_seconds();
  const auto started = Clock::now();
  deadline = started + length;
  join_all.now();
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const double client_cpu = dlock::bench::cpu_seconds() - cpu_before;
  const double server_cpu = server_cpu_seconds() - server_before;
  long total = 0;
  for (long c : counts) total += c;
  if (failed || total == 0) return std::nullopt;
  return Phase(double(total), seconds, client_cpu, server_cpu);
}

// One thread's raw connection and its cycles of dlock's scripts (the raw reference), on keys
// cleared first (a run killed earlier may have left one held).
struct RawCycler {
  explicit RawCycler(int t) : cycles(raw, name(t)) { dlock::bench::DlockCalls::clear(raw, name(t)); }
  static std::string name(int t) { return fmt::format("raw-throughput:{}", t); }
  dlock::bench::RawConnection raw;
  dlock::bench::OneWaitCycles cycles;
};

// One phase of dlock: `threads` threads, each locking a key of its own and releasing it (the
// lease's destructor), for `length`, through a client with a pool of `pool` connections. The
// client's last releases are flushed when it goes, before the next phase.
std::optional<Phase> dlock_phase(int threads, std::chrono::milliseconds length, int pool) {
  dlock::Client client(dlock::bench::single_node_config("bench-throughput", pool));
  dlock::LockSettings settings;
  settings.lease = 30s;
  settings.wait = 0ms;
  auto phase = run_phase(
      threads, length,
      [](int t) { return std::make_unique<std::string>(fmt::format("throughput:{}", t)); },
      [&](const std::string& key) { return static_cast<bool>(client.acquire(key, settings)); });
  if (!phase) fmt::print(stderr, "a cycle was not acquired, or a thread failed\n");
  return phase;
}

// dlock and the ceiling in `rounds` rounds, dlock first in odd rounds and the ceiling first in
// even ones, each phase with its share of `millis` or `requests`: the totals of each, or
// nothing when a phase failed.
std::optional<std::pair<Phase, Phase>> alternate(int threads, std::chrono::milliseconds millis,
                                                 long requests, int pool, int rounds) {
  Phase dlock, ceiling;
  for (int round = 0; round < rounds; ++round) {
    std::optional<Phase> mine, theirs;
    const auto measure_dlock = [&] { return mine = dlock_phase(threads, millis / rounds, pool); };
    const auto measure_ceiling = [&] { return theirs = ceiling_phase(threads, requests / rounds); };
    const bool measured = round % 2 == 0 ? measure_dlock() && measure_ceiling()
                                         : measure_ceiling() && measure_dlock();
    if (!measured) return std::nullopt;
    fmt::print("round {}: dlock {:.0f} cycles/s, ceiling {:.0f} cycles/s, ratio {:.3f}\n",
               round + 1, mine->cycles_per_s(), theirs->cycles_per_s(),
               mine->cycles_per_s() / theirs->cycles_per_s());
    dlock += *mine;
    ceiling += *theirs;
  }
  return std::pair{dlock, ceiling};
}

}  // namespace

int main(int argc, char** argv) try {
  dlock::bench::check_options(argc, argv,
                              {"--threads", "--millis", "--requests", "--pool", "--rounds"});
  const int threads = static_cast<int>(dlock::bench::option(argc, argv, "--threads", 8));
  const auto millis = std::chrono::milliseconds(dlock::bench::option(argc, argv, "--millis", 3000));
  const long requests = dlock::bench::option(argc, argv, "--requests", 200000);
  const int pool =
      static_cast<int>(dlock::bench::option(argc, argv, "--pool", dlock::kSharedPoolSize));
  const int rounds =
      static_cast<int>(std::max(1L, dlock::bench::option(argc, argv, "--rounds", 2)));
  if (millis / rounds < 100ms || requests / rounds < 1000) {
    fmt::print(stderr, "each of the {} rounds needs at least 100 ms and 1000 requests\n", rounds);
    return 2;
  }

  const auto measured = alternate(threads, millis, requests, pool, rounds);
  if (!measured) return 1;
  const Phase& mine = measured->first;
  const Phase& theirs = measured->second;
  // The raw reference: the same scripts from the same number of threads, each blocking on a
  // hiredis connection of its own (what a plain client built on hiredis does).
  const auto raw_phase = run_phase(
      threads, millis, [](int t) { return std::make_unique<RawCycler>(t); },
      [](RawCycler& raw) {
        const std::string error = raw.cycles.step();
        if (!error.empty()) fmt::print(stderr, "raw reference: {}\n", error);
        return error.empty();
      });
  if (!raw_phase) fmt::print(stderr, "the raw reference failed; its figures are left out\n");
  const double ceiling = theirs.cycles_per_s();
  const double ceiling_server_us = theirs.server_us();
  const double ceiling_client_us = theirs.client_us();
  const double cycles_per_s = mine.cycles_per_s();
  const double client_us = mine.client_us();
  const double server_us = mine.server_us();
  fmt::print("dlock: {} threads, {} connections: {:.0f} cycles/s\n", threads, pool, cycles_per_s);
  // What the machine's cores allow at this CPU cost per cycle, client and server together.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  fmt::print(
      "CPU per cycle: client {:.1f} us, server {:.1f} us; {} cores allow at most {:.0f} "
      "cycles/s at that cost\n",
      client_us, server_us, cores, cores * 1e6 / (client_us + server_us));
  // The server runs scripts on one thread: no client gets more cycles than this out of it.
  fmt::print("the server alone, one core at {:.1f} us per cycle, allows at most {:.0f} cycles/s\n",
             server_us, 1e6 / server_us);
  if (raw_phase) {
    fmt::print(
        "raw reference: dlock's scripts from {} threads, each blocking on a hiredis connection "
        "of its own: {:.0f} cycles/s; CPU per cycle: client {:.1f} us, server {:.1f} us\n",
        threads, raw_phase->cycles_per_s(), raw_phase->client_us(), raw_phase->server_us());
  }
  fmt::print(
      "ceiling: redis-benchmark -c {} EVALSHA (SET NX PX script): {:.0f} requests/s = {:.0f} "
      "cycles/s; CPU per cycle: redis-benchmark {:.1f} us, server {:.1f} us\n",
      threads, ceiling * 2, ceiling, ceiling_client_us, ceiling_server_us);
  // A client as cheap as redis-benchmark, running dlock's scripts on this server: what the
  // machine's cores would allow it.
  const double lean_bound = cores * 1e6 / (ceiling_client_us + server_us);
  fmt::print("{} cores at this server CPU and redis-benchmark's client CPU allow at most {:.0f} cycles/s\n",
             cores, lean_bound);
  fmt::print("dlock / ceiling {:.3f}\n", cycles_per_s / ceiling);
  std::string raw_fields;
  if (raw_phase) {
    fmt::print("raw reference / ceiling {:.3f}, dlock / raw reference {:.3f}\n",
               raw_phase->cycles_per_s() / ceiling, cycles_per_s / raw_phase->cycles_per_s());
    raw_fields = fmt::format(
        " raw_cycles_per_s={:.0f} raw_ratio={:.3f} raw_client_cpu_us={:.1f} "
        "raw_server_cpu_us={:.1f}",
        raw_phase->cycles_per_s(), raw_phase->cycles_per_s() / ceiling, raw_phase->client_us(),
        raw_phase->server_us());
  }
  fmt::print(
      "RESULT throughput threads={} cycles_per_s={:.0f} ceiling_cycles_per_s={:.0f} ratio={:.3f} "
      "client_cpu_us={:.1f} server_cpu_us={:.1f} cpu_bound_cycles_per_s={:.0f} "
      "server_bound_cycles_per_s={:.0f} ceiling_server_cpu_us={:.1f} ceiling_client_cpu_us={:.1f} "
      "lean_bound_cycles_per_s={:.0f}{}\n",
      threads, cycles_per_s, ceiling, cycles_per_s / ceiling, client_us, server_us,
      cores * 1e6 / (client_us + server_us), 1e6 / server_us, ceiling_server_us, ceiling_client_us,
      lean_bound, raw_fields);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "dlock_bench_throughput: {}\n", e.what());
  return 1;
}
