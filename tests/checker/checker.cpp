// dlock_checker: mutual exclusion under faults, checked over a recorded history.
//
//   dlock_checker --topology single|sentinel|cluster|redlock|two-backends|postgres|zookeeper|etcd
//                 [--seconds 25] [--workers 4] [--lease-ms 1000] [--work-us 2000] [--seed N]
//                 [--liveness-bound-ms 3000] [--wait-replicas N (sentinel; default 1)]
//                 [--kind exclusive|shared|permits|multi|fair] [--permits 2]
//                 [--broken-lock] [--no-fencing] [--keep]
//
// Starts the topology's servers and a separate, fault-free resource server holding the fenced
// store (fenced_store.hpp), then N worker processes that run critical sections through the
// woven guard of section.cpp, each recording every hold with its fencing token and
// CLOCK_MONOTONIC times. For --seconds, faults run one after another (holders stopped past
// their lease or killed; on the Redis topologies CLIENT PAUSE and pub/sub connections dropped;
// the lock server's clock stepped forward and back while a holder is stopped for less than its
// lease (single, redlock); and the topology's own: server restarts, servers stopped with
// SIGSTOP, connections held, delayed or reset by a proxy, Sentinel failovers, slot migrations,
// Cluster failovers, Redlock instances killed or stopped, PostgreSQL's client connections
// terminated, ZooKeeper and etcd leaders killed, members stopped, whole groups restarted). With
// two-backends, a bystander's lease on the lock's backend must stay renewed while a second stalls.
// Then the faults stop, the workers stop, and a fresh client must get the lock within lease +
// the liveness bound. The histories and the store's log are checked (analysis.hpp) and a
// summary printed; exit status 1 on any violation, 2 when the run itself could not be made (a
// server group that did not start, bad arguments).
//
// --kind picks the workers' guard (checker_worker.cpp): shared mixes shared readers with one
// exclusive writer in four, permits takes one of --permits, multi two keys of three, fair
// waits in arrival order. Only exclusive writers of the one key write to the fenced store;
// every hold is checked for its kind's exclusion (analyse_kinds), fair holds for their order.
// A kind the topology does not offer ends the run with status 2.
//
// --broken-lock replaces the lock by a SET without NX (no exclusion at all) and --no-fencing
// makes the store accept every write: together they must produce violations, which is how the
// checker's own test knows it can fail. docs/RELIABILITY.md has the figures of long runs.
#include <dlock/dlock.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "analysis.hpp"
#include "fenced_store.hpp"
#include "redis_process.hpp"
#include "section.hpp"
#include "topologies.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisAdmin;
using dlock::test::RedisServer;
using checker::monotonic_ns;

constexpr const char* kService = "checker";
constexpr const char* kLockName = "counter";

struct Options {
  std::string topology;
  int seconds = 25;
  int workers = 4;
  int lease_ms = 1000;
  int work_us = 2000;
  unsigned seed = 0;
  int liveness_bound_ms = 3000;
  int wait_replicas = -1;  ///< sentinel only; -1 until parsed, then 1 unless given
  bool broken_lock = false;
  bool fencing = true;
  bool keep = false;
  std::string kind = "exclusive";
  int permits = 2;
};

int to_int(const std::string& flag, const std::string& text, int low, int high) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < low || value > high) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not a whole number in {}..{}", flag, text, low, high));
  }
  return value;
}

