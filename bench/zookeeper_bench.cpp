// What a lock costs on ZooKeeper, next to that engine's own floor in the same run, against a
// 3-member ensemble started here (ZookeeperEnsemble of tests/support, tick 500 ms), every
// session of the run connected to the same member: a follower, or the leader with
// DLOCK_BENCH_ZK_MEMBER=leader.
//
//   BM_ZookeeperCycle     acquire + the lease's destructor through the public API (topology:
//                         zookeeper): a guard's path, whose release is sent and not waited for
//   BM_ZookeeperWaitedCycle  acquire + release(), which waits for the delete's answer
//   BM_ZookeeperPermitCycle  the cycle of a permit of a semaphore of 3
//   BM_RawFloor           the floor: an ephemeral sequential znode created under a parent, then
//                         deleted, each call waited for (zoo_create, zoo_delete of the C client)
//   BM_RawFloorDeleteUnwaited  the same with the delete sent and not waited for: a guard's shape
//   BM_RawDlockRequests   dlock's own requests over the C client: its acquire's create and
//                         getChildren sent together, then its release's delete
//   BM_Exists             `exists` of a znode: one round trip, a read the member answers itself
//
// Each iteration is timed too; after the benchmarks, the medians and p99 of all of each one's
// iterations, the cycles' ratios to the floor and a RESULT line.
//
// The handoff (--handoff ROUNDS, run instead of the above): a holder releases while a second
// client waits in acquire(), queued behind it with a watch on its znode; the time from
// release() to the waiter's acquire() returning, next to two raw floors over the C client: a
// waiter queued the same way (its ephemeral sequential znode made, a get watch on the
// holder's) whose watcher, when the holder's delete fires it, lists the children; and a
// waiter not queued (a get watch on the holder's ephemeral znode) whose watcher creates that
// znode for itself. Blocks of 25 rounds of each in turn.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"
#include "zookeeper_ensemble.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kSessionTimeout = 10s;
constexpr const char* kBase = "/bench-floor";

// ---- the ensemble and the member every session talks to ----

struct Member {
  int index = 0;
  int port = 0;
  std::string role;
};

const Member& member() {
  static dlock::test::ZookeeperEnsemble ensemble;
  static const Member value = [] {
    ensemble.start();
    const int leader = ensemble.wait_serving();
    const char* env = std::getenv("DLOCK_BENCH_ZK_MEMBER");
    const bool on_leader = env != nullptr && std::string(env) == "leader";
    if (env != nullptr && *env != '\0' && !on_leader && std::string(env) != "follower") {
      throw std::invalid_argument(
          fmt::format("DLOCK_BENCH_ZK_MEMBER: '{}' is neither leader nor follower", env));
    }
    const int index = on_leader ? leader : (leader + 1) % ensemble.members();
    fmt::print(
        "zookeeper: {}-member ensemble, tick {} ms; every session on member {} ({}), "
        "{}\n",
        ensemble.members(), ensemble.options().tick.count(), index,
        on_leader ? "the leader" : "a follower", ensemble.endpoint(index));
    std::fflush(stdout);
    return Member{index, ensemble.client_port(index), on_leader ? "leader" : "follower"};
  }();
  return value;
}

std::string hosts() { return fmt::format("127.0.0.1:{}", member().port); }

dlock::Config config(const std::string& service) {
  dlock::Config config;
  config.service = service;
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.topology = dlock::Topology::kZookeeper;
  backend.endpoints = {dlock::Endpoint{"127.0.0.1", member().port}};
  backend.session_timeout = kSessionTimeout;
  backend.command_timeout = 2s;
  config.backends["default"] = backend;
  return config;
}

dlock::LockSettings lease_settings(std::chrono::milliseconds wait) {
  dlock::LockSettings settings;
  settings.lease = kSessionTimeout;
  settings.wait = wait;
  return settings;
}

// ---- one raw session over the C client ----

void drop_log_line(const char*) {}

std::string zk_text(int rc) { return fmt::format("{} ({})", zerror(rc), rc); }

