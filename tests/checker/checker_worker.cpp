// One worker of the checker: runs critical sections through the woven guard of section.cpp
// until told to stop, recording each in its history file.
//
//   dlock_checker_worker CONFIG RESOURCE_PORT KEY HISTORY STOP_FILE WORK_US KIND SEED
//                        [broken LEASE_MS]
//
// KIND picks the guard of each section (section.cpp): exclusive; shared (one section in four,
// drawn from SEED, an exclusive writer, the others shared readers); permits; fair; multi (two
// keys of KEY, KEY-b, KEY-c, drawn in a random order).
//
// History lines (timestamps in CLOCK_MONOTONIC nanoseconds):
//   B seq token t_begin kind keys tokens t_call t_answer valid_ms
//                                                the body started holding `token`, its client
//                                                counting it held for valid_ms more
//   V seq t valid_ms                             in the body: the client counted the lease
//                                                held for valid_ms more from t
//   E seq token t_read t_write_sent t_write_done accepted|rejected|none t_end valid|expired
//   X seq busy|unavailable|error t               the section did not run (reason)
// t_answer: when a fair section's first try was seen answered busy (the client's metric
// `contention` rose), else the grant. "broken": the section runs under a deliberately broken
// lock instead (section.hpp), and B and E lines end after t_begin and t_end.
#include <dlock/dlock.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "section.hpp"

namespace {

bool stop_requested(const std::string& stop_file) { return std::ifstream(stop_file).good(); }

constexpr const char* kFairGuard = "checker::fair_section";

long fair_contention() {
  for (const auto& lock : dlock::client().metrics().by_name) {
    if (lock.name == kFairGuard) return static_cast<long>(lock.contention);
  }
  return 0;
}

// Sees a fair section's first busy answer: the guard's `contention` rising after the call.
class AnswerWatch {
 public:
  explicit AnswerWatch(checker::Run& run) : run_(run), thread_([this] { loop(); }) {}
  ~AnswerWatch() {
    done_ = true;
    thread_.join();
  }
  AnswerWatch(const AnswerWatch&) = delete;
  AnswerWatch& operator=(const AnswerWatch&) = delete;

  // Before the guard is called.
  void arm() {
    run_.answer_ns = 0;
    before_ = fair_contention();
    armed_ = true;
  }
  void disarm() { armed_ = false; }

 private:
  void loop() {
    while (!done_) {
      if (armed_ && run_.answer_ns.load() == 0 && fair_contention() > before_.load()) {
        long long none = 0;
        run_.answer_ns.compare_exchange_strong(none, checker::monotonic_ns());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  checker::Run& run_;
  std::atomic<bool> done_{false}, armed_{false};
  std::atomic<long> before_{0};
  std::thread thread_;
};

// One section of `kind`, through its guard.
void run_section(const std::string& kind, const std::string& key, checker::Run& run, std::mt19937& rng,
                 AnswerWatch* watch) {
  run.call_ns = checker::monotonic_ns();
  if (kind == "shared") {
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
      checker::section(key, run);
    } else {
      checker::shared_section(key, run);
    }
  } else if (kind == "permits") {
    checker::permit_section(key, run);
  } else if (kind == "multi") {
    // Half the sections on keys of one hash tag: one cluster slot, taken in one request
    // (RUNTIME.md, "Lock kinds"); the others on keys each in a slot of its own, one by one.
    const std::string tag = "{" + key + "}:";
    std::vector<std::string> pool = std::uniform_int_distribution<int>(0, 1)(rng) == 0
                                        ? std::vector<std::string>{tag + "a", tag + "b", tag + "c"}
                                        : std::vector<std::string>{key, key + "-b", key + "-c"};
    std::shuffle(pool.begin(), pool.end(), rng);
    checker::multi_section(pool[0], pool[1], run);
  } else if (kind == "fair") {
    watch->arm();
    run.call_ns = checker::monotonic_ns();
    try {
      checker::fair_section(key, run);
    } catch (...) {
      watch->disarm();
      throw;
    }
    watch->disarm();
  } else {
    checker::section(key, run);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9 && argc != 11) {
    std::fputs("usage: dlock_checker_worker CONFIG RESOURCE_PORT KEY HISTORY STOP_FILE WORK_US KIND SEED "
               "[broken LEASE_MS]\n", stderr);
    return 64;
  }
  ::signal(SIGPIPE, SIG_DFL);
  const std::string config = argv[1], key = argv[3], history = argv[4], stop_file = argv[5], kind = argv[7];
  std::mt19937 rng(static_cast<unsigned>(std::stoul(argv[8])));
  const bool broken = argc == 11;
  try {
    dlock::init(config);
    dlock::test::RedisAdmin resource("127.0.0.1", std::stoi(argv[2]), std::chrono::seconds(5));
    checker::Run run;
    run.resource = &resource;
    run.work_us = std::stoi(argv[6]);
    run.history_fd = ::open(history.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (run.history_fd < 0) {
      std::fprintf(stderr, "dlock_checker_worker: cannot open %s\n", history.c_str());
      return 1;
    }
    const int broken_lease_ms = broken ? std::stoi(argv[10]) : 0;
    std::unique_ptr<AnswerWatch> watch;
    if (kind == "fair") watch = std::make_unique<AnswerWatch>(run);
    while (!stop_requested(stop_file)) {
      ++run.sequence;
      try {
        if (broken) {
          checker::broken_section(run, broken_lease_ms);
        } else {
          run_section(kind, key, run, rng, watch.get());
        }
      } catch (const dlock::ConfigError& e) {
        std::fprintf(stderr, "dlock_checker_worker: %s\n", e.what());
        return 2;
      } catch (const dlock::LockNotAcquired&) {
        checker::record(run, fmt::format("X {} busy {}", run.sequence, checker::monotonic_ns()));
      } catch (const dlock::BackendUnavailable&) {
        checker::record(run, fmt::format("X {} unavailable {}", run.sequence, checker::monotonic_ns()));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } catch (const std::exception& e) {
        // The resource is fault-free; anything else is reported and the worker goes on.
        checker::record(run, fmt::format("X {} error {}", run.sequence, checker::monotonic_ns()));
        std::fprintf(stderr, "dlock_checker_worker %d: %s\n", static_cast<int>(::getpid()), e.what());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    watch.reset();
    ::close(run.history_fd);
    dlock::shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_checker_worker: %s\n", e.what());
    return 1;
  }
  return 0;
}