Options parse_options(int argc, char** argv) {
  Options o;
  o.seed = static_cast<unsigned>(std::random_device{}());
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + ": missing value");
      return argv[++i];
    };
    if (flag == "--topology") o.topology = value();
    else if (flag == "--seconds") o.seconds = to_int(flag, value(), 1, 86400);
    else if (flag == "--workers") o.workers = to_int(flag, value(), 2, 64);
    else if (flag == "--lease-ms") o.lease_ms = to_int(flag, value(), 100, 600000);
    else if (flag == "--work-us") o.work_us = to_int(flag, value(), 0, 10000000);
    else if (flag == "--seed") o.seed = static_cast<unsigned>(to_int(flag, value(), 0, 2147483647));
    else if (flag == "--liveness-bound-ms") o.liveness_bound_ms = to_int(flag, value(), 0, 600000);
    else if (flag == "--wait-replicas") o.wait_replicas = to_int(flag, value(), 0, 2);
    else if (flag == "--broken-lock") o.broken_lock = true;
    else if (flag == "--no-fencing") o.fencing = false;
    else if (flag == "--keep") o.keep = true;
    else if (flag == "--kind") o.kind = value();
    else if (flag == "--permits") o.permits = to_int(flag, value(), 1, 1000);
    else throw std::invalid_argument("unknown argument '" + flag + "'");
  }
  if (o.topology.empty()) throw std::invalid_argument("--topology is required");
  if (o.topology != "sentinel" && o.wait_replicas >= 0) {
    throw std::invalid_argument("--wait-replicas: only for --topology sentinel");
  }
  if (o.wait_replicas < 0) o.wait_replicas = 1;
  static const std::vector<std::string> kinds{"exclusive", "shared", "permits", "multi", "fair"};
  if (std::find(kinds.begin(), kinds.end(), o.kind) == kinds.end()) {
    throw std::invalid_argument("--kind: '" + o.kind + "' is not exclusive, shared, permits, multi or fair");
  }
  return o;
}

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last complete line of a history file (its last 512 bytes suffice).
std::string last_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 512);
  in.seekg(from);
  std::string tail(static_cast<std::size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  if (tail.empty() || tail.back() != '\n') return "";
  tail.pop_back();
  const auto newline = tail.rfind('\n');
  return newline == std::string::npos ? tail : tail.substr(newline + 1);
}

struct Worker {
  int id = 0;
  std::string history;
  std::unique_ptr<ChildProcess> process;
  long long killed_at = 0;
};

