// The checker's critical section, run by each worker process: a read-modify-write of the
// fenced counter on the resource server, recorded in the worker's history file.
#pragma once

#include <time.h>

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
};

/// Appends one line to the history (a single write(2) of a short line on an O_APPEND file:
/// lines are never torn by a kill between two calls).
void record(const Run& run, const std::string& line);

/// The read-modify-write under `token`, with history lines "B seq token t" before and
/// "E seq token t_read t_write_sent t_write_done accepted|rejected t_end" after. The hold
/// begins at `begin_ns` when given (a time before the token was issued), else now.
void fenced_increment(Run& run, std::uint64_t token, long long begin_ns = 0);

/// The woven guard: lock "<key>", then fenced_increment with the lease's token.
void section(const std::string& key, Run& run);

/// A deliberately broken lock for the checker's own test: SET without NX and DEL without an
/// owner check on the resource server, tokens from INCR. Nothing excludes anybody.
void broken_section(Run& run, int lease_ms);

}  // namespace checker
