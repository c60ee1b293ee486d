// Handoff latency: one client holds a key while a second one waits for it in acquire(); the
// time from the holder's release() call to the waiter's acquire() returning with the lease.
// Holder and waiter are separate clients (own connections, own release subscriber), as two
// processes would be. Reference: the median PING round trip on the same server, same run.
//
// Also measured, to show what any lock woken by a notification must spend: the raw floor of
// a handoff through hiredis. The holder's release script deletes the key and publishes on a
// channel; a thread blocked reading that channel takes the key with SET NX PX on its own
// connection. Same clocks: from the release call to the waiter's successful SET.
//
// The two alternate in blocks of --block rounds, so that both see the same moments of a
// shared machine; the ratio is of the two medians over all rounds.
//
//   dlock_bench_handoff [--rounds N] [--block B] [--settle-ms S]
//
// --settle-ms: how long the holder keeps the key after the waiter has started waiting, so
// the waiter is certainly parked on its release notification when the release comes.
// Last line, for scripts/bench:
//   RESULT handoff rounds=N median_us=X p99_us=Y ping_us=Z ratio=X/Z floor_median_us=F
//          floor_ratio=X/F handoffs=H

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

namespace {

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

constexpr const char* kReleaseAndPublish =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) "
    "redis.call('PUBLISH', ARGV[2], 'released') return 1 end return 0";

// The raw handoff floor (see above), one round at a time.
class RawFloor {
 public:
  RawFloor() : release_(holder_.load_script(kReleaseAndPublish)) {
    subscriber_.run("SUBSCRIBE floor-handoff");
    next_ = std::thread([this] { take_after_each_release(); });
  }
  ~RawFloor() {
    stopping_ = true;
    next_.join();  // bounded: the subscriber's reads time out after 2 s
  }

  // One handoff, in microseconds.
  double round(std::chrono::milliseconds settle) {
    const long before = rounds_done_.load();
    holder_.run("SET floor-key holder NX PX 30000");
    std::this_thread::sleep_for(settle);
    const auto released_at = Clock::now();
    holder_.run("EVALSHA %s 1 floor-key holder floor-handoff", release_.c_str());
    const auto give_up = Clock::now() + 5s;
    while (rounds_done_.load() == before && !failed_ && Clock::now() < give_up) {
      std::this_thread::yield();
    }
    if (rounds_done_.load() == before) throw std::runtime_error("the raw handoff floor failed");
    return micros(taken_at_ - released_at);
  }

 private:
  void take_after_each_release() {
    try {
      while (!stopping_) {
        redisReply* message = nullptr;
        try {
          message = subscriber_.next_reply();  // the 'released' message (2 s timeout)
        } catch (const std::exception&) {
          if (stopping_) return;
          throw;
        }
        freeReplyObject(message);
        redisReply* set = waiter_.command("SET floor-key waiter NX PX 30000");
        const bool ok = set->type == REDIS_REPLY_STATUS;
        freeReplyObject(set);
        taken_at_ = Clock::now();
        if (!ok) throw std::runtime_error("SET NX after the release found the key taken");
        waiter_.run("DEL floor-key");
        ++rounds_done_;
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "raw handoff: {}\n", e.what());
      failed_ = true;
    }
  }

  dlock::bench::RawConnection holder_, waiter_, subscriber_;
  const std::string release_;
  std::atomic<long> rounds_done_{0};
  std::atomic<bool> failed_{false}, stopping_{false};
  Clock::time_point taken_at_;
  std::thread next_;
};

// One dlock handoff, in microseconds.
double dlock_round(dlock::Client& holder, dlock::Client& waiter,
                   const dlock::LockSettings& settings, std::chrono::milliseconds settle) {
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
  return micros(acquired_at - released_at);
}

}  // namespace

int main(int argc, char** argv) try {
  dlock::bench::check_options(argc, argv, {"--rounds", "--block", "--settle-ms"});
  const long rounds = dlock::bench::option(argc, argv, "--rounds", 300);
  const long block = std::max(1L, dlock::bench::option(argc, argv, "--block", 50));
  const auto settle = std::chrono::milliseconds(dlock::bench::option(argc, argv, "--settle-ms", 3));

  dlock::Client holder(dlock::bench::single_node_config("bench-handoff"));
  dlock::Client waiter(dlock::bench::single_node_config("bench-handoff"));
  dlock::LockSettings settings;
  settings.lease = 30s;
  settings.wait = 5s;
  // Warm both clients: connections and the waiter's subscription.
  holder.acquire("handoff-warm", settings).release();
  waiter.acquire("handoff-warm", settings).release();
  RawFloor raw;

  std::vector<double> samples, floor;
  samples.reserve(static_cast<std::size_t>(rounds));
  floor.reserve(static_cast<std::size_t>(rounds));
  while (static_cast<long>(samples.size()) < rounds) {
    const long n = std::min(block, rounds - static_cast<long>(samples.size()));
    for (long i = 0; i < n; ++i) samples.push_back(dlock_round(holder, waiter, settings, settle));
    for (long i = 0; i < n; ++i) floor.push_back(raw.round(settle));
  }
  std::sort(samples.begin(), samples.end());
  std::sort(floor.begin(), floor.end());
  const double floor_median = dlock::bench::quantile(floor, 0.5);
  const double ping = dlock::bench::ping_median_us(2000);
  const double median = dlock::bench::quantile(samples, 0.5);
  const double p99 = dlock::bench::quantile(samples, 0.99);
  const auto handoffs = waiter.metrics().handoffs;
  fmt::print("handoff over {} rounds: median {:.0f} us, p99 {:.0f} us, max {:.0f} us; PING median {:.1f} us\n",
             rounds, median, p99, samples.back(), ping);
  fmt::print("granted by the holder's release (no request of the waiter's own): {} of {} rounds\n",
             handoffs, rounds);
  fmt::print("raw floor (release script with PUBLISH, subscriber thread, SET NX PX): median {:.0f} us, p99 {:.0f} us\n",
             floor_median, dlock::bench::quantile(floor, 0.99));
  fmt::print("dlock / raw floor, blocks of {} rounds alternating: {:.2f}\n", block,
             median / floor_median);
  fmt::print("RESULT handoff rounds={} median_us={:.1f} p99_us={:.1f} ping_us={:.1f} ratio={:.2f} "
             "floor_median_us={:.1f} floor_ratio={:.2f} handoffs={}\n",
             rounds, median, p99, ping, median / ping, floor_median, median / floor_median, handoffs);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "dlock_bench_handoff: {}\n", e.what());
  return 1;
}
