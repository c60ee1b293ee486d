// Another process's view of a lock: prints "held" when KEY is held by someone, else "free".
//
//   woven_probe CONFIG KEY
#include <dlock/dlock.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) return 64;
  try {
    dlock::Client client(dlock::load_config(argv[1]));
    dlock::LockSettings settings;
    settings.wait = std::chrono::milliseconds(0);
    dlock::Lease lease = client.try_acquire(argv[2], settings);
    switch (lease.status()) {
      case dlock::AcquireStatus::kAcquired: std::puts("free"); break;
      case dlock::AcquireStatus::kBusy: std::puts("held"); break;
      case dlock::AcquireStatus::kUnavailable: std::puts("unavailable"); return 1;
      case dlock::AcquireStatus::kRefused: std::puts("refused"); return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "woven_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
