// A separate process for the integration tests: a second lock client that can be killed,
// stopped and resumed. Talks to the test over stdout, one line per event.
//
//   lock_worker CONFIG counter KEY FILE ITERATIONS SLEEP_US
//   lock_worker CONFIG hold KEY LEASE_MS HOLD_MS     (HOLD_MS 0: until killed)
//   lock_worker CONFIG churn KEY_BYTES SECONDS        (lock+release a large key in a loop)
//   lock_worker CONFIG let-go KEY GO_FILE
//       (acquires KEY, prints "acquired", and once GO_FILE exists lets the lease go out of
//        scope and returns from main at once: the release is answered during exit)
//   lock_worker CONFIG ha-counter KEY FILE STOP_FILE SLEEP_US
//       (counter until STOP_FILE exists, retrying through failovers; prints
//        "done count=C unavailable=U lost=L overlaps=O": C increments made while holding
//        the lock, O times another process was found inside the critical section)
#include <dlock/dlock.hpp>
#include <fcntl.h>
#include <unistd.h>
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

int counter(const std::string& key, const std::string& path, int iterations, int sleep_us) {
  dlock::LockSettings settings;
  settings.lease = 5s;
  settings.wait = 60s;
  for (int i = 0; i < iterations; ++i) {
    dlock::Lease lease = dlock::client().acquire(key, settings, "counter");
    if (!lease) {
      say(fmt::format("error acquire {}: {}", dlock::to_string(lease.status()), lease.error()));
      return 2;
    }
    long value = 0;
    {
      std::ifstream in(path);
      in >> value;
    }
    // Widen the window in which an unprotected read-modify-write would lose updates.
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    {
      std::ofstream out(path, std::ios::trunc);
      out << value + 1 << '\n';
    }
    const auto released = lease.release();
    if (released != dlock::ReleaseStatus::kReleased) {
      say(fmt::format("error release {}", dlock::to_string(released)));
      return 3;
    }
  }
  say("done");
  return 0;
}

int hold(const std::string& key, int lease_ms, int hold_ms) {
  dlock::LockSettings settings;
  settings.lease = std::chrono::milliseconds(lease_ms);
  settings.wait = 30s;
  dlock::Lease lease = dlock::client().acquire(key, settings, "holder");
  if (!lease) {
    say(fmt::format("error acquire {}: {}", dlock::to_string(lease.status()), lease.error()));
    return 2;
  }
  lease.view().on_lost([](const dlock::LeaseView& view) {
    say(fmt::format("lost {}", dlock::to_string(view.loss_reason())));
  });
  say(fmt::format("acquired {}", lease.token()));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(hold_ms);
  while (hold_ms == 0 || std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(10ms);
  }
  say(fmt::format("released {}", dlock::to_string(lease.release())));
  return 0;
}

// Keeps locking a large key while the test kills and restarts the server under it: writes
// to dead sockets must not kill the process with SIGPIPE.
int churn(std::size_t key_bytes, int seconds) {
  dlock::LockSettings settings;
  settings.lease = 5s;
  settings.wait = 0s;
  const std::string key(key_bytes, 'k');
  int acquired = 0, unavailable = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  say("started");
  while (std::chrono::steady_clock::now() < until) {
    dlock::Lease lease = dlock::client().try_acquire(key, settings);
    if (lease) {
      ++acquired;
    } else if (lease.status() == dlock::AcquireStatus::kUnavailable) {
      ++unavailable;
    }
  }
  say(fmt::format("done acquired={} unavailable={}", acquired, unavailable));
  return 0;
}

// The counter of `counter`, for tests that fail servers over underneath it: an unavailable
// backend is waited out rather than fatal, and the worker runs until told to stop.
int ha_counter(const std::string& key, const std::string& path, const std::string& stop_file,
               int sleep_us) {
  dlock::LockSettings settings;
  settings.lease = 5s;
  settings.wait = 10s;
  long count = 0, unavailable = 0, lost = 0, overlaps = 0;
  // Present while some process is inside the critical section: finding it there means two
  // processes hold the lock at once.
  const std::string inside = path + ".inside";
  say("started");
  while (!std::ifstream(stop_file).good()) {
    dlock::Lease lease = dlock::client().acquire(key, settings, "ha-counter");
    if (!lease) {
      if (lease.status() == dlock::AcquireStatus::kUnavailable) {
        ++unavailable;
        std::this_thread::sleep_for(5ms);
      }
      continue;
    }
    const int marker = ::open(inside.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (marker < 0) ++overlaps;
    long value = 0;
    {
      std::ifstream in(path);
      in >> value;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    {
      std::ofstream out(path, std::ios::trunc);
      out << value + 1 << '\n';
    }
    ++count;
    if (marker >= 0) {
      ::close(marker);
      ::unlink(inside.c_str());
    }
    if (lease.release() == dlock::ReleaseStatus::kLost) ++lost;
  }
  say(fmt::format("done count={} unavailable={} lost={} overlaps={}", count, unavailable, lost, overlaps));
  return 0;
}

int let_go(const std::string& key, const std::string& go_file) {
  dlock::LockSettings settings;
  settings.lease = 30s;
  {
    dlock::Lease lease = dlock::client().acquire(key, settings, "let-go");
    if (!lease) {
      say(fmt::format("error acquire {}", lease.error()));
      return 2;
    }
    say("acquired");
    for (int i = 0; i < 2000 && !std::ifstream(go_file); ++i) std::this_thread::sleep_for(5ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fputs("usage: lock_worker CONFIG counter|hold ...\n", stderr);
    return 64;
  }
  // The default disposition, as in a user's program: a stray SIGPIPE would end the process.
  ::signal(SIGPIPE, SIG_DFL);
  try {
    dlock::init(std::string(argv[1]));
    const std::string mode = argv[2];
    if (mode == "counter" && argc == 7) {
      return counter(argv[3], argv[4], std::stoi(argv[5]), std::stoi(argv[6]));
    }
    if (mode == "churn" && argc == 5) {
      return churn(std::stoul(argv[3]), std::stoi(argv[4]));
    }
    if (mode == "hold" && argc == 6) {
      return hold(argv[3], std::stoi(argv[4]), std::stoi(argv[5]));
    }
    if (mode == "let-go" && argc == 5) return let_go(argv[3], argv[4]);
    if (mode == "ha-counter" && argc == 7) {
      return ha_counter(argv[3], argv[4], argv[5], std::stoi(argv[6]));
    }
  } catch (const std::exception& e) {
    say(fmt::format("error {}", e.what()));
    return 1;
  }
  std::fputs("lock_worker: bad arguments\n", stderr);
  return 64;
}
