// The lock kinds of DESIGN §7 next to the plain exclusive lock, on one redis-server, all in
// one run (medians of interleaved batches, so that every variant sees the same moments of a
// shared machine):
//
//   cycle        one client, one thread, no contention: acquire + release of
//                  exclusive   one key (the reference)
//                  two_keys    two keys in one lease (one atomic round trip on one server;
//                              target <= 1.2x exclusive)
//                  permit      a permit of a semaphore of 3
//                  shared      a shared hold
//   throughput   8 threads of one client on one key for --millis each: shared holds against
//                exclusive ones (cycles per second)
//   handoff      a holder's release() to the waiter's acquire() returning, waiter parked on
//                its notification: fair against plain
//
//   dlock_bench_kinds [--rounds N] [--batch B] [--millis M] [--handoffs H]
//
// Last line, for scripts/bench:
//   RESULT kinds exclusive_us=.. two_keys_us=.. permit_us=.. shared_us=.. two_keys_ratio=..
//          permit_ratio=.. shared_ratio=.. shared_tput=.. exclusive_tput=.. tput_ratio=..
//          plain_handoff_us=.. fair_handoff_us=.. handoff_ratio=..
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

dlock::LockSettings settings_of(const std::string& kind) {
  dlock::LockSettings s;
  s.lease = 30s;
  s.wait = 0ms;
  if (kind == "permit") s.permits = 3;
  if (kind == "shared") s.mode = dlock::LockMode::kShared;
  if (kind == "fair") s.fair = true;
  return s;
}

// One batch of `count` uncontended cycles of `kind`; the mean cycle in microseconds.
double cycle_batch(dlock::Client& client, const std::string& kind, int count) {
  const dlock::LockSettings s = settings_of(kind == "two_keys" ? "exclusive" : kind);
  const std::vector<dlock::Key> two{"kinds-a", "kinds-b"};
  const auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    dlock::Lease lease = kind == "two_keys" ? client.acquire(two, s) : client.acquire("kinds-one-" + kind, s);
    if (!lease) throw std::runtime_error(fmt::format("{}: not acquired: {}", kind, lease.error()));
  }
  return micros(Clock::now() - start) / count;
}

// Cycles per second of 8 threads on one key.
double throughput(dlock::Client& client, const std::string& kind, std::chrono::milliseconds span) {
  dlock::LockSettings s = settings_of(kind);
  s.wait = 5s;
  std::atomic<long> cycles{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        dlock::Lease lease = client.acquire("kinds-tput", s);
        if (lease) cycles.fetch_add(1);
      }
    });
  }
  const auto start = Clock::now();
  std::this_thread::sleep_for(span);
  stop = true;
  for (auto& t : threads) t.join();
  return static_cast<double>(cycles.load()) / std::chrono::duration<double>(Clock::now() - start).count();
}

// One handoff: the waiter parks, the holder releases; release() call to acquire() returning.
double handoff(dlock::Client& holder, dlock::Client& waiter, bool fair) {
  dlock::LockSettings s = settings_of(fair ? "fair" : "exclusive");
  dlock::LockSettings first = s;
  first.wait = 2s;  // the last round's release, sent on the waiter's connection, may come later
  dlock::Lease held = holder.acquire("kinds-handoff", first);
  if (!held) throw std::runtime_error("handoff: holder not granted");
  const auto waits = waiter.metrics().waits;
  std::atomic<Clock::rep> acquired{0};
  std::thread t([&] {
    dlock::LockSettings w = s;
    w.wait = 5s;
    dlock::Lease lease = waiter.acquire("kinds-handoff", w);
    acquired = Clock::now().time_since_epoch().count();
  });
  while (waiter.metrics().waits == waits) std::this_thread::sleep_for(100us);
  std::this_thread::sleep_for(5ms);  // parked on its notification
  const auto released = Clock::now();
  held.release();
  t.join();
  return micros(Clock::time_point(Clock::duration(acquired.load())) - released);
}

