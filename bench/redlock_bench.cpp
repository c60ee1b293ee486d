// Redlock next to a single node: one client, one key, no contention, the lock+release
// cycle through the public API against a single redis-server and against Redlock groups
// of 3 and 5 independent redis-servers, all started by the benchmark in the same run; and
// the floor this machine sets for talking to N servers at once, measured with raw hiredis.
//
//   BM_SingleCycle          topology single: acquire + release
//   BM_RedlockCycle/3       topology redlock over 3 instances (target: <= 1.3x BM_SingleCycle)
//   BM_RedlockCycle/5       topology redlock over 5 instances (target: <= 1.6x BM_SingleCycle)
//   BM_RawScriptFanOut/N    the floor: dlock's own acquire script (EVALSHA, dlock's arguments)
//                           written to N servers, then the replies read back (one thread,
//                           non-blocking sockets, poll), then the release script the same
//                           way: the two fan-out round trips of a Redlock cycle, without
//                           dlock. N=1 is the single-node floor.
//   BM_RawFanOut/N          the same with SET NX PX and a one-line owner-checked DEL script
//                           (the floor of figure 1), for comparison
//
// Then, unless --interleaved_rounds=0, every variant again in turn, in batches of
// --interleaved_batch cycles (default 40) for --interleaved_rounds rounds (default 15): on a
// shared machine this compares the same moments. The last line gives the figures (the
// interleaved medians; without rounds, the table's medians over repetitions) and the ratios,
// all of one run:
//   RESULT redlock single_us=.. redlock3_us=.. redlock5_us=.. ratio3=.. ratio5=..
//          floor1_us=.. floor3_us=.. floor5_us=.. floor_ratio3=.. floor_ratio5=..
//          setnx_floor_ratio3=.. setnx_floor_ratio5=..
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "cycle_bench.hpp"
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

// The single node is instance 0 of the same group: same kind of server, same machine load.
void BM_SingleCycle(benchmark::State& state) {
  dlock::bench::lock_release_cycles(state, config_for(dlock::Topology::kSingle, 1));
}
BENCHMARK(BM_SingleCycle);

void BM_RedlockCycle(benchmark::State& state) {
  dlock::bench::lock_release_cycles(
      state, config_for(dlock::Topology::kRedlock, static_cast<std::size_t>(state.range(0))));
}
BENCHMARK(BM_RedlockCycle)->Arg(3)->Arg(5);

// --- The floor: raw hiredis to N servers at once -------------------------------------------

constexpr const char* kSimpleRelease =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

// dlock's own Lua scripts, read from the source tree this file is in.

using Argv = std::vector<std::string>;

struct RawFanOut {
  std::vector<redisContext*> contexts;

  explicit RawFanOut(std::size_t n) {
    const timeval timeout{2, 0};
    for (std::size_t i = 0; i < n; ++i) {
      redisContext* ctx = redisConnectWithTimeout(group().instance(i).host().c_str(),
                                                  group().instance(i).port(), timeout);
      if (ctx == nullptr || ctx->err != 0) throw std::runtime_error("raw connect failed");
      redisSetTimeout(ctx, timeout);
      contexts.push_back(ctx);
    }
  }
  ~RawFanOut() {
    for (redisContext* ctx : contexts) redisFree(ctx);
  }
  RawFanOut(const RawFanOut&) = delete;
  RawFanOut& operator=(const RawFanOut&) = delete;

  // Loads a script on every server (blocking); returns its SHA.
  std::string load(const std::string& script) {
    std::string sha;
    for (redisContext* ctx : contexts) {
      auto* loaded = static_cast<redisReply*>(redisCommand(ctx, "SCRIPT LOAD %b", script.data(), script.size()));
      if (loaded == nullptr || loaded->type != REDIS_REPLY_STRING) throw std::runtime_error("SCRIPT LOAD failed");
      sha.assign(loaded->str, loaded->len);
      freeReplyObject(loaded);
    }
    return sha;
  }

