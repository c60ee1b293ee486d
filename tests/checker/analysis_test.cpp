// The checker's verdict over hand-written histories: what counts as an overlap, when fencing
// caught it, and which findings are violations.
#include "analysis.hpp"

#include <gtest/gtest.h>

namespace checker {
namespace {

// Holds on a time line in milliseconds, written as history lines in nanoseconds.
std::string begin(long seq, const char* token, long long ms) {
  return "B " + std::to_string(seq) + " " + token + " " + std::to_string(ms * 1'000'000) + "\n";
}
std::string end(long seq, const char* token, const char* result, long long ms) {
  const std::string t = std::to_string(ms * 1'000'000);
  return "E " + std::to_string(seq) + " " + token + " " + t + " " + t + " " + t + " " + result + " " + t + "\n";
}

Verdict run(const std::vector<WorkerHistory>& workers, const std::vector<std::string>& log, long counter) {
  long accepted = 0, rejected = 0, stale_reads = 0;
  for (const auto& op : parse_store_log(log)) {
    if (op.op == 'W') (op.outcome == "accepted" ? accepted : rejected)++;
    if (op.op == 'R' && op.outcome == "stale") ++stale_reads;
  }
  return analyse(workers, parse_store_log(log), {}, counter, counter, accepted, rejected, stale_reads, 1'000'000'000);
}

TEST(CheckerAnalysis, DisjointHoldsWithRisingTokensAreClean) {
  const auto a = parse_history(1, begin(1, "10", 0) + end(1, "10", "accepted", 5), 0, 100);
  const auto b = parse_history(2, begin(1, "11", 6) + end(1, "11", "accepted", 9), 0, 100);
  const Verdict v = run({a, b}, {"R 10 ok 0", "W 10 accepted 1", "R 11 ok 1", "W 11 accepted 2"}, 2);
  EXPECT_EQ(v.sections, 2);
  EXPECT_EQ(v.overlaps, 0);
  EXPECT_TRUE(v.counter_exact);
  EXPECT_TRUE(v.violations.empty()) << v.violations.front();
}

TEST(CheckerAnalysis, AnOverlapWhoseStaleWriteWasRejectedIsCaught) {
  // Worker 1 stalls past its lease; worker 2 gets token 11 meanwhile.
  const auto a = parse_history(1, begin(1, "10", 0) + end(1, "10", "rejected", 50), 0, 100);
  const auto b = parse_history(2, begin(1, "11", 20) + end(1, "11", "accepted", 25), 0, 100);
  const Verdict v = run({a, b}, {"R 10 ok 0", "R 11 ok 0", "W 11 accepted 1", "W 10 rejected 1"}, 1);
  EXPECT_EQ(v.overlaps, 1);
  EXPECT_EQ(v.stale_holds, 1);
  EXPECT_EQ(v.overlaps_caught, 1);
  EXPECT_EQ(v.overlaps_uncaught, 0);
  EXPECT_TRUE(v.violations.empty());
}

TEST(CheckerAnalysis, AStaleWriteAcceptedAfterTheNewerReadIsAViolation) {
  // Fencing off: both writes accepted, one update lost.
  const auto a = parse_history(1, begin(1, "10", 0) + end(1, "10", "accepted", 50), 0, 100);
  const auto b = parse_history(2, begin(1, "11", 20) + end(1, "11", "accepted", 25), 0, 100);
  const Verdict v = run({a, b}, {"R 10 ok 0", "R 11 ok 0", "W 11 accepted 1", "W 10 accepted 1"}, 1);
  EXPECT_EQ(v.overlaps_uncaught, 1);
  EXPECT_EQ(v.stale_writes_accepted, 1);
  EXPECT_FALSE(v.counter_exact);
  EXPECT_EQ(v.violations.size(), 3u);
}

TEST(CheckerAnalysis, AStaleWriteThatLandedBeforeTheNewerReadIsHarmless) {
  const auto a = parse_history(1, begin(1, "10", 0) + end(1, "10", "accepted", 30), 0, 100);
  const auto b = parse_history(2, begin(1, "11", 20) + end(1, "11", "accepted", 40), 0, 100);
  const Verdict v = run({a, b}, {"R 10 ok 0", "W 10 accepted 1", "R 11 ok 1", "W 11 accepted 2"}, 2);
  EXPECT_EQ(v.overlaps, 1);
  EXPECT_EQ(v.overlaps_serialized, 1);
  EXPECT_TRUE(v.violations.empty());
}

TEST(CheckerAnalysis, ALaterHoldWithALowerTokenIsARegression) {
  const auto a = parse_history(1, begin(1, "20", 0) + end(1, "20", "accepted", 5), 0, 100);
  const auto b = parse_history(2, begin(1, "15", 6) + end(1, "15", "rejected", 9), 0, 100);
  const Verdict v = run({a, b}, {"R 20 ok 0", "W 20 accepted 1", "R 15 stale 1", "W 15 rejected 1"}, 1);
  EXPECT_EQ(v.token_regressions, 1);
  EXPECT_EQ(v.violations.size(), 1u);
}

TEST(CheckerAnalysis, AHoldOfAKilledWorkerEndsAtTheKill) {
  const auto a = parse_history(1, begin(1, "10", 0) + "E 1 10 12", 30'000'000, 100'000'000);
  ASSERT_EQ(a.holds.size(), 1u);
  EXPECT_TRUE(a.holds[0].killed);
  EXPECT_EQ(a.holds[0].end, 30'000'000);
  const auto b = parse_history(2, begin(1, "11", 20) + end(1, "11", "accepted", 25), 0, 100'000'000);
  // The killed holder's write never reached the store: the overlap is caught.
  const Verdict v = run({a, b}, {"R 10 ok 0", "R 11 ok 0", "W 11 accepted 1"}, 1);
  EXPECT_EQ(v.cut_by_kill, 1);
  EXPECT_EQ(v.overlaps_caught, 1);
  EXPECT_TRUE(v.violations.empty());
}

TEST(CheckerAnalysis, AMalformedStoreEntryIsRefused) {
  EXPECT_THROW(parse_store_log({"W 10"}), std::runtime_error);
}

}  // namespace
}  // namespace checker
