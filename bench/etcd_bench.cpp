// What a lock costs on etcd, next to that engine's own floor in the same run, against a
// 3-member cluster started here (EtcdCluster of tests/support, its default timings), every
// client of the run, dlock's and the raw ones, talking to the same member: a follower, or the
// leader with DLOCK_BENCH_ETCD_MEMBER=leader.
//
//   BM_EtcdCycle         acquire + the lease's destructor through the public API (topology:
//                        etcd): a guard's path; etcd's release is waited for there too
//   BM_EtcdWaitedCycle   acquire + release()
//   BM_EtcdPermitCycle   the cycle of a permit of a semaphore of 3
//   BM_RawFloor          the floor: a Txn that puts a key unless it exists (on a lease granted
//                        once), then a DeleteRange of it, each waited for, over the gRPC stubs
//   BM_RawDlockRequests  dlock's own two requests over the stubs: its acquire's Txn (the lock's
//                        prefix empty: put the owner's key; else range the first key), then its
//                        release's Txn deleting the key
//   BM_Range             a linearizable Range of one key: a round trip through the leader's
//                        read index
//
// Each iteration is timed too; after the benchmarks, the medians and p99 of all of each one's
// iterations, the cycles' ratios to the floor and a RESULT line.
//
// dlock names a lock's keys by their lease, which it reuses from lock to lock: a compare over
// a lock's prefix walks every name deleted under it since the last compaction (the cluster
// here never compacts), so few names keep it short. Each benchmark of dlock's requests has a
// lock of its own; the floor reuses one key name.
//
// The handoff (--handoff ROUNDS, run instead of the above): a holder releases while a second
// client waits in acquire(), queued behind it (its key put, a watch on the holder's); the time
// from release() to the waiter's acquire() returning, next to two raw floors over the stubs: a
// waiter queued the same way (dlock's waiter Txn, then a Watch on the holder's key, NOPUT)
// whose thread, reading the watch stream, sends dlock's Txn when the DELETE event comes and
// finds itself first; and the same waiter confirming with a linearizable Range of the queue
// instead. Blocks of 25 rounds of each in turn; each release comes 3 ms after the member counts
// the waiter's watch (etcd_debugging_mvcc_watcher_total on its /metrics).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "etcd_cluster.hpp"
#include "etcd_raw.hpp"