  // Writes `argv` to every server, then reads one reply from each as the sockets become
  // readable. False on any error or a 2 s silence.
  bool round(const Argv& argv) {
    std::vector<const char*> pointers;
    std::vector<std::size_t> lengths;
    for (const std::string& a : argv) {
      pointers.push_back(a.data());
      lengths.push_back(a.size());
    }
    for (redisContext* ctx : contexts) {
      redisAppendCommandArgv(ctx, static_cast<int>(argv.size()), pointers.data(), lengths.data());
      int done = 0;
      while (done == 0) {
        if (redisBufferWrite(ctx, &done) != REDIS_OK) return false;
      }
    }
    std::vector<pollfd> fds;
    std::vector<redisContext*> waiting = contexts;
    while (!waiting.empty()) {
      fds.clear();
      for (redisContext* ctx : waiting) fds.push_back(pollfd{ctx->fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 2000) <= 0) return false;
      std::vector<redisContext*> still;
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) {
          still.push_back(waiting[i]);
          continue;
        }
        if (redisBufferRead(waiting[i]) != REDIS_OK) return false;
        void* reply = nullptr;
        if (redisGetReplyFromReader(waiting[i], &reply) != REDIS_OK) return false;
        if (reply == nullptr) {
          still.push_back(waiting[i]);
        } else {
          const bool error = static_cast<redisReply*>(reply)->type == REDIS_REPLY_ERROR;
          freeReplyObject(reply);
          if (error) return false;
        }
      }
      waiting.swap(still);
    }
    return true;
  }
};

// One cycle of a raw floor: the acquire round, then the release round.
struct RawCycle {
  RawFanOut raw;
  Argv acquire;
  Argv release;

  // scripts false: SET NX PX + an owner-checked DEL script (figure 1's floor); true: dlock's
  // own acquire and release scripts with the arguments dlock passes.
  RawCycle(std::size_t n, bool scripts) : raw(n) {
    if (scripts) {
      const std::string acquire_sha = raw.load(dlock::bench::lua_source("acquire.lua"));
      const std::string release_sha = raw.load(dlock::bench::lua_source("release.lua"));
      acquire = {"EVALSHA",        acquire_sha,      "5",           "raw:{k}:lock",
                 "raw:{k}:fence",  "raw:{k}:holders", "raw:{k}:queue", "raw:{k}:places",
                 "raw-owner",      "30002",          "0",           "bench-host",
                 "1",              "1",              "raw",         "86400000",
                 "0",              "0",              "0"};
      release = {"EVALSHA",       "raw:{k}:lock",    "raw:{k}:fence", "raw:{k}:holders",
                 "raw:{k}:queue", "raw:{k}:places",  "raw-owner",     "0",
                 "raw:{k}:released", "0",            "86400000"};
      release.insert(release.begin() + 1, {release_sha, "5"});
    } else {
      const std::string sha = raw.load(kSimpleRelease);
      acquire = {"SET", "raw-lock", "owner-1", "NX", "PX", "30000"};
      release = {"EVALSHA", sha, "1", "raw-lock", "owner-1"};
    }
  }
  bool once() { return raw.round(acquire) && raw.round(release); }
};

void raw_cycles(benchmark::State& state, bool scripts) {
  RawCycle raw(static_cast<std::size_t>(state.range(0)), scripts);
  for (auto _ : state) {
    if (!raw.once()) state.SkipWithError("raw fan-out failed");
  }
}

void BM_RawFanOut(benchmark::State& state) { raw_cycles(state, false); }
BENCHMARK(BM_RawFanOut)->Arg(1)->Arg(3)->Arg(5);

void BM_RawScriptFanOut(benchmark::State& state) { raw_cycles(state, true); }
BENCHMARK(BM_RawScriptFanOut)->Arg(1)->Arg(3)->Arg(5);

// --- Interleaved: every variant in turn, in short batches ---------------------------------
//
// On a shared machine the load changes from second to second; a benchmark run one after the
// other compares different moments. Here each round runs a short batch of every variant, and
// each variant's figure is its median batch over the rounds.

struct Variant {
  std::string name;
  std::function<bool()> cycle;
  std::vector<double> batch_us;  // per cycle, one entry per round
};

std::vector<Variant> interleaved(int rounds, int batch) {
  dlock::LockSettings settings;
  settings.lease = 30s;
  settings.wait = 0ms;
  auto dlock_cycle = [settings](std::shared_ptr<dlock::Client> client) {
    return [client, settings] { return static_cast<bool>(client.get()->acquire("bench-key", settings)); };
  };
  auto raw_cycle = [](std::size_t n, bool scripts) {
    auto raw = std::make_shared<RawCycle>(n, scripts);
    return [raw] { return raw->once(); };
  };
  std::vector<Variant> variants;
  variants.push_back({"single", dlock_cycle(std::make_shared<dlock::Client>(config_for(dlock::Topology::kSingle, 1))), {}});
  for (std::size_t n : {3, 5}) {
    variants.push_back({"redlock" + std::to_string(n),
                        dlock_cycle(std::make_shared<dlock::Client>(config_for(dlock::Topology::kRedlock, n))), {}});
  }
  for (std::size_t n : {1, 3, 5}) variants.push_back({"floor" + std::to_string(n), raw_cycle(n, true), {}});
  for (std::size_t n : {1, 3, 5}) variants.push_back({"setnx_floor" + std::to_string(n), raw_cycle(n, false), {}});
  for (auto& v : variants) {
    for (int i = 0; i < 20; ++i) v.cycle();  // connections, scripts
  }
  for (int round = 0; round < rounds; ++round) {
    for (auto& v : variants) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < batch; ++i) {
        if (!v.cycle()) throw std::runtime_error(v.name + ": a cycle failed");
      }
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
      v.batch_us.push_back(took.count() / batch);
    }
  }
  return variants;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// --- The same-run ratios --------------------------------------------------------------------

