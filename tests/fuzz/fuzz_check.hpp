// A failed expectation in a fuzz target: the message, then abort(), which libFuzzer reports
// as a crash and saves the input as an artifact.
//
//   DLOCK_FUZZ_CHECK(port >= 1 && port <= 65535, "port out of range: {}", port);
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#define DLOCK_FUZZ_CHECK(condition, ...)                                                 \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      ::fmt::print(stderr, "{}:{}: fuzz check failed: {}: {}\n", __FILE__, __LINE__,     \
                   #condition, ::fmt::format(__VA_ARGS__));                              \
      std::abort();                                                                      \
    }                                                                                    \
  } while (false)