namespace {

using namespace dlock::bench::etcd;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kLease = 10s;
const std::string kBase = "/bench-floor/";

struct Member {  // the one every client talks to
  int port = 0;
  std::string role;
};

const Member& member() {
  static dlock::test::EtcdCluster cluster;
  static const Member value = [] {
    cluster.start();
    const int leader = cluster.wait_serving();
    const char* env = std::getenv("DLOCK_BENCH_ETCD_MEMBER");
    const std::string asked = env == nullptr ? "" : env;
    if (!asked.empty() && asked != "leader" && asked != "follower") {
      throw std::invalid_argument(
          fmt::format("DLOCK_BENCH_ETCD_MEMBER: '{}' is neither leader nor follower", asked));
    }
    const bool on_leader = asked == "leader";
    const int index = on_leader ? leader : (leader + 1) % cluster.members();
    const auto& options = cluster.options();
    fmt::print("etcd {}: {}-member cluster, heartbeat {} ms, election timeout {} ms; every "
               "client on member {} ({}), {}\n",
               dlock::test::EtcdClient(cluster.endpoint(index)).status().version,
               cluster.members(), options.heartbeat_interval.count(),
               options.election_timeout.count(), index, on_leader ? "the leader" : "a follower",
               cluster.endpoint(index));
    std::fflush(stdout);
    return Member{cluster.client_port(index), on_leader ? "leader" : "follower"};
  }();
  return value;
}

// What a service would write, with the one member as its only endpoint.
dlock::Config config(const std::string& service) {
  return dlock::parse_config(fmt::format("service: {}\n"
                                         "backends:\n"
                                         "  default:\n"
                                         "    topology: etcd\n"
                                         "    endpoints: [http://127.0.0.1:{}]\n"
                                         "    command_timeout: 2s\n",
                                         service, member().port),
                             "etcd_bench.cpp");
}

dlock::LockSettings lock_settings(std::chrono::milliseconds wait) {
  dlock::LockSettings settings;
  settings.lease = kLease;
  settings.wait = wait;
  return settings;
}

Raw& floor_client() {
  static Raw raw(member().port);
  static const bool ready = [] {
    pb::TxnResponse reply;
    must(raw.txn(put_if_absent(kBase + "range", 0, "a value"), reply), "putting the range's key");
    return true;
  }();
  (void)ready;
  return raw;
}

// ---- the cycle ----

/// Every timed iteration of each benchmark, over all its runs, in microseconds.
std::map<std::string, std::vector<double>>& timings() {
  static std::map<std::string, std::vector<double>> all;
  return all;
}

double us_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

// Runs `body` once an iteration and times it; an error it returns ends the run. Counters:
// the CPU time of all the process's threads (gRPC's and dlock's included, not the cluster's)
// and its context switches, per iteration.
template <typename Body>
void timed(benchmark::State& state, const char* name, Body&& body) {
  auto& out = timings()[name];
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  for (auto _ : state) {
    const auto start = Clock::now();
    const std::string error = body();
    out.push_back(us_between(start, Clock::now()));
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
  ::getrusage(RUSAGE_SELF, &after);
  const auto us = [](const timeval& t) { return 1e6 * static_cast<double>(t.tv_sec) + t.tv_usec; };
  const double cpu = us(after.ru_utime) + us(after.ru_stime) - us(before.ru_utime) -
                     us(before.ru_stime);
  const auto switches = after.ru_nvcsw + after.ru_nivcsw - before.ru_nvcsw - before.ru_nivcsw;
  state.counters["proc_cpu_us"] = benchmark::Counter(cpu, benchmark::Counter::kAvgIterations);
  state.counters["switches"] =
      benchmark::Counter(static_cast<double>(switches), benchmark::Counter::kAvgIterations);
}

dlock::Client& cycle_client() {
  static dlock::Client client(config("bench-etcd"));
  return client;
}

void BM_EtcdCycle(benchmark::State& state) {
  dlock::Client& client = cycle_client();
  const dlock::LockSettings settings = lock_settings(0ms);
  timed(state, "BM_EtcdCycle", [&]() -> std::string {
    dlock::Lease lease = client.acquire("cycle", settings);
    if (!lease) return "not acquired: " + lease.error();
    benchmark::DoNotOptimize(lease.token());
    return {};
  });
}

// The cycle of a permit of a semaphore of 3: its try puts its key and lists the lock's keys.
void BM_EtcdPermitCycle(benchmark::State& state) {
  dlock::Client& client = cycle_client();
  dlock::LockSettings settings = lock_settings(0ms);
  settings.permits = 3;
  timed(state, "BM_EtcdPermitCycle", [&]() -> std::string {
    dlock::Lease lease = client.acquire("permits", settings);
    if (!lease) return "not acquired: " + lease.error();
    benchmark::DoNotOptimize(lease.token());
    return {};
  });
}

void BM_EtcdWaitedCycle(benchmark::State& state) {
  dlock::Client& client = cycle_client();
  const dlock::LockSettings settings = lock_settings(0ms);
  timed(state, "BM_EtcdWaitedCycle", [&]() -> std::string {
    dlock::Lease lease = client.acquire("waited", settings);
    if (!lease) return "not acquired: " + lease.error();
    return lease.release() == dlock::ReleaseStatus::kReleased ? "" : "not released";
  });
}

void BM_RawFloor(benchmark::State& state) {
  Raw& raw = floor_client();
  const std::string key = kBase + "cycle";
  const pb::TxnRequest put = put_if_absent(key, raw.lease());
  timed(state, "BM_RawFloor", [&]() -> std::string {
    pb::TxnResponse reply;
    grpc::Status status = raw.txn(put, reply);
    if (status.ok() && !reply.succeeded()) return "the floor's key was there already";
    if (!status.ok()) return failure("Txn", status);
    status = raw.remove(key);
    return status.ok() ? "" : failure("DeleteRange", status);
  });
}

void BM_RawDlockRequests(benchmark::State& state) {
  Raw& raw = floor_client();
  // As the backend names and fills a lock's key: <digest of the key>/<lease id, 16 hex
  // digits> (a lease reused from lock to lock), and "lease pid thread host name key owner"
  // with host, name, key and owner in hex.
  const std::string prefix = kBase + "dlock/0123456789abcdef0123456789abcdef/";
  const std::string value =
      fmt::format("10000 {} 140234567890 6c6f63616c686f7374  {} {}", ::getpid(),
                  "62656e63682d6b6579", "30313233343536373839616263646566");
  const std::string mine = fmt::format("{}{:016x}", prefix, raw.lease());
  timed(state, "BM_RawDlockRequests", [&]() -> std::string {
    pb::TxnResponse reply;
    grpc::Status status = raw.txn(dlock_acquire(prefix, mine, raw.lease(), value), reply);
    if (status.ok() && !reply.succeeded()) return "the lock was held";
    if (!status.ok()) return failure("acquire's Txn", status);
    status = raw.txn(delete_txn(mine), reply);
    return status.ok() ? "" : failure("release's Txn", status);
  });
}

void BM_Range(benchmark::State& state) {
  Raw& raw = floor_client();
  pb::RangeRequest range;
  range.set_key(kBase + "range");
  timed(state, "BM_Range", [&]() -> std::string {
    pb::RangeResponse reply;
    const grpc::Status status = raw.range(range, reply);
    if (status.ok() && reply.kvs_size() != 1) return "the range's key is missing";
    return status.ok() ? "" : failure("Range", status);
  });
}

// Iterations are counted to fill --benchmark_min_time of wall time: the thread mostly waits
// for the cluster, and by its CPU time a 0.5 s run would last far longer.
BENCHMARK(BM_EtcdCycle)->UseRealTime();
BENCHMARK(BM_EtcdWaitedCycle)->UseRealTime();
BENCHMARK(BM_EtcdPermitCycle)->UseRealTime();
BENCHMARK(BM_RawFloor)->UseRealTime();
BENCHMARK(BM_RawDlockRequests)->UseRealTime();
BENCHMARK(BM_Range)->UseRealTime();

struct Spread {
  double median = 0;
  double p99 = 0;
};

Spread spread(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  if (values.empty()) return {};
  return {values[values.size() / 2], dlock::bench::quantile(values, 0.99)};
}

// Half a second of cycles of both kinds before anything is measured: connections made, the
// first leases granted, the members' caches warm.
void warm_up() {
  dlock::Client& client = cycle_client();
  Raw& raw = floor_client();
  const std::string key = kBase + "cycle";
  const auto until = Clock::now() + 500ms;
  while (Clock::now() < until) {
    client.acquire("warm-up", lock_settings(0ms)).release();
    pb::TxnResponse reply;
    must(raw.txn(put_if_absent(key, raw.lease()), reply), "warm-up Txn");
    must(raw.remove(key), "warm-up DeleteRange");
  }
}

void print_cycle_summary() {
  std::map<std::string, Spread> of;
  fmt::print("\nevery iteration, all runs of each benchmark:\n");
  for (const auto& [name, values] : timings()) {
    if (values.empty()) continue;
    of[name] = spread(values);
    fmt::print("  {:<22} {:>8} iterations  median {:>8.1f} us  p99 {:>8.1f} us\n", name,
               values.size(), of[name].median, of[name].p99);
  }
  if (!of.count("BM_RawFloor") || !of.count("BM_EtcdCycle")) return;
  const Spread floor = of["BM_RawFloor"], guard = of["BM_EtcdCycle"];
  std::string line = fmt::format(
      "RESULT etcd_cycle member={} guard_median_us={:.1f} guard_p99_us={:.1f} "
      "floor_median_us={:.1f} floor_p99_us={:.1f} guard_ratio={:.2f}",
      member().role, guard.median, guard.p99, floor.median, floor.p99,
      guard.median / floor.median);
  fmt::print("etcd cycle: acquire + destructor median {:.0f} us; raw floor (put Txn + "
             "DeleteRange, each waited for) median {:.0f} us; dlock / floor {:.2f}",
             guard.median, floor.median, guard.median / floor.median);
  if (of.count("BM_EtcdWaitedCycle")) {
    const Spread waited = of["BM_EtcdWaitedCycle"];
    fmt::print("; acquire + release() median {:.0f} us, {:.2f}× the floor", waited.median,
               waited.median / floor.median);
    line += fmt::format(" waited_median_us={:.1f} waited_p99_us={:.1f} waited_ratio={:.2f}",
                        waited.median, waited.p99, waited.median / floor.median);
  }
  if (of.count("BM_EtcdPermitCycle")) {
    const Spread permit = of["BM_EtcdPermitCycle"];
    fmt::print("; a permit's cycle median {:.0f} us, {:.2f}× the exclusive one", permit.median,
               permit.median / guard.median);
    line += fmt::format(" permit_median_us={:.1f} permit_ratio={:.2f}", permit.median,
                        permit.median / guard.median);
  }
  if (of.count("BM_RawDlockRequests")) {
    const Spread raw = of["BM_RawDlockRequests"];
    fmt::print("; dlock's requests over the stubs median {:.0f} us, {:.2f}× the floor",
               raw.median, raw.median / floor.median);
  }
  fmt::print("\n");
  for (const auto& [name, field] : {std::pair{"BM_RawDlockRequests", "dlock_requests"},
                                    std::pair{"BM_Range", "range"}}) {
    if (!of.count(name)) continue;
    line += fmt::format(" {0}_median_us={1:.1f} {0}_p99_us={2:.1f}", field, of[name].median,
                        of[name].p99);
  }
  fmt::print("{}\n", line);
}

// ---- the handoff ----

// Returns once `done` holds for the member's count of watchers, or after a second; with no
// count to read, after 20 ms.
void wait_for_watchers(const std::function<bool(long)>& done) {
  const auto until = Clock::now() + 1s;
  for (long count = watchers(member().port); !done(count); count = watchers(member().port)) {
    if (count < 0) {
      std::this_thread::sleep_for(20ms);
      return;
    }
    if (Clock::now() >= until) return;
    std::this_thread::sleep_for(500us);
  }
}

// One dlock handoff: `holder` holds the key; a thread of `waiter` waits for it, queued with a
// watch on the holder's key; the clock runs from the holder's release() to the waiter's
// acquire() returning. `idle`: the member's watchers when nobody waits.
double dlock_handoff(dlock::Client& holder, dlock::Client& waiter, long idle) {
  const dlock::LockSettings settings = lock_settings(5s);
  dlock::Lease held = holder.acquire("handoff", settings);
  if (!held) throw std::runtime_error("handoff: the holder did not acquire: " + held.error());
  wait_for_watchers([&](long count) { return count <= idle; });  // the last round's gone
  const auto waits_before = waiter.metrics().waits;
  // When the waiter's acquire() returned; the epoch if it got nothing.
  auto acquired = std::async(std::launch::async, [&] {
    dlock::Lease got = waiter.acquire("handoff", settings);
    const auto at = got ? Clock::now() : Clock::time_point{};
    got.release();  // before the next round's holder comes
    return at;
  });
  while (waiter.metrics().waits == waits_before &&
         acquired.wait_for(50us) != std::future_status::ready) {
  }
  wait_for_watchers([&](long count) { return count > idle; });
  std::this_thread::sleep_for(3ms);
  const auto released = Clock::now();
  held.release();
  const auto at = acquired.get();
  if (at == Clock::time_point{}) throw std::runtime_error("handoff: the waiter did not acquire");
  return us_between(released, at);
}

// The waiter's side of a raw handoff: on a watch stream armed on the holder's key, a thread
// that waits for the DELETE event, then confirms with dlock's Txn (or a Range of the queue)
// that the waiter is first.
struct RawWaiter {
  Raw& raw;
  std::string prefix, mine;
  bool by_range = false;
  Clock::time_point fired_at, done_at;
  std::string error;

  void run(grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>& stream) {
    pb::WatchResponse event;
    while (stream.Read(&event)) {
      const auto& events = event.events();
      if (std::none_of(events.begin(), events.end(),
                       [](const pb::Event& e) { return e.type() == pb::Event::DELETE; })) {
        continue;
      }
      fired_at = Clock::now();
      pb::TxnResponse txn;
      pb::RangeResponse range;
      const grpc::Status status = by_range ? raw.range(queue_of(prefix, 0), range)
                                           : raw.txn(dlock_queue(prefix, mine, raw.lease()), txn);
      if (!by_range && status.ok()) range = txn.responses(txn.responses_size() - 1).response_range();
      done_at = Clock::now();
      if (!status.ok()) error = failure("the waiter's confirmation", status);
      if (status.ok() && (range.kvs().empty() || range.kvs(0).key() != mine)) {
        error = "the waiter is not first after the holder's delete";
      }
      return;
    }
    error = "the watch ended before the delete";
  }
};

// One raw handoff: the holder's key put, the waiter queued behind it by dlock's Txn, its
// watch created (NOPUT, from the revision after its put) before the clock starts, which runs
// from the holder's delete Txn to the waiter's confirmation's answer; `fired` gets the time to
// the DELETE event.
double raw_handoff(Raw& holder, Raw& waiter, bool by_range, double* fired = nullptr) {
  RawWaiter w{waiter, kBase + "queue/", kBase + "queue/waiter", by_range, {}, {}, {}};
  const std::string held = w.prefix + "holder";
  pb::TxnResponse reply;
  must(holder.txn(put_if_absent(held, holder.lease()), reply), "the holder's put");
  must(waiter.txn(dlock_queue(w.prefix, w.mine, waiter.lease()), reply), "the waiter's Txn");
  const auto& queue = reply.responses(1).response_range().kvs();
  if (queue.size() != 2 || queue[0].key() != held) throw std::runtime_error("raw handoff: not queued");
  grpc::ClientContext context;
  auto stream = waiter.watch().Watch(&context);
  pb::WatchRequest create;
  create.mutable_create_request()->set_key(held);
  create.mutable_create_request()->set_start_revision(reply.header().revision() + 1);
  create.mutable_create_request()->add_filters(pb::WatchCreateRequest::NOPUT);
  pb::WatchResponse created;
  if (!stream->Write(create) || !stream->Read(&created) || !created.created()) {
    throw std::runtime_error("raw handoff: the watch was not created");
  }
  std::thread thread([&] { w.run(*stream); });
  std::this_thread::sleep_for(3ms);
  const auto released = Clock::now();
  const grpc::Status deleted = holder.txn(delete_txn(held), reply);
  if (!deleted.ok()) context.TryCancel();
  thread.join();
  context.TryCancel();
  stream->Finish();
  must(waiter.remove(w.mine), "the waiter's delete");
  must(deleted, "the holder's delete");
  if (!w.error.empty()) throw std::runtime_error("raw handoff: " + w.error);
  if (fired != nullptr) *fired = us_between(released, w.fired_at);
  return us_between(released, w.done_at);
}

int handoff(int rounds) {
  floor_client();
  warm_up();
  dlock::Client holder(config("bench-handoff")), waiter(config("bench-handoff"));
  Raw raw_holder(member().port), raw_waiter(member().port);
  const long idle = watchers(member().port);
  // One of each first, unmeasured: connections made, the first leases granted.
  dlock_handoff(holder, waiter, idle);
  raw_handoff(raw_holder, raw_waiter, false);
  raw_handoff(raw_holder, raw_waiter, true);
  std::vector<double> ours, floor, fired, range_floor, ratios, range_ratios;
  constexpr int kBlock = 25;
  for (int done = 0; done < rounds; done += kBlock) {
    std::vector<double> a, b, c;
    for (int i = 0; i < kBlock; ++i) a.push_back(dlock_handoff(holder, waiter, idle));
    for (int i = 0; i < kBlock; ++i) {
      double event = 0;
      b.push_back(raw_handoff(raw_holder, raw_waiter, false, &event));
      fired.push_back(event);
    }
    for (int i = 0; i < kBlock; ++i) c.push_back(raw_handoff(raw_holder, raw_waiter, true));
    ratios.push_back(spread(a).median / spread(b).median);
    range_ratios.push_back(spread(a).median / spread(c).median);
    ours.insert(ours.end(), a.begin(), a.end());
    floor.insert(floor.end(), b.begin(), b.end());
    range_floor.insert(range_floor.end(), c.begin(), c.end());
  }
  const Spread o = spread(ours), f = spread(floor), r = spread(range_floor);
  const double ratio = spread(ratios).median, range_ratio = spread(range_ratios).median;
  fmt::print(
      "etcd handoff over {} rounds: median {:.0f} us (p99 {:.0f}); raw floor (the holder's "
      "delete wakes the queued waiter's watch, which sends dlock's Txn) median {:.0f} us (p99 "
      "{:.0f}; the DELETE event came after {:.0f} us); dlock / floor {:.2f}; raw range floor "
      "(the waiter confirms with a linearizable Range) median {:.0f} us (p99 {:.0f}); dlock / "
      "range floor {:.2f} (blocks of {} in turn; watchers read from /metrics: {})\n",
      ours.size(), o.median, o.p99, f.median, f.p99, spread(fired).median, ratio, r.median,
      r.p99, range_ratio, kBlock, idle < 0 ? "no" : "yes");
  fmt::print(
      "RESULT etcd_handoff member={} rounds={} median_us={:.1f} p99_us={:.1f} "
      "floor_median_us={:.1f} floor_p99_us={:.1f} floor_ratio={:.2f} "
      "floor_watch_fired_median_us={:.1f} range_floor_median_us={:.1f} "
      "range_floor_p99_us={:.1f} range_floor_ratio={:.2f}\n",
      member().role, ours.size(), o.median, o.p99, f.median, f.p99, ratio,
      spread(fired).median, r.median, r.p99, range_ratio);
  return 0;
}

int run(int argc, char** argv) {
  if (const long rounds = dlock::bench::option(argc, argv, "--handoff", 0)) {
    return handoff(static_cast<int>(rounds));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  warm_up();  // before the first benchmark: it times nothing
  benchmark::RunSpecifiedBenchmarks();
  print_cycle_summary();
  benchmark::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dlock_bench_etcd: {}\n", e.what());
    return 1;
  }
}