// Prints the table as usual and keeps each benchmark's times per iteration (microseconds).
class Recorder : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred || run.iterations == 0) continue;
      const double seconds = run.real_accumulated_time / static_cast<double>(run.iterations);
      times_[run.run_name.function_name + (run.run_name.args.empty() ? "" : "/" + run.run_name.args)]
          .push_back(seconds * 1e6);
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // The median of a benchmark's repetitions; 0 when it did not run.
  double median_us(const std::string& name) const {
    auto found = times_.find(name);
    return found == times_.end() ? 0 : median(found->second);
  }

 private:
  std::map<std::string, std::vector<double>> times_;
};

}  // namespace

// Reads and removes `--name=value` from the command line (before Google Benchmark sees it).
int take_int_flag(int& argc, char** argv, const std::string& name, int fallback) {
  const std::string prefix = "--" + name + "=";
  int value = fallback;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind(prefix, 0) == 0) {
      try {
        value = std::stoi(arg.substr(prefix.size()));
      } catch (const std::exception&) {
        throw std::runtime_error("bad value in " + arg);
      }
      continue;
    }
    argv[kept++] = argv[i];
  }
  argc = kept;
  return value;
}

int main(int argc, char** argv) try {
  const int rounds = take_int_flag(argc, argv, "interleaved_rounds", 15);
  const int batch = take_int_flag(argc, argv, "interleaved_batch", 40);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Recorder recorder;
  benchmark::RunSpecifiedBenchmarks(&recorder);
  benchmark::Shutdown();

  // The figures: from the interleaved rounds when there are any, else from the table.
  std::map<std::string, double> us;
  if (rounds > 0 && batch > 0) {
    fmt::print("\ninterleaved: {} rounds of {} cycles of each variant; per cycle, median of rounds (min-max)\n",
               rounds, batch);
    for (const Variant& v : interleaved(rounds, batch)) {
      us[v.name] = median(v.batch_us);
      fmt::print("  {:<13} {:8.1f} us  ({:.1f}-{:.1f})\n", v.name, us[v.name],
                 *std::min_element(v.batch_us.begin(), v.batch_us.end()),
                 *std::max_element(v.batch_us.begin(), v.batch_us.end()));
    }
  } else {
    us["single"] = recorder.median_us("BM_SingleCycle");
    us["redlock3"] = recorder.median_us("BM_RedlockCycle/3");
    us["redlock5"] = recorder.median_us("BM_RedlockCycle/5");
    for (int n : {1, 3, 5}) {
      us["floor" + std::to_string(n)] = recorder.median_us("BM_RawScriptFanOut/" + std::to_string(n));
      us["setnx_floor" + std::to_string(n)] = recorder.median_us("BM_RawFanOut/" + std::to_string(n));
    }
  }
  auto ratio = [&](const std::string& a, const std::string& b) { return us[b] > 0 ? us[a] / us[b] : 0.0; };
  fmt::print(
      "RESULT redlock single_us={:.1f} redlock3_us={:.1f} redlock5_us={:.1f} ratio3={:.2f} ratio5={:.2f} "
      "floor1_us={:.1f} floor3_us={:.1f} floor5_us={:.1f} floor_ratio3={:.2f} floor_ratio5={:.2f} "
      "setnx_floor_ratio3={:.2f} setnx_floor_ratio5={:.2f}\n",
      us["single"], us["redlock3"], us["redlock5"], ratio("redlock3", "single"), ratio("redlock5", "single"),
      us["floor1"], us["floor3"], us["floor5"], ratio("floor3", "floor1"), ratio("floor5", "floor1"),
      ratio("setnx_floor3", "setnx_floor1"), ratio("setnx_floor5", "setnx_floor1"));
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "dlock_bench_redlock: {}\n", e.what());
  return 1;
}