// The server's time in scripts so far, in microseconds (INFO commandstats: EVAL and EVALSHA).
double script_usec(dlock::bench::RawConnection& conn) {
  redisReply* reply = conn.command("INFO commandstats");
  const std::string info = reply->type == REDIS_REPLY_STRING
                               ? std::string(reply->str, reply->len)
                               : "";
  freeReplyObject(reply);
  double usec = 0;
  for (const std::string verb : {"cmdstat_evalsha:", "cmdstat_eval:"}) {
    const auto line = info.find(verb);
    const auto at = line == std::string::npos ? line : info.find("usec=", line);
    if (at != std::string::npos) usec += std::stod(info.substr(at + 5));
  }
  return usec;
}

int int_arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::stoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) try {
  const int rounds = int_arg(argc, argv, "--rounds", 15);
  const int batch = int_arg(argc, argv, "--batch", 200);
  const auto span = std::chrono::milliseconds(int_arg(argc, argv, "--millis", 1000));
  const int handoffs = int_arg(argc, argv, "--handoffs", 100);
  dlock::set_log_level(dlock::LogLevel::kError);
  dlock::Client client(dlock::bench::single_node_config("kinds"));
  const std::vector<std::string> kinds{"exclusive", "two_keys", "permit", "shared"};
  std::map<std::string, std::vector<double>> cycle, server;
  dlock::bench::RawConnection stats;
  for (const auto& kind : kinds) cycle_batch(client, kind, batch / 4);  // warm-up
  for (int r = 0; r < rounds; ++r) {
    for (const auto& kind : kinds) {
      const double before = script_usec(stats);
      cycle[kind].push_back(cycle_batch(client, kind, batch));
      // The batch's last release may still be on its way: at most one script in `batch`.
      server[kind].push_back((script_usec(stats) - before) / batch);
    }
  }
  std::vector<double> shared_tput, exclusive_tput;
  for (int r = 0; r < 3; ++r) {
    shared_tput.push_back(throughput(client, "shared", span));
    exclusive_tput.push_back(throughput(client, "exclusive", span));
  }
  dlock::Client holder(dlock::bench::single_node_config("kinds"));
  dlock::Client waiter(dlock::bench::single_node_config("kinds"));
  std::vector<double> plain, fair;
  for (int i = 0; i < handoffs; ++i) {
    plain.push_back(handoff(holder, waiter, false));
    fair.push_back(handoff(holder, waiter, true));
  }
  const double x = median(cycle["exclusive"]), two = median(cycle["two_keys"]),
               permit = median(cycle["permit"]), shared = median(cycle["shared"]);
  const double st = median(shared_tput), xt = median(exclusive_tput);
  const double ph = median(plain), fh = median(fair);
  fmt::print("cycle (us, median of {} batches of {}): exclusive {:.1f}, two keys {:.1f}, permit "
             "{:.1f}, shared {:.1f}\n",
             rounds, batch, x, two, permit, shared);
  const double sx = median(server["exclusive"]), stwo = median(server["two_keys"]);
  fmt::print("server time in scripts per cycle (us, median): exclusive {:.1f}, two keys {:.1f}, "
             "permit {:.1f}, shared {:.1f}\n",
             sx, stwo, median(server["permit"]), median(server["shared"]));
  fmt::print("8 threads on one key ({} ms, median of 3): shared {:.0f}/s, exclusive {:.0f}/s\n",
             span.count(), st, xt);
  fmt::print("handoff (us, median of {}): plain {:.1f}, fair {:.1f}\n", handoffs, ph, fh);
  fmt::print("RESULT kinds exclusive_us={:.1f} two_keys_us={:.1f} permit_us={:.1f} shared_us={:.1f} "
             "two_keys_ratio={:.2f} permit_ratio={:.2f} shared_ratio={:.2f} shared_tput={:.0f} "
             "exclusive_tput={:.0f} tput_ratio={:.2f} plain_handoff_us={:.1f} "
             "fair_handoff_us={:.1f} handoff_ratio={:.2f} exclusive_server_us={:.1f} "
             "two_keys_server_us={:.1f}\n",
             x, two, permit, shared, two / x, permit / x, shared / x, st, xt, st / xt, ph, fh,
             fh / ph, sx, stwo);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "dlock_bench_kinds: {}\n", e.what());
  return 1;
}
