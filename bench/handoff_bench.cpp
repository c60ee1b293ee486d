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
// A third reference takes the client library out of dlock's own handoff: raw hiredis sends
// dlock's acquire.lua and release.lua, so the release grants the queued waiter, and the clock
// stops when the grant's message has been read (RawScriptsFloor).
//
// The three alternate in blocks of --block rounds, so that all see the same moments of a
// shared machine; the ratios are of the medians over all rounds.
//
//   dlock_bench_handoff [--rounds N] [--block B] [--settle-ms S]
//
// --settle-ms: how long the holder keeps the key after the waiter has started waiting, so
// the waiter is certainly parked on its release notification when the release comes.
// Last line, for scripts/bench:
//   RESULT handoff rounds=N median_us=X p99_us=Y ping_us=Z ratio=X/Z floor_median_us=F
//          floor_ratio=X/F scripts_median_us=S handoffs=H

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <string_view>
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

// A handoff with dlock's own scripts and no client library: the holder's release.lua grants
// the lock to a waiter that acquire.lua queued, and the clock stops when a thread blocked on
// the channel has read the grant (no second thread, no lease built). What the server and the
// network ask of this way of handing off, against which dlock's own work is measured.
class RawScriptsFloor {
 public:
  RawScriptsFloor()
      : acquire_(holder_.load_script(dlock::bench::lua_source("acquire.lua").c_str())),
        release_(holder_.load_script(dlock::bench::lua_source("release.lua").c_str())) {
    subscriber_.run("SUBSCRIBE %s", kChannel);
  }

  double round(std::chrono::milliseconds settle) {
    const std::string holder = fmt::format("raw-holder-{}", rounds_), waiter =
        fmt::format("raw-waiter-{}", rounds_);
    ++rounds_;
    expect(take(holder_, holder, 0) == 1, "the holder's acquire");
    expect(take(waiter_, waiter, 5000) == 0, "the waiter's queued try");
    std::this_thread::sleep_for(settle);
    const auto released_at = Clock::now();
    freeReplyObject(holder_.command("EVALSHA %s 5 %s %s %s %s %s %s 0 %s 0 604800000",
                                    release_.c_str(), kLock, kFence, kHolders, kQueue, kPlaces,
                                    holder.c_str(), kChannel));
    redisReply* message = subscriber_.next_reply();
    const auto granted_at = Clock::now();
    const bool ours = message->type == REDIS_REPLY_ARRAY && message->elements == 3 &&
                      std::string_view(message->element[2]->str, message->element[2]->len)
                              .find(waiter) != std::string_view::npos;
    freeReplyObject(message);
    expect(ours, "the grant's message");
    freeReplyObject(waiter_.command("EVALSHA %s 5 %s %s %s %s %s %s 0 %s 0 604800000",
                                    release_.c_str(), kLock, kFence, kHolders, kQueue, kPlaces,
                                    waiter.c_str(), kChannel));
    freeReplyObject(subscriber_.next_reply());  // that release's own message
    return micros(granted_at - released_at);
  }

 private:
  static constexpr const char* kLock = "dlock:{bench:raw-handoff}:lock";
  static constexpr const char* kFence = "dlock:{bench:raw-handoff}:fence";
  static constexpr const char* kChannel = "dlock:{bench:raw-handoff}:released";
  static constexpr const char* kHolders = "dlock:{bench:raw-handoff}:holders";
  static constexpr const char* kQueue = "dlock:{bench:raw-handoff}:queue";
  static constexpr const char* kPlaces = "dlock:{bench:raw-handoff}:places";

  // acquire.lua with the arguments dlock sends; the reply's first element (1 granted, 0 busy).
  long long take(dlock::bench::RawConnection& conn, const std::string& owner, int place_ms) {
    redisReply* reply = conn.command(
        "EVALSHA %s 5 %s %s %s %s %s %s 30000 0 bench-host 12345 12345 raw-handoff 604800000 %d "
        "0 0",
        acquire_.c_str(), kLock, kFence, kHolders, kQueue, kPlaces, owner.c_str(), place_ms);
    const long long code = reply->type == REDIS_REPLY_ARRAY && reply->elements > 0
                               ? reply->element[0]->integer
                               : -9;
    freeReplyObject(reply);
    return code;
  }
  static void expect(bool ok, const char* what) {
    if (!ok) throw std::runtime_error(fmt::format("raw handoff with dlock's scripts: {} failed", what));
  }

  dlock::bench::RawConnection holder_, waiter_, subscriber_;
  const std::string acquire_, release_;
  long rounds_ = 0;
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
  RawScriptsFloor raw_scripts;

  std::vector<double> samples, floor, scripts;
  samples.reserve(static_cast<std::size_t>(rounds));
  floor.reserve(static_cast<std::size_t>(rounds));
  scripts.reserve(static_cast<std::size_t>(rounds));
  while (static_cast<long>(samples.size()) < rounds) {
    const long n = std::min(block, rounds - static_cast<long>(samples.size()));
    for (long i = 0; i < n; ++i) samples.push_back(dlock_round(holder, waiter, settings, settle));
    for (long i = 0; i < n; ++i) floor.push_back(raw.round(settle));
    for (long i = 0; i < n; ++i) scripts.push_back(raw_scripts.round(settle));
  }
  std::sort(samples.begin(), samples.end());
  std::sort(floor.begin(), floor.end());
  std::sort(scripts.begin(), scripts.end());
  const double floor_median = dlock::bench::quantile(floor, 0.5);
  const double scripts_median = dlock::bench::quantile(scripts, 0.5);
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
  fmt::print("raw, dlock's scripts (the release grants, a thread reads the grant): median {:.0f} us\n",
             scripts_median);
  fmt::print("dlock / raw floor: {:.2f}; dlock / raw with dlock's scripts: {:.2f} "
             "(blocks of {} rounds in turn)\n",
             median / floor_median, median / scripts_median, block);
  fmt::print("RESULT handoff rounds={} median_us={:.1f} p99_us={:.1f} ping_us={:.1f} ratio={:.2f} "
             "floor_median_us={:.1f} floor_ratio={:.2f} scripts_median_us={:.1f} handoffs={}\n",
             rounds, median, p99, ping, median / ping, floor_median, median / floor_median,
             scripts_median, handoffs);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "dlock_bench_handoff: {}\n", e.what());
  return 1;
}
