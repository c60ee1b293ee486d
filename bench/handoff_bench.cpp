// Handoff latency: one client holds a key while a second one waits for it in acquire(); the
// time from the holder's release() call to the waiter's acquire() returning with the lease.
// Holder and waiter are separate clients (own connections, own release subscriber), as two
// processes would be. Reference: the median PING round trip on the same server, same run.
//
//   dlock_bench_handoff [--rounds N] [--settle-ms S]
//
// --settle-ms: how long the holder keeps the key after the waiter has started waiting, so
// the waiter is certainly parked on its release notification when the release comes.
// Last line, for scripts/bench:
//   RESULT handoff rounds=N median_us=X p99_us=Y ping_us=Z ratio=X/Z
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "dlock/dlock.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) try {
  const long rounds = dlock::bench::option(argc, argv, "--rounds", 300);
  const auto settle = std::chrono::milliseconds(dlock::bench::option(argc, argv, "--settle-ms", 3));

  dlock::Client holder(dlock::bench::single_node_config("bench-handoff"));
  dlock::Client waiter(dlock::bench::single_node_config("bench-handoff"));
  dlock::LockSettings settings;
  settings.lease = 30s;
  settings.wait = 5s;
  // Warm both clients: connections and the waiter's subscription.
  holder.acquire("handoff-warm", settings).release();
  waiter.acquire("handoff-warm", settings).release();

  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(rounds));
  for (long i = 0; i < rounds; ++i) {
    dlock::Lease held = holder.acquire("handoff", settings);
    if (!held) throw std::runtime_error("holder: " + held.error());
    std::atomic<bool> waiting{false};
    Clock::time_point acquired_at;
    bool acquired = false;
    std::thread next([&] {
      waiting = true;
      dlock::Lease lease = waiter.acquire("handoff", settings);
      acquired_at = Clock::now();
      acquired = static_cast<bool>(lease);
    });
    while (!waiting.load()) std::this_thread::yield();
    std::this_thread::sleep_for(settle);
    const auto released_at = Clock::now();
    held.release();
    next.join();
    if (!acquired) throw std::runtime_error("the waiter did not get the lock within its 5 s wait");
    samples.push_back(std::chrono::duration<double, std::micro>(acquired_at - released_at).count());
  }
  std::sort(samples.begin(), samples.end());
  const double ping = dlock::bench::ping_median_us(2000);
  const double median = dlock::bench::quantile(samples, 0.5);
  const double p99 = dlock::bench::quantile(samples, 0.99);
  fmt::print("handoff over {} rounds: median {:.0f} us, p99 {:.0f} us, max {:.0f} us; PING median {:.1f} us\n",
             rounds, median, p99, samples.back(), ping);
  fmt::print("RESULT handoff rounds={} median_us={:.1f} p99_us={:.1f} ping_us={:.1f} ratio={:.2f}\n", rounds,
             median, p99, ping, median / ping);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "dlock_bench_handoff: {}\n", e.what());
  return 1;
}