/// One session of the C client (zookeeper_mt): blocking calls, and the handle for the
/// asynchronous ones.
class Raw {
 public:
  Raw() {
    zh_ = zookeeper_init2(hosts().c_str(), &Raw::on_session,
                          static_cast<int>(std::chrono::milliseconds(kSessionTimeout).count()),
                          nullptr, this, 0, drop_log_line);
    if (zh_ == nullptr) throw std::runtime_error("zookeeper_init2 failed");
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, 10s, [&] { return state_ == ZOO_CONNECTED_STATE; })) {
      throw std::runtime_error(fmt::format("no session with {} within 10 s", hosts()));
    }
  }
  ~Raw() { zookeeper_close(zh_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  zhandle_t* get() const { return zh_; }

  /// Creates `path` and returns the path made (with its sequence number, if any).
  std::string create(const std::string& path, int flags, const std::string& data = {}) {
    char made[512];
    check(zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                     &ZOO_OPEN_ACL_UNSAFE, flags, made, sizeof made),
          "create", path);
    return made;
  }
  /// A persistent znode, left as it is if it exists.
  void ensure(const std::string& path) {
    const int rc = zoo_create(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
    if (rc != ZNODEEXISTS) check(rc, "create", path);
  }
  void remove(const std::string& path) { check(zoo_delete(zh_, path.c_str(), -1), "delete", path); }

  static void check(int rc, const char* what, const std::string& path) {
    if (rc != ZOK) throw std::runtime_error(fmt::format("{} {}: {}", what, path, zk_text(rc)));
  }

 private:
  static void on_session(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* self = static_cast<Raw*>(context);
    std::lock_guard lock(self->mutex_);
    self->state_ = state;
    self->changed_.notify_all();
  }

  zhandle_t* zh_ = nullptr;
  std::mutex mutex_;
  std::condition_variable changed_;
  int state_ = 0;
};

/// Asynchronous answers counted down; wait() returns when all have come.
struct Pending {
  std::mutex mutex;
  std::condition_variable cv;
  int left = 0;
  int rc = ZOK;  // the first error
  std::string made;
  Clock::time_point done_at;

  void arm(int count) {
    std::lock_guard lock(mutex);
    left = count;
    rc = ZOK;
    made.clear();
  }
  void answer(int code, const char* path = nullptr) {
    std::lock_guard lock(mutex);
    if (code != ZOK && rc == ZOK) rc = code;
    if (path != nullptr) made = path;
    if (--left == 0) {
      done_at = Clock::now();
      cv.notify_all();
    }
  }
  int wait() {
    std::unique_lock lock(mutex);
    if (!cv.wait_for(lock, 5s, [&] { return left == 0; })) return ZOPERATIONTIMEOUT;
    return rc;
  }
};

void on_created(int rc, const char* path, const struct Stat*, const void* data) {
  static_cast<Pending*>(const_cast<void*>(data))->answer(rc, path);
}
void on_children(int rc, const struct String_vector*, const void* data) {
  static_cast<Pending*>(const_cast<void*>(data))->answer(rc);
}
void on_void(int, const void*) {}

Raw& floor_session() {
  static Raw raw;
  static const bool ready = [] {
    raw.ensure(kBase);
    for (const char* dir : {"cycle", "dlock", "queue"}) {
      raw.ensure(fmt::format("{}/{}", kBase, dir));
    }
    return true;
  }();
  (void)ready;
  return raw;
}

// ---- the cycle ----

/// Every iteration's time of each benchmark, in microseconds, over all its runs.
std::map<std::string, std::vector<double>>& samples() {
  static std::map<std::string, std::vector<double>> all;
  return all;
}

double since_us(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

std::vector<double>& samples_of(const char* name) {
  auto& out = samples()[name];
  out.reserve(out.size() + 100000);
  return out;
}

dlock::Client& cycle_client() {
  static dlock::Client client(config("bench-zookeeper"));
  return client;
}

// acquire() + the lease's destructor of `key`, each iteration timed into `name`'s samples.
void time_cycles(benchmark::State& state, const char* name, const char* key,
                 const dlock::LockSettings& settings) {
  dlock::Client& client = cycle_client();
  auto& out = samples_of(name);
  for (auto _ : state) {
    const auto start = Clock::now();
    {
      dlock::Lease lease = client.acquire(key, settings);
      if (!lease) state.SkipWithError(("not acquired: " + lease.error()).c_str());
      benchmark::DoNotOptimize(lease.token());
    }
    out.push_back(since_us(start));
  }
}

void BM_ZookeeperCycle(benchmark::State& state) {
  time_cycles(state, "BM_ZookeeperCycle", "bench-key", lease_settings(0ms));
}

// The cycle of a permit of a semaphore of 3 (its znode's name and place read the same way).
void BM_ZookeeperPermitCycle(benchmark::State& state) {
  dlock::LockSettings settings = lease_settings(0ms);
  settings.permits = 3;
  time_cycles(state, "BM_ZookeeperPermitCycle", "bench-permits", settings);
}

void BM_ZookeeperWaitedCycle(benchmark::State& state) {
  dlock::Client& client = cycle_client();
  const dlock::LockSettings settings = lease_settings(0ms);
  auto& out = samples_of("BM_ZookeeperWaitedCycle");
  for (auto _ : state) {
    const auto start = Clock::now();
    dlock::Lease lease = client.acquire("bench-key", settings);
    if (!lease) state.SkipWithError(("not acquired: " + lease.error()).c_str());
    if (lease.release() != dlock::ReleaseStatus::kReleased) state.SkipWithError("not released");
    out.push_back(since_us(start));
  }
}

void BM_RawFloor(benchmark::State& state) {
  Raw& raw = floor_session();
  const std::string prefix = fmt::format("{}/cycle/l-", kBase);
  auto& out = samples_of("BM_RawFloor");
  char made[256];
  for (auto _ : state) {
    const auto start = Clock::now();
    int rc = zoo_create(raw.get(), prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made);
    if (rc == ZOK) rc = zoo_delete(raw.get(), made, -1);
    if (rc != ZOK) state.SkipWithError(zk_text(rc).c_str());
    out.push_back(since_us(start));
  }
}

void BM_RawFloorDeleteUnwaited(benchmark::State& state) {
  Raw& raw = floor_session();
  const std::string prefix = fmt::format("{}/cycle/l-", kBase);
  auto& out = samples_of("BM_RawFloorDeleteUnwaited");
  char made[256];
  for (auto _ : state) {
    const auto start = Clock::now();
    int rc = zoo_create(raw.get(), prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made);
    // The answer is read on the C client's thread; the session's next request goes after it.
    if (rc == ZOK) rc = zoo_adelete(raw.get(), made, -1, on_void, nullptr);
    if (rc != ZOK) state.SkipWithError(zk_text(rc).c_str());
    out.push_back(since_us(start));
  }
}

void BM_RawDlockRequests(benchmark::State& state) {
  Raw& raw = floor_session();
  const std::string dir = fmt::format("{}/dlock", kBase);
  // As the backend names and fills a lock znode: l-<owner>-<sequence>, and "lease pid thread
  // host name" with host and name in hex.
  const std::string prefix = dir + "/l-0123456789abcdef0123456789abcdef-";
  const std::string data =
      fmt::format("10000 {} 140234567890 6c6f63616c686f7374 {}", ::getpid(), "62656e63682d6b6579");
  auto& out = samples_of("BM_RawDlockRequests");
  Pending pending;
  for (auto _ : state) {
    const auto start = Clock::now();
    pending.arm(2);
    int rc = zoo_acreate2(raw.get(), prefix.c_str(), data.data(), static_cast<int>(data.size()),
                          &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, on_created, &pending);
    if (rc == ZOK) rc = zoo_aget_children(raw.get(), dir.c_str(), 0, on_children, &pending);
    if (rc == ZOK) rc = pending.wait();
    if (rc == ZOK) rc = zoo_delete(raw.get(), pending.made.c_str(), -1);
    if (rc != ZOK) state.SkipWithError(zk_text(rc).c_str());
    out.push_back(since_us(start));
  }
}

void BM_Exists(benchmark::State& state) {
  Raw& raw = floor_session();
  auto& out = samples_of("BM_Exists");
  struct Stat stat {};
  for (auto _ : state) {
    const auto start = Clock::now();
    const int rc = zoo_exists(raw.get(), kBase, 0, &stat);
    if (rc != ZOK) state.SkipWithError(zk_text(rc).c_str());
    out.push_back(since_us(start));
  }
}

// Iterations are counted to fill --benchmark_min_time of wall time: the threads mostly wait
// for the ensemble, and by their CPU time a 0.5 s run would last minutes.
BENCHMARK(BM_ZookeeperCycle)->UseRealTime();
BENCHMARK(BM_ZookeeperWaitedCycle)->UseRealTime();
BENCHMARK(BM_ZookeeperPermitCycle)->UseRealTime();
BENCHMARK(BM_RawFloor)->UseRealTime();
BENCHMARK(BM_RawFloorDeleteUnwaited)->UseRealTime();
BENCHMARK(BM_RawDlockRequests)->UseRealTime();
BENCHMARK(BM_Exists)->UseRealTime();

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

double p99(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return dlock::bench::quantile(values, 0.99);
}

// The JIT of a freshly started server makes its first thousand requests slow: a second of
// cycles of both kinds before anything is measured.
void warm_up() {
  dlock::Client& client = cycle_client();
  Raw& raw = floor_session();
  const std::string prefix = fmt::format("{}/cycle/l-", kBase);
  const auto until = Clock::now() + 1500ms;
  for (int i = 0; i < 2000 && Clock::now() < until; ++i) {
    client.acquire("bench-key", lease_settings(0ms)).release();
    raw.remove(raw.create(prefix, ZOO_EPHEMERAL_SEQUENTIAL));
  }
}

void print_cycle_summary() {
  const auto& all = samples();
  const auto find = [&](const char* name) -> const std::vector<double>* {
    const auto found = all.find(name);
    return found == all.end() || found->second.empty() ? nullptr : &found->second;
  };
  fmt::print("\nevery iteration, all runs of each benchmark:\n");
  for (const auto& [name, values] : all) {
    if (values.empty()) continue;
    fmt::print("  {:<28} {:>8} iterations  median {:>8.1f} us  p99 {:>8.1f} us\n", name,
               values.size(), median(values), p99(values));
  }
  const auto* floor = find("BM_RawFloor");
  const auto* guard = find("BM_ZookeeperCycle");
  if (floor == nullptr || guard == nullptr) return;
  const double floor_median = median(*floor);
  std::string line = fmt::format(
      "RESULT zookeeper_cycle member={} guard_median_us={:.1f} guard_p99_us={:.1f} "
      "floor_median_us={:.1f} floor_p99_us={:.1f} guard_ratio={:.2f}",
      member().role, median(*guard), p99(*guard), floor_median, p99(*floor),
      median(*guard) / floor_median);
  fmt::print(
      "zookeeper cycle: acquire + destructor median {:.0f} us; raw floor (create + "
      "delete, each waited for) median {:.0f} us; dlock / floor {:.2f}",
      median(*guard), floor_median, median(*guard) / floor_median);
  if (const auto* waited = find("BM_ZookeeperWaitedCycle")) {
    fmt::print("; acquire + release() median {:.0f} us, {:.2f}× the floor", median(*waited),
               median(*waited) / floor_median);
    line += fmt::format(" waited_median_us={:.1f} waited_p99_us={:.1f} waited_ratio={:.2f}",
                        median(*waited), p99(*waited), median(*waited) / floor_median);
  }
  if (const auto* permit = find("BM_ZookeeperPermitCycle")) {
    fmt::print("; a permit's cycle median {:.0f} us, {:.2f}× the exclusive one", median(*permit),
               median(*permit) / median(*guard));
    line += fmt::format(" permit_median_us={:.1f} permit_ratio={:.2f}", median(*permit),
                        median(*permit) / median(*guard));
  }
  fmt::print("\n");
  const std::pair<const char*, const char*> others[] = {
      {"BM_RawFloorDeleteUnwaited", "unwaited_floor"},
      {"BM_RawDlockRequests", "dlock_requests"},
      {"BM_Exists", "exists"}};
  for (const auto& [name, field] : others) {
    if (const auto* values = find(name)) {
      line += fmt::format(" {}_median_us={:.1f} {}_p99_us={:.1f}", field, median(*values), field,
                          p99(*values));
    }
  }
  fmt::print("{}\n", line);
}

// ---- the handoff ----

/// The watches registered on the member (mntr's zk_watch_count), or -1 if it does not say.
long watch_count() {
  const auto text = dlock::test::zookeeper_four_letter_word(member().port, "mntr");
  if (!text) return -1;
  const auto at = text->find("zk_watch_count");
  if (at == std::string::npos) return -1;
  return std::strtol(text->c_str() + at + std::string("zk_watch_count").size(), nullptr, 10);
}

// Returns once the member holds more than `before` watches (the waiter's is armed), or after
// a second; with no count to read, after 20 ms.
void wait_for_watch(long before) {
  if (before < 0) {
    std::this_thread::sleep_for(20ms);
    return;
  }
  const auto until = Clock::now() + 1s;
  while (Clock::now() < until) {
    const long now = watch_count();
    if (now < 0 || now > before) return;
    std::this_thread::sleep_for(200us);
  }
}

double us_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

// One dlock handoff: `holder` holds the key; a thread of `waiter` waits for it, queued with a
// watch on the holder's znode; the clock runs from the holder's release() to the waiter's
// acquire() returning.
double dlock_handoff(dlock::Client& holder, dlock::Client& waiter) {
  const dlock::LockSettings settings = lease_settings(5s);
  const std::string key = "handoff";
  dlock::Lease held = holder.acquire(key, settings);
  if (!held) throw std::runtime_error("handoff: the holder did not acquire: " + held.error());
  const long watches = watch_count();
  std::atomic<Clock::time_point::rep> acquired{0};
  std::atomic<bool> got_it{false};
  const auto waits_before = waiter.metrics().waits;
  std::thread thread([&] {
    dlock::Lease got = waiter.acquire(key, settings);
    acquired = Clock::now().time_since_epoch().count();
    got_it = static_cast<bool>(got);
    got.release();  // before the next round's holder comes
  });
  while (waiter.metrics().waits == waits_before) std::this_thread::sleep_for(50us);
  wait_for_watch(watches);
  std::this_thread::sleep_for(3ms);
  const auto released = Clock::now();
  held.release();
  thread.join();
  if (!got_it) throw std::runtime_error("handoff: the waiter did not acquire");
  return us_between(released, Clock::time_point(Clock::duration(acquired.load())));
}

// A raw waiter's watcher: when the znode it watches goes, sends its one request (`path` for
// create_path, else the listing of `dir`) and notes when the answer came.
struct RawWaiter {
  Pending pending;
  std::string dir;
  std::string create_path;  // non-empty: create it (ephemeral) instead of listing `dir`
  std::string own;          // the waiter's own znode's name, when queued
  std::vector<std::string> children;
  Clock::time_point fired_at;  // when the watcher ran

  static void on_listed(int rc, const struct String_vector* names, const void* data) {
    auto* self = static_cast<RawWaiter*>(const_cast<void*>(data));
    if (rc == ZOK && names != nullptr) {
      self->children.assign(names->data, names->data + names->count);
    }
    self->pending.answer(rc);
  }
  static void on_made(int rc, const char* path, const void* data) {
    static_cast<RawWaiter*>(const_cast<void*>(data))->pending.answer(rc, path);
  }
  static void on_watch(zhandle_t* zh, int type, int, const char*, void* context) {
    auto* self = static_cast<RawWaiter*>(context);
    if (type == ZOO_SESSION_EVENT) return;  // the connection's state: the watch stays
    self->fired_at = Clock::now();
    if (type != ZOO_DELETED_EVENT) {
      self->pending.answer(ZSYSTEMERROR);
      return;
    }
    const int rc = self->create_path.empty()
                       ? zoo_aget_children(zh, self->dir.c_str(), 0, on_listed, self)
                       : zoo_acreate(zh, self->create_path.c_str(), nullptr, -1,
                                     &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, on_made, self);
    if (rc != ZOK) self->pending.answer(rc);
  }
};

// Arms a get watch of `waiter` on `watched` (waited for) and returns the time from the
// holder's delete of it to the answer of the request the watcher sends; `fired`, if given,
// gets the time from the delete to the watcher.
double raw_handoff_after(Raw& holder, Raw& waiter, RawWaiter& w, const std::string& watched,
                         double* fired = nullptr) {
  w.pending.arm(1);
  char buffer[64];
  int length = sizeof buffer;
  struct Stat stat {};
  Raw::check(
      zoo_wget(waiter.get(), watched.c_str(), RawWaiter::on_watch, &w, buffer, &length, &stat),
      "get (watch)", watched);
  std::this_thread::sleep_for(3ms);
  const auto released = Clock::now();
  holder.remove(watched);
  const int rc = w.pending.wait();
  if (rc != ZOK) throw std::runtime_error("raw handoff: " + zk_text(rc));
  if (fired != nullptr) *fired = us_between(released, w.fired_at);
  return us_between(released, w.pending.done_at);
}

// The floor of dlock's path: the waiter is queued (its ephemeral sequential znode made, a get
// watch on the holder's); the holder's delete fires the watch, whose watcher lists the
// children to see the waiter first.
double raw_queue_handoff(Raw& holder, Raw& waiter, double* fired = nullptr) {
  RawWaiter w;
  w.dir = fmt::format("{}/queue", kBase);
  const std::string held = holder.create(w.dir + "/l-", ZOO_EPHEMERAL_SEQUENTIAL);
  const std::string mine = waiter.create(w.dir + "/l-", ZOO_EPHEMERAL_SEQUENTIAL);
  w.own = mine.substr(mine.rfind('/') + 1);
  const double took = raw_handoff_after(holder, waiter, w, held, fired);
  std::sort(w.children.begin(), w.children.end());
  if (w.children.empty() || w.children.front() != w.own) {
    throw std::runtime_error("raw handoff: the waiter is not first after the holder's delete");
  }
  waiter.remove(mine);
  return took;
}

// The waiter not queued: the lock is one ephemeral znode; the holder's delete fires the
// waiter's watch, whose watcher creates the znode for itself.
double raw_create_handoff(Raw& holder, Raw& waiter) {
  RawWaiter w;
  w.create_path = fmt::format("{}/herd", kBase);
  holder.create(w.create_path, ZOO_EPHEMERAL);
  const double took = raw_handoff_after(holder, waiter, w, w.create_path);
  waiter.remove(w.create_path);
  return took;
}

int handoff(int rounds) {
  floor_session();
  warm_up();
  dlock::Client holder(config("bench-handoff")), waiter(config("bench-handoff"));
  Raw raw_holder, raw_waiter;
  // One of each first, unmeasured: the key's directory is made by the first acquire.
  dlock_handoff(holder, waiter);
  raw_queue_handoff(raw_holder, raw_waiter);
  raw_create_handoff(raw_holder, raw_waiter);
  std::vector<double> ours, floor, fired, create_floor, ratios, create_ratios;
  constexpr int kBlock = 25;
  for (int done = 0; done < rounds; done += kBlock) {
    std::vector<double> a, b, c;
    for (int i = 0; i < kBlock; ++i) a.push_back(dlock_handoff(holder, waiter));
    for (int i = 0; i < kBlock; ++i) {
      double watch_fired = 0;
      b.push_back(raw_queue_handoff(raw_holder, raw_waiter, &watch_fired));
      fired.push_back(watch_fired);
    }
    for (int i = 0; i < kBlock; ++i) c.push_back(raw_create_handoff(raw_holder, raw_waiter));
    ratios.push_back(median(a) / median(b));
    create_ratios.push_back(median(a) / median(c));
    ours.insert(ours.end(), a.begin(), a.end());
    floor.insert(floor.end(), b.begin(), b.end());
    create_floor.insert(create_floor.end(), c.begin(), c.end());
  }
  fmt::print(
      "zookeeper handoff over {} rounds: median {:.0f} us (p99 {:.0f}); raw floor (the "
      "holder's delete fires the queued waiter's get watch, which lists the children) "
      "median {:.0f} us (p99 {:.0f}; the watcher ran after {:.0f} us); dlock / floor "
      "{:.2f}; raw create floor (the watch fires, the waiter creates the znode) median "
      "{:.0f} us (p99 {:.0f}); dlock / create floor {:.2f} (blocks of {} in turn)\n",
      ours.size(), median(ours), p99(ours), median(floor), p99(floor), median(fired),
      median(ratios), median(create_floor), p99(create_floor), median(create_ratios), kBlock);
  fmt::print(
      "RESULT zookeeper_handoff member={} rounds={} median_us={:.1f} p99_us={:.1f} "
      "floor_median_us={:.1f} floor_p99_us={:.1f} floor_ratio={:.2f} "
      "floor_watch_fired_median_us={:.1f} create_floor_median_us={:.1f} "
      "create_floor_p99_us={:.1f} create_floor_ratio={:.2f}\n",
      member().role, ours.size(), median(ours), p99(ours), median(floor), p99(floor),
      median(ratios), median(fired), median(create_floor), p99(create_floor),
      median(create_ratios));
  return 0;
}

int run(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--handoff") return handoff(std::max(1, std::atoi(argv[i + 1])));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  floor_session();
  warm_up();
  samples().clear();
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
    fmt::print(stderr, "dlock_bench_zookeeper: {}\n", e.what());
    return 1;
  }
}
