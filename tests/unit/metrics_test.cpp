#include <gtest/gtest.h>

#include "metrics.hpp"

namespace dlock::internal {
namespace {

using namespace std::chrono_literals;

TEST(LatencyRecorder, SummarisesCountSumMaxAndPercentiles) {
  LatencyRecorder r;
  for (int i = 0; i < 99; ++i) r.record(100us);
  r.record(50ms);
  const LatencySummary s = r.summary();
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.max_us, 50000u);
  EXPECT_EQ(s.sum_us, 99u * 100 + 50000);
  EXPECT_EQ(s.percentile_us(0.5), 128u);   // 100us falls in [64, 128)
  EXPECT_EQ(s.percentile_us(1.0), 50000u);  // capped at the max seen
}

TEST(LatencyRecorder, EmptyAndNegativeSamplesAreSafe) {
  LatencyRecorder r;
  EXPECT_EQ(r.summary().percentile_us(0.99), 0u);
  r.record(-5ms);
  EXPECT_EQ(r.summary().count, 1u);
  EXPECT_EQ(r.summary().max_us, 0u);
}

}  // namespace
}  // namespace dlock::internal

#include "steady.hpp"

namespace dlock::internal {
namespace {

TEST(Later, AddsOrdinaryDurations) {
  const auto t = Clock::now();
  EXPECT_EQ(later(t, std::chrono::milliseconds(5)), t + std::chrono::milliseconds(5));
  EXPECT_EQ(later(t, std::chrono::milliseconds(0)), t);
}

TEST(Later, SaturatesInsteadOfOverflowing) {
  const auto t = Clock::now();
  // The longest duration the configuration accepts: ~292 years.
  EXPECT_EQ(later(t, std::chrono::milliseconds(9223372036854)), Clock::time_point::max());
  EXPECT_EQ(later(t, std::chrono::hours::max()), Clock::time_point::max());
  EXPECT_EQ(later(Clock::time_point::max(), std::chrono::nanoseconds(1)), Clock::time_point::max());
}

}  // namespace
}  // namespace dlock::internal