class Run {
 public:
  explicit Run(Options options)
      : o_(std::move(options)), rng_(o_.seed), lease_(o_.lease_ms),
        topology_(checker::make_topology(o_.topology, lease_, o_.wait_replicas)) {
    char pattern[] = "/tmp/dlock-checker-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
  }
  ~Run() {
    bystander_.done = true;
    if (bystander_.sampler.joinable()) bystander_.sampler.join();
    for (auto& w : workers_) {
      if (w.process) w.process->kill();
    }
    if (!o_.keep) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  int execute() {
    say(fmt::format("dlock_checker: topology {}{}, kind {}, {} workers, lease {} ms, {} s of faults, seed {}{}{}",
                    o_.topology,
                    o_.topology == "sentinel" ? fmt::format(" (wait_replicas {})", o_.wait_replicas) : "",
                    o_.kind == "permits" ? fmt::format("permits ({})", o_.permits) : o_.kind, o_.workers,
                    o_.lease_ms, o_.seconds, o_.seed, o_.broken_lock ? ", BROKEN LOCK" : "",
                    o_.fencing ? "" : ", FENCING OFF"));
    set_up();
    const long long started = monotonic_ns();
    run_faults();
    topology_->wait_healthy();
    // The last fault leaves the lock to a dead holder: the probe below must wait out its lease.
    if (!o_.broken_lock) run_fault("kill-holder");
    const long long healed = monotonic_ns();
    stop_workers();
    const std::optional<long long> liveness_ms = probe_liveness(healed);
    const long long run_end = monotonic_ns();
    return report(started, run_end, liveness_ms);
  }

 private:
  void set_up() {
    resource_.start();
    resource_admin_ = std::make_unique<RedisAdmin>(resource_, 30s);
    if (!o_.fencing) resource_admin_->command({"SET", checker::kFencingKey, "off"});
    topology_->start();
    topology_->wait_healthy();  // e.g. cluster replicas synced, so that a first failover can work
    if (topology_->speaks_redis()) {
      topology_->set_lock_key(fmt::format("dlock:{{{}:{}}}:fence", kService, kLockName));
    }
    config_ = (dir_ / "checker.yaml").string();
    std::ofstream(config_) << "service: " << kService << "\nbackends:\n  default:\n"
                           << topology_->backend_yaml() << topology_->other_backends_yaml()
                           << "locks:\n";
    for (const char* guard : {"section", "shared_section", "permit_section", "fair_section", "multi_section"}) {
      std::ofstream(config_, std::ios::app)
          << "  \"checker::" << guard << "\": { lease: " << o_.lease_ms << "ms, wait: 20s"
          << (std::string(guard) == "permit_section" ? fmt::format(", permits: {}", o_.permits) : "") << " }\n";
    }
    stop_file_ = (dir_ / "stop").string();
    for (int i = 0; i < o_.workers; ++i) spawn_worker();
    // Every worker is running sections before the first fault.
    if (!dlock::test::wait_until([&] { return sections_ended() >= 5L * o_.workers; }, 60s, 50ms)) {
      throw std::runtime_error("the workers made no progress within 60 s before any fault");
    }
    if (!topology_->stalling_backend().empty()) start_bystander();
  }

  // One client holding a lease on `default` and one on the stalling backend for the whole
  // run; a thread samples the TTL of the first on its server while the other stalls.
  void start_bystander() {
    // Its samples are PTTL on the default backend's Redis server.
    if (!topology_->speaks_redis()) throw std::logic_error("a bystander needs a Redis topology");
    bystander_.client = std::make_unique<dlock::Client>(dlock::load_config(config_));
    dlock::LockSettings on_default;
    on_default.lease = lease_;
    on_default.wait = 5s;
    bystander_.healthy = bystander_.client->acquire("bystander", on_default, "bystander");
    if (!bystander_.healthy) {
      throw std::runtime_error("bystander: no lease on the default backend: " + bystander_.healthy.error());
    }
    bystander_.healthy.view().on_lost([this](const dlock::LeaseView& view) {
      std::lock_guard lock(bystander_.mutex);
      bystander_.lost = dlock::to_string(view.loss_reason());
    });
    dlock::LockSettings on_stalling = on_default;
    on_stalling.backend = topology_->stalling_backend();
    bystander_.stalled = bystander_.client->acquire("bystander", on_stalling, "bystander-stalled");
    bystander_.held_from = monotonic_ns();
    bystander_.sampler = std::thread([this, node = topology_->default_node()] {
      RedisAdmin admin(node.host, node.port, 2s);
      const std::string key = fmt::format("dlock:{{{}:{}}}:lock", kService, "bystander");
      while (!bystander_.done.load()) {
        if (bystander_.stalling.load()) {
          long long ttl = -3;
          try {
            ttl = admin.integer({"PTTL", key});
          } catch (const std::exception&) {
            // the default server is healthy; a failed sample is just skipped
          }
          if (ttl != -3) {
            std::lock_guard lock(bystander_.mutex);
            ++bystander_.samples;
            if (bystander_.lowest_ttl_ms < 0 || ttl < bystander_.lowest_ttl_ms) bystander_.lowest_ttl_ms = ttl;
          }
        }
        std::this_thread::sleep_for(10ms);
      }
    });
  }

  // Runs a stall of the stalling backend while acquires on it time out (leaving clean-ups in
  // the bystander's client, as timed-out acquires do).
  std::string with_stall(const std::string& kind) {
    bystander_.stalling = true;
    std::thread acquirers([this] {
      dlock::LockSettings settings;
      settings.lease = lease_;
      settings.backend = topology_->stalling_backend();
      for (int i = 0; i < 3; ++i) {
        (void)bystander_.client->try_acquire(fmt::format("timed-out-{}", bystander_.timed_out++), settings,
                                             "timed-out");
      }
    });
    std::string detail;
    try {
      detail = topology_->inject(kind, rng_);
    } catch (...) {
      bystander_.stalling = false;
      acquirers.join();
      throw;
    }
    bystander_.stalling = false;
    ++bystander_.stalls;
    acquirers.join();
    return detail;
  }

  // Ends the bystander; its verdict goes into `violations`, its figures into the summary.
  void stop_bystander(std::vector<std::string>& violations) {
    if (!bystander_.client) return;
    bystander_.done = true;
    if (bystander_.sampler.joinable()) bystander_.sampler.join();
    const double held_s = double(monotonic_ns() - bystander_.held_from) / 1e9;
    const bool lost = bystander_.healthy.lost();
    const auto released = bystander_.healthy.release();
    (void)bystander_.stalled.release();
    std::uint64_t lag_max_us = 0, lag_p99_us = 0;
    for (const auto& m : bystander_.client->metrics().by_name) {
      if (m.name != "bystander") continue;
      lag_max_us = m.renewal_lag.max_us;
      lag_p99_us = m.renewal_lag.percentile_us(0.99);
    }
    std::lock_guard lock(bystander_.mutex);
    const long long renewal_every = lease_.count() / 3;
    // PTTL answers -2 once the key is gone.
    const std::string lateness =
        bystander_.lowest_ttl_ms > 0
            ? fmt::format("renewals at most {} ms late",
                          std::max(0LL, lease_.count() - renewal_every - bystander_.lowest_ttl_ms))
            : std::string("the key EXPIRED");
    bystander_summary_ = fmt::format(
        "lease on default held {:.0f} s through {} stalls of the other backend: {}; lowest TTL on its server "
        "during the stalls {} ms of {} ({} samples), so {}; renewal lag (metric) max {} ms, p99 <= {} ms; "
        "release {}",
        held_s, bystander_.stalls, lost ? "LOST (" + bystander_.lost + ")" : std::string("never lost"),
        bystander_.lowest_ttl_ms, lease_.count(), bystander_.samples, lateness, lag_max_us / 1000,
        lag_p99_us / 1000, dlock::to_string(released));
    if (lost) violations.push_back("bystander: the lease on the healthy backend was lost while the other stalled");
    if (bystander_.samples > 0 && bystander_.lowest_ttl_ms <= 0) {
      violations.push_back("bystander: the key on the healthy backend expired while the other stalled");
    }
  }

  void spawn_worker() {
    Worker w;
    w.id = next_worker_id_++;
    w.history = (dir_ / fmt::format("worker-{}.history", w.id)).string();
    std::vector<std::string> argv{DLOCK_CHECKER_WORKER, config_, std::to_string(resource_.port()),
                                  kLockName, w.history, stop_file_, std::to_string(o_.work_us),
                                  o_.kind, std::to_string(o_.seed + static_cast<unsigned>(w.id))};
    if (o_.broken_lock) {
      argv.emplace_back("broken");
      argv.push_back(std::to_string(o_.lease_ms));
    }
    w.process = std::make_unique<ChildProcess>(argv);
    workers_.push_back(std::move(w));
  }

  // Sections ended so far ("E" lines); throws if a worker has exited (a kind the topology
  // does not offer, say).
  long sections_ended() {
    long ended = 0;
    for (auto& w : workers_) {
      if (!w.process->running()) throw std::runtime_error(fmt::format("worker {} exited before any fault", w.id));
      std::istringstream lines(read_file(w.history));
      for (std::string line; std::getline(lines, line);) ended += line.rfind("E ", 0) == 0 ? 1 : 0;
    }
    return ended;
  }

  int uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

  long store_stat(const std::string& field) {
    return std::stol(resource_admin_->string({"HGET", checker::kStatsKey, field}).value_or("0"));
  }

  // Whether a history's last line says its worker is inside a body: begun (B), or a
  // validity line of the body (V) since.
  static bool inside(const std::string& history) {
    const std::string line = last_line(history);
    return line.rfind("B ", 0) == 0 || line.rfind("V ", 0) == 0;
  }

  // A worker inside its body, held stopped (SIGSTOP) so that it stays there; nullptr if no
  // worker could be caught inside within 3 s.
  Worker* stop_a_holder() {
    const auto give_up = std::chrono::steady_clock::now() + 3s;
    while (std::chrono::steady_clock::now() < give_up) {
      for (auto& w : workers_) {
        if (w.killed_at != 0 || !inside(w.history)) continue;
        w.process->signal(SIGSTOP);
        std::this_thread::sleep_for(5ms);  // let it reach the stop; it may have left the body
        if (inside(w.history)) return &w;
        w.process->signal(SIGCONT);
      }
      std::this_thread::sleep_for(1ms);
    }
    return nullptr;
  }

  // A holder stopped inside its section for a quarter to half its lease, shorter than the
  // lease, while the lock server's wall clock steps forward past the command timeout and past
  // what the lease has left (by max(lease, 1 s) + 0.5 s, up to twice that): the server expires
  // the key early, another worker can take the lock, and the holder's write when it resumes
  // must be refused by fencing. Keys expire by the server's clock: that hazard is Redis's own.
  // The clock stays ahead for a lease + 0.2 ... 1 s, then steps back by as much; the fault ends
  // once the clock has caught up with the latest time it showed. (A restart that lost the token
  // counter within that window would be a second fault: tokens then come from the server's
  // clock, which must not have stepped back by more than the time since; docs/RUNTIME.md.)
  std::string step_clock() {
    RedisServer& server = topology_->clock_server(rng_);
    const int low_ms = std::max(o_.lease_ms, 1000) + 500;
    const auto step = std::chrono::milliseconds(uniform(low_ms, 2 * low_ms));
    const auto ahead = lease_ + std::chrono::milliseconds(uniform(200, 1000));
    const auto held = std::chrono::milliseconds(uniform(o_.lease_ms / 4, o_.lease_ms / 2));
    Worker* w = stop_a_holder();
    const auto stepped = std::chrono::steady_clock::now();
    try {
      server.step_clock(step);
      std::this_thread::sleep_for(held);
      if (w != nullptr) w->process->signal(SIGCONT);
      std::this_thread::sleep_until(stepped + ahead);
      server.step_clock(-step);
    } catch (...) {
      if (w != nullptr) w->process->signal(SIGCONT);
      throw;
    }
    std::this_thread::sleep_for(step);
    const std::string holder =
        w == nullptr
            ? std::string("no worker caught inside its section")
            : fmt::format("worker {} stopped inside its section for {} ms", w->id, held.count());
    return fmt::format("{}: clock stepped forward {} ms ({}), back after {} ms", server.endpoint(),
                       step.count(), holder, ahead.count());
  }

  std::string inject(const std::string& kind) {
    if (kind == "clock-step") return step_clock();
    if (bystander_.client && (kind == "stop-other" || kind == "blackhole-other")) return with_stall(kind);
    if (kind == "pause-holder") {
      Worker* w = stop_a_holder();
      if (w == nullptr) return "";
      const auto paused = lease_ + std::chrono::milliseconds(uniform(200, o_.lease_ms));
      std::this_thread::sleep_for(paused);
      w->process->signal(SIGCONT);
      return fmt::format("worker {} stopped inside its section for {} ms", w->id, paused.count());
    }
    if (kind == "kill-holder") {
      Worker* w = stop_a_holder();
      if (w == nullptr) return "";
      w->process->kill();
      w->killed_at = monotonic_ns();
      spawn_worker();
      return fmt::format("worker {} killed inside its section, worker {} started", w->id, workers_.back().id);
    }
    if (topology_->speaks_redis() && (kind == "client-pause" || kind == "drop-pubsub")) {
      return redis_fault(kind);
    }
    return topology_->inject(kind, rng_);
  }

  // The common faults that speak Redis to the lock's servers (speaks_redis() topologies).
  std::string redis_fault(const std::string& kind) {
    if (kind == "client-pause") {
      const checker::Node node = topology_->lock_node(rng_);
      const int ms = uniform(100, o_.lease_ms / 2 + 100);
      RedisAdmin admin(node.host, node.port);
      admin.command({"CLIENT", "PAUSE", std::to_string(ms), "ALL"});
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return fmt::format("CLIENT PAUSE {} ms on {}:{}", ms, node.host, node.port);
    }
    long long dropped = 0;  // drop-pubsub
    for (const auto& node : topology_->pubsub_nodes()) {
      try {
        RedisAdmin admin(node.host, node.port);
        dropped += admin.integer({"CLIENT", "KILL", "TYPE", "pubsub"});
      } catch (const std::exception&) {
        // a node that is down has no connections to drop
      }
    }
    return fmt::format("CLIENT KILL TYPE pubsub: {} connections", dropped);
  }

  void run_fault(const std::string& kind) {
    checker::Fault fault{kind, monotonic_ns(), 0, ""};
    try {
      fault.detail = inject(kind);
    } catch (const std::exception& e) {
      // The harness, not the lock, failed (a failover that did not finish in time, say).
      // The servers must recover, or the run ends here.
      say(fmt::format("  fault {:<18} FAILED: {}", kind, e.what()));
      ++failed_faults_;
      topology_->wait_healthy();
      return;
    }
    fault.end = monotonic_ns();
    if (fault.detail.empty()) {
      say(fmt::format("  fault {:<18} skipped: no worker caught inside its section", kind));
      say_lock_state();
    } else if (fault.detail.rfind("skipped", 0) == 0) {
      say(fmt::format("  fault {:<18} {}", kind, fault.detail));
    } else {
      say(fmt::format("  fault {:<18} {} ({} ms)", kind, fault.detail, (fault.end - fault.begin) / 1'000'000));
      faults_.push_back(fault);
    }
  }

  void run_faults() {
    std::vector<std::string> kinds{"pause-holder", "kill-holder"};
    if (topology_->speaks_redis()) kinds.insert(kinds.end(), {"client-pause", "drop-pubsub"});
    if (topology_->steps_clocks()) kinds.push_back("clock-step");
    if (o_.broken_lock) kinds = {"pause-holder"};  // the lock is not under test then
    for (const auto& k : topology_->fault_kinds()) {
      if (!o_.broken_lock) kinds.push_back(k);
    }
    const long long deadline = monotonic_ns() + o_.seconds * 1'000'000'000LL;
    std::vector<std::string> order;
    while (monotonic_ns() < deadline) {
      if (order.empty()) {
        order = kinds;
        std::shuffle(order.begin(), order.end(), rng_);
      }
      const std::string kind = order.back();
      order.pop_back();
      run_fault(kind);
      std::this_thread::sleep_for(std::chrono::milliseconds(uniform(300, 1000)));
    }
  }

  // The lock's keys on the servers and where each live worker is, when they seem stuck.
  void say_lock_state() {
    std::string state;
    try {
      state = topology_->lock_state();
    } catch (const std::exception& e) {
      state = std::string("(lock state not read: ") + e.what() + ")";
    }
    if (state.empty()) return;
    if (state.back() == '\n') state.pop_back();
    say("  lock state:\n" + state);
    for (const auto& w : workers_) {
      if (w.killed_at == 0) {
        say(fmt::format("    worker {} (pid {}): last line '{}'", w.id, w.process->pid(), last_line(w.history)));
      }
    }
  }

  void stop_workers() {
    std::ofstream(stop_file_) << "stop\n";
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    bool described = false;
    for (auto& w : workers_) {
      if (w.killed_at != 0) continue;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
      const auto status = w.process->wait(std::max(left, 1ms));
      if (!status) {
        if (!std::exchange(described, true)) say_lock_state();
        say(fmt::format("  worker {} did not stop within 10 s; killed", w.id));
        w.process->kill();
        w.killed_at = monotonic_ns();
      } else if (*status != 0) {
        say(fmt::format("  worker {} exited with status {}", w.id, *status));
        worker_failures_++;
      }
    }
  }

  // A fresh client takes the lock; how long after the faults stopped.
  std::optional<long long> probe_liveness(long long healed) {
    if (o_.broken_lock) return 0;
    dlock::Client client(dlock::load_config(config_));
    dlock::LockSettings settings;
    settings.lease = lease_;
    settings.wait = lease_ + std::chrono::milliseconds(o_.liveness_bound_ms) + 30s;
    // The kind the workers held the key as: a permit is not taken on a key held as a lock.
    if (o_.kind == "permits") settings.permits = o_.permits;
    settings.fair = o_.kind == "fair";
    dlock::Lease lease = client.acquire(kLockName, settings, "liveness");
    const long long at = monotonic_ns();
    if (!lease) {
      say(fmt::format("  liveness: not acquired: {} {}", dlock::to_string(lease.status()), lease.error()));
      return std::nullopt;
    }
    (void)lease.release();
    return (at - healed) / 1'000'000;
  }

  int report(long long started, long long run_end, std::optional<long long> liveness_ms) {
    std::vector<checker::WorkerHistory> histories;
    for (const auto& w : workers_) {
      histories.push_back(checker::parse_history(w.id, read_file(w.history), w.killed_at, run_end));
    }
    const auto store =
        checker::parse_store_log(resource_admin_->array({"LRANGE", checker::kLogKey, "0", "-1"}));
    const long fenced = std::stol(resource_admin_->string({"GET", checker::kValueKey}).value_or("0"));
    const long raw = std::stol(resource_admin_->string({"GET", checker::kRawKey}).value_or("0"));
    checker::Verdict v = checker::analyse(histories, store, faults_, fenced, raw, store_stat("accepted"),
                                          store_stat("rejected"), store_stat("stale_reads"),
                                          o_.lease_ms * 1'000'000LL);
    const checker::KindVerdict kinds = checker::analyse_kinds(
        histories, faults_, o_.kind == "permits" ? o_.permits : 0, o_.kind == "fair", o_.lease_ms * 1'000'000LL);
    v.violations.insert(v.violations.end(), kinds.violations.begin(), kinds.violations.end());
    const long long bound_ms = o_.lease_ms + o_.liveness_bound_ms;
    if (!liveness_ms) {
      v.violations.push_back("liveness: the lock was not acquired after the faults stopped");
    } else if (*liveness_ms > bound_ms) {
      v.violations.push_back(fmt::format("liveness: the lock was acquired {} ms after the faults stopped, "
                                         "more than lease + bound = {} ms", *liveness_ms, bound_ms));
    }
    if (worker_failures_ > 0) v.violations.push_back(fmt::format("{} workers failed", worker_failures_));
    stop_bystander(v.violations);

    std::map<std::string, int> by_kind;
    for (const auto& f : faults_) ++by_kind[f.kind];
    std::string faults_text, overlaps_text;
    for (const auto& [kind, n] : by_kind) {
      faults_text += fmt::format("{}{} {}", faults_text.empty() ? "" : ", ", kind, n);
    }
    for (const auto& [kind, n] : v.overlaps_by_fault) {
      overlaps_text += fmt::format("{}{} {}", overlaps_text.empty() ? "" : ", ", kind, n);
    }
    const long long elapsed_s = (run_end - started) / 1'000'000'000LL;
    say("summary");
    say(fmt::format("  critical sections   {} ({} completed, {} cut short by kills) in {} s; not run: busy {}, "
                    "unavailable {}, error {}", v.sections, v.completed, v.cut_by_kill, elapsed_s, v.busy,
                    v.unavailable, v.errors));
    say(fmt::format("  faults              {} ({}){}", faults_.size(), faults_text.empty() ? "none" : faults_text,
                    failed_faults_ > 0 ? fmt::format("; {} could not be made", failed_faults_) : ""));
    say(fmt::format("  overlaps seen       {} pairs of holds, {} stale holds (stale side rejected {}, stale write "
                    "landed first {}, uncaught {}){}",
                    v.overlaps, v.stale_holds, v.overlaps_caught, v.overlaps_serialized, v.overlaps_uncaught,
                    overlaps_text.empty() ? "" : "; by fault: " + overlaps_text));
    say_kinds(kinds);
    say(fmt::format("  fenced store        writes accepted {}, stale writes rejected {}, stale reads {}, "
                    "stale writes accepted {}", v.store_accepted, v.store_rejected, v.stale_reads,
                    v.stale_writes_accepted));
    say(fmt::format("  counter             fenced {} for {} accepted writes ({}); unfenced {} ({} updates lost)",
                    v.fenced_counter, v.store_accepted, v.counter_exact ? "exact" : "NOT EXACT", v.raw_counter,
                    std::max(0L, v.writers_completed - v.raw_counter)));
    say(fmt::format("  token order         {} regressions, {} shared tokens", v.token_regressions,
                    v.duplicate_tokens));
    say(fmt::format("  liveness            {} (bound: lease {} ms + {} ms)",
                    liveness_ms ? fmt::format("lock acquired {} ms after the faults stopped", *liveness_ms)
                                : std::string("lock NOT acquired"),
                    o_.lease_ms, o_.liveness_bound_ms));
    if (!bystander_summary_.empty()) say("  bystander           " + bystander_summary_);
    say(fmt::format("  violations          {}", v.violations.size()));
    for (const auto& violation : v.violations) say("    - " + violation);
    if (o_.keep) say("  histories kept in " + dir_.string());
    return v.violations.empty() ? 0 : 1;
  }

  // The kinds' verdict: overlaps of holds whose kinds exclude each other, key by key.
  void say_kinds(const checker::KindVerdict& k) {
    std::string by_kind;
    for (const auto& [kind, n] : k.overlaps_by_kind) by_kind += fmt::format("{}{} {}", by_kind.empty() ? "" : ", ", kind, n);
    say(fmt::format("  kind overlaps       {} ({}): lease lapsed {}, during clock steps and restarts {}, "
                    "both held {}", o_.kind, by_kind.empty() ? "none" : by_kind, k.overlaps_expired, k.overlaps_beyond_promise,
                    k.overlaps_held));
    if (o_.kind == "permits") {
      say(fmt::format("  permits             at most {} held at once of {} (a lapsed lease counted); over {} with "
                      "every lease held: {}", k.most_permits, o_.permits, o_.permits, k.over_permits_held));
    }
    if (o_.kind == "fair") {
      std::string by_fault;
      for (const auto& [kind, n] : k.fair_inversions_by_fault) {
        by_fault += fmt::format("{}{} {}", by_fault.empty() ? " (" : ", ", kind, n);
      }
      if (!by_fault.empty()) by_fault += ")";
      say(fmt::format("  fair order          {} pairs where one waited when the other arrived; overtaken {}, "
                      "during faults {}{}", k.fair_pairs,
                      k.fair_inversions, k.fair_inversions_in_faults, by_fault));
    }
    for (const auto& example : k.examples) say("    e.g. " + example);
  }

  Options o_;
  std::mt19937 rng_;
  std::chrono::milliseconds lease_;
  std::unique_ptr<checker::Topology> topology_;
  std::filesystem::path dir_;
  RedisServer resource_;
  std::unique_ptr<RedisAdmin> resource_admin_;
  std::string config_, stop_file_;
  std::deque<Worker> workers_;  // a deque: a worker's address survives spawn_worker()
  int next_worker_id_ = 1;
  int worker_failures_ = 0;
  int failed_faults_ = 0;
  std::vector<checker::Fault> faults_;
  struct Bystander {
    std::unique_ptr<dlock::Client> client;
    dlock::Lease healthy;
    dlock::Lease stalled;
    std::atomic<bool> stalling{false};  // a stall of the other backend is under way
    std::atomic<bool> done{false};
    std::thread sampler;
    long long held_from = 0;
    int stalls = 0;
    int timed_out = 0;
    std::mutex mutex;  // guards the fields below
    std::string lost;
    long long lowest_ttl_ms = -1;
    long samples = 0;
  } bystander_;
  std::string bystander_summary_;
};

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_checker: %s\n", e.what());
    return 2;
  }
  try {
    Run run(options);
    return run.execute();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_checker: %s\n", e.what());
    return 2;
  }
}
