// The client's clock. Every deadline in dlock is a steady_clock time point; configured
// durations can be as long as ~292 years, so additions saturate instead of overflowing.
#pragma once

#include <chrono>

namespace dlock::internal {

using Clock = std::chrono::steady_clock;

/// `from + d`, or the end of time if that does not fit.
template <typename Rep, typename Period>
[[nodiscard]] constexpr Clock::time_point later(Clock::time_point from,
                                                std::chrono::duration<Rep, Period> d) noexcept {
  using std::chrono::duration_cast;
  constexpr auto kMax = Clock::duration::max();
  if (d <= std::chrono::duration<Rep, Period>::zero())
    return from + duration_cast<Clock::duration>(d);
  if (d >= duration_cast<std::chrono::duration<Rep, Period>>(kMax)) return Clock::time_point::max();
  const auto step = duration_cast<Clock::duration>(d);
  return from.time_since_epoch() > kMax - step ? Clock::time_point::max() : from + step;
}

}  // namespace dlock::internal
