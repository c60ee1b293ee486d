// The checker's critical section, run by each worker process: a read-modify-write of the
// fenced counter on the resource server, recorded in the worker's history file.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "redis_process.hpp"

namespace checker {

/// Nanoseconds of CLOCK_MONOTONIC: one clock for every process on a Linux machine, so the
/// holds of different workers can be compared.
inline long long monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1'000'000'000LL + now.tv_nsec;
}

/// What one worker needs inside its critical section.
struct Run {
  dlock::test::RedisAdmin* resource = nullptr;
  int history_fd = -1;  ///< O_APPEND file: one line per event
  long sequence = 0;    ///< number of the current section
  int work_us = 0;      ///< time spent between the read and the write
  /// When the guard of the current section was called (no request sent before), and when
  /// its first try was seen answered busy (0: not seen; the grant then answered it).
  std::atomic<long long> call_ns{0}, answer_ns{0};
};

/// Appends one line to the history (a single write(2) of a short line on an O_APPEND file:
/// lines are never torn by a kill between two calls).
void record(const Run& run, const std::string& line);

/// The read-modify-write under `token`, with history lines "B seq token t GRANT" before and
/// "E seq token t_read t_write_sent t_write_done accepted|rejected t_end VALIDITY" after. The
/// hold begins at `begin_ns` when given (a time before the token was issued), else now.
/// Inside a guard, GRANT is "kind keys tokens t_call t_answer" (keys and tokens comma-separated,
/// in the lease's order) and VALIDITY "valid" or "expired" (the lease's remaining time at the
/// end); outside one (the broken lock) both are left out.
void fenced_increment(Run& run, std::uint64_t token, long long begin_ns = 0);

/// A section that holds the lock without writing: "B ..." and "E seq token t t t none t_end
/// VALIDITY" around `work_us`.
void observe(Run& run);

/// The woven guards, one per lock kind (dlock_checker --kind). The exclusive and fair
/// sections write to the fenced store; the others only record their holds.
void section(const std::string& key, Run& run);
void shared_section(const std::string& key, Run& run);
void permit_section(const std::string& key, Run& run);
void fair_section(const std::string& key, Run& run);
void multi_section(const std::string& first, const std::string& second, Run& run);

/// A deliberately broken lock for the checker's own test: SET without NX and DEL without an
/// owner check on the resource server, tokens from INCR. Nothing excludes anybody.
void broken_section(Run& run, int lease_ms);

}  // namespace checker
