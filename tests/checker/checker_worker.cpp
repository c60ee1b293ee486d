// One worker of the checker: runs critical sections through the woven guard of section.cpp
// until told to stop, recording each in its history file.
//
//   dlock_checker_worker CONFIG RESOURCE_PORT KEY HISTORY STOP_FILE WORK_US [broken LEASE_MS]
//
// History lines (timestamps in CLOCK_MONOTONIC nanoseconds):
//   B seq token t_begin                         the body started holding `token`
//   E seq token t_read t_write_sent t_write_done accepted|rejected t_end
//   X seq busy|unavailable|error t               the section did not run (reason)
// "broken": the section runs under a deliberately broken lock instead (section.hpp).
#include <dlock/dlock.hpp>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "section.hpp"

namespace {

bool stop_requested(const std::string& stop_file) { return std::ifstream(stop_file).good(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 9) {
    std::fputs("usage: dlock_checker_worker CONFIG RESOURCE_PORT KEY HISTORY STOP_FILE WORK_US "
               "[broken LEASE_MS]\n", stderr);
    return 64;
  }
  ::signal(SIGPIPE, SIG_DFL);
  const std::string config = argv[1], key = argv[3], history = argv[4], stop_file = argv[5];
  const bool broken = argc == 9;
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
    const int broken_lease_ms = broken ? std::stoi(argv[8]) : 0;
    while (!stop_requested(stop_file)) {
      ++run.sequence;
      try {
        if (broken) {
          checker::broken_section(run, broken_lease_ms);
        } else {
          checker::section(key, run);
        }
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
    ::close(run.history_fd);
    dlock::shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_checker_worker: %s\n", e.what());
    return 1;
  }
  return 0;
}
