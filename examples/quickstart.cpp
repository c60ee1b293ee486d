// The runtime API in one page: configure, acquire, use the fencing token, release.
//
//   DLOCK_CONFIG=config/samples/single.yaml ./quickstart
#include <dlock/dlock.hpp>
#include <fmt/format.h>

#include <chrono>
#include <thread>

using namespace std::chrono_literals;

int main() {
  try {
    dlock::init();  // $DLOCK_CONFIG, else one Redis node at 127.0.0.1:6379
  } catch (const dlock::ConfigError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  dlock::Client locks = dlock::client();

  // Settings come from the YAML file (defaults, policies, per-lock overrides) ...
  dlock::LockSettings settings = locks.config().resolve("quickstart", "", {});
  // ... and can be adjusted in code.
  settings.lease = 2s;
  settings.wait = 1s;

  dlock::Lease lease = locks.acquire("invoice:42", settings, "quickstart");
  if (!lease) {
    fmt::print("not acquired ({}): {}\n", dlock::to_string(lease.status()), lease.error());
    return lease.status() == dlock::AcquireStatus::kUnavailable ? 1 : 0;
  }
  fmt::print("holding '{}' with fencing token {}\n", lease.key().str(), lease.token());

  // Another owner is refused while we hold it; this thread may re-enter.
  {
    dlock::Client other(locks.config());
    fmt::print("a second client gets: {}\n", dlock::to_string(other.try_acquire("invoice:42", settings).status()));
    dlock::Lease again = locks.acquire("invoice:42", settings, "quickstart");
    fmt::print("re-entering on this thread: hold count {}\n", again.hold_count());
  }

  // Work longer than the lease: the watchdog renews it every lease/3.
  std::this_thread::sleep_for(3s);
  fmt::print("after 3s: lost={} remaining={}ms\n", lease.lost(), lease.remaining().count());

  const dlock::ReleaseStatus released = lease.release();
  fmt::print("release: {}\n", dlock::to_string(released));
  const dlock::MetricsSnapshot m = locks.metrics();
  fmt::print("acquisitions={} renewals={} releases={}\n", m.acquisitions, m.renewals, m.releases);
  return released == dlock::ReleaseStatus::kReleased ? 0 : 1;
}
