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

// A hold of a lock kind: "B seq token t kind keys tokens t_call t_answer" and its end.
std::string kind_hold(long seq, const char* kind, const char* keys, long long from_ms, long long to_ms,
                      const char* validity = "valid", long long call_ms = 0, long long answer_ms = 0,
                      const char* result = "none") {
  const auto ns = [](long long ms) { return std::to_string(ms * 1'000'000); };
  const std::string t = ns(to_ms);
  return "B " + std::to_string(seq) + " 7 " + ns(from_ms) + " " + kind + " " + keys + " 7 " +
         ns(call_ms > 0 ? call_ms : from_ms) + " " + ns(answer_ms > 0 ? answer_ms : from_ms) + "\n" + "E " +
         std::to_string(seq) + " 7 " + t + " " + t + " " + t + " " + result + " " + t + " " + validity + "\n";
}

KindVerdict kinds(const std::vector<std::string>& histories, long permits = 0, bool fair = false) {
  std::vector<WorkerHistory> workers;
  for (std::size_t i = 0; i < histories.size(); ++i) {
    workers.push_back(parse_history(static_cast<int>(i) + 1, histories[i], 0, 1'000'000'000));
  }
  return analyse_kinds(workers, {}, permits, fair, 1'000'000'000);
}

TEST(CheckerKinds, ReadersOverlapEachOtherButNotAWriter) {
  const auto clean = kinds({kind_hold(1, "shared", "counter", 0, 10), kind_hold(1, "shared", "counter", 5, 15),
                            kind_hold(1, "exclusive", "counter", 16, 20)});
  EXPECT_EQ(clean.overlaps_held, 0);
  EXPECT_TRUE(clean.violations.empty());
  const auto broken = kinds({kind_hold(1, "shared", "counter", 0, 10), kind_hold(1, "exclusive", "counter", 5, 15)});
  EXPECT_EQ(broken.overlaps_held, 1);
  EXPECT_EQ(broken.overlaps_by_kind.at("exclusive"), 1);
  ASSERT_EQ(broken.violations.size(), 1u);
}

TEST(CheckerKinds, AnOverlapWithALapsedLeaseIsNotAViolation) {
  // The reader was stopped past its lease: the writer's grant was right.
  const auto v = kinds({kind_hold(1, "shared", "counter", 0, 3000, "expired"),
                        kind_hold(1, "exclusive", "counter", 1500, 1510)});
  EXPECT_EQ(v.overlaps_expired, 1);
  EXPECT_TRUE(v.violations.empty());
}

// A hold of worker 1 begun at from_ms with valid_ms left and no end line (killed at killed_ms);
// `more` follows its B line (validity lines).
WorkerHistory killed_hold(const char* kind, long long from_ms, long long valid_ms, long long killed_ms,
                          const std::string& more = "") {
  const auto ns = [](long long ms) { return std::to_string(ms * 1'000'000); };
  const std::string line = "B 1 7 " + ns(from_ms) + " " + kind + " counter 7 " + ns(from_ms) + " " +
                           ns(from_ms) + " " + std::to_string(valid_ms) + "\n";
  return parse_history(1, line + more, killed_ms * 1'000'000, 10'000'000'000);
}

WorkerHistory writer_at(long long from_ms) {
  return parse_history(2, kind_hold(1, "exclusive", "counter", from_ms, from_ms + 10), 0, 10'000'000'000);
}

TEST(CheckerKinds, AKilledHolderIsCountedHeldOnlyForWhatItHadLeftAtItsBegin) {
  // The reader had 1000 ms left and was killed at 4000 ms: a writer granted at 2500 ms may
  // have come after its lease lapsed; one granted at 500 ms came while it still held.
  const WorkerHistory reader = killed_hold("shared", 0, 1000, 4000);
  ASSERT_EQ(reader.holds.size(), 1u);
  EXPECT_EQ(reader.holds[0].valid_until, 1'000'000'000);
  const auto late = analyse_kinds({reader, writer_at(2500)}, {}, 0, false, 1'000'000'000);
  EXPECT_EQ(late.overlaps_expired, 1);
  EXPECT_TRUE(late.violations.empty());
  const auto early = analyse_kinds({reader, writer_at(500)}, {}, 0, false, 1'000'000'000);
  EXPECT_EQ(early.overlaps_held, 1);
  EXPECT_EQ(early.violations.size(), 1u);
}

TEST(CheckerKinds, AValidityLineExtendsWhatAKilledHolderIsCountedHeldFor) {
  // Renewed in its body: at 800 ms it had 1000 ms left, so it held until 1800 ms at least.
  const WorkerHistory renewed = killed_hold("shared", 0, 1000, 4000, "V 1 800000000 1000\n");
  ASSERT_EQ(renewed.holds.size(), 1u);
  EXPECT_EQ(renewed.holds[0].valid_until, 1'800'000'000);
  const auto verdict = analyse_kinds({renewed, writer_at(1500)}, {}, 0, false, 1'000'000'000);
  EXPECT_EQ(verdict.overlaps_held, 1);
  EXPECT_EQ(verdict.violations.size(), 1u);
  // A validity line of another section, a shorter one, or one with nothing left (the lease
  // lapsed at some time before it) changes nothing.
  const WorkerHistory other = killed_hold("shared", 0, 1000, 4000,
                                          "V 2 800000000 1000\nV 1 100000000 10\nV 1 3000000000 0\n");
  EXPECT_EQ(other.holds[0].valid_until, 1'000'000'000);
}

TEST(CheckerKinds, AHolderThatHadNothingLeftAtItsBeginIsNotCountedHeld) {
  const WorkerHistory lapsed = killed_hold("shared", 100, 0, 4000);
  ASSERT_EQ(lapsed.holds.size(), 1u);
  EXPECT_EQ(lapsed.holds[0].valid_until, 100'000'000);  // begin + 0: held at no instant
  const auto verdict = analyse_kinds({lapsed, writer_at(500)}, {}, 0, false, 1'000'000'000);
  EXPECT_EQ(verdict.overlaps_expired, 1);
  EXPECT_TRUE(verdict.violations.empty());
}

TEST(CheckerKinds, AnOverlapIsJudgedWhereItStarts) {
  // The reader's lease lapsed before its end, but it still had 1000 ms left when the writer
  // began at 500 ms: both held then.
  const auto reader = parse_history(1, kind_hold(1, "shared", "counter", 0, 3000, "expired"), 0, 10'000'000'000);
  auto with_left = reader;
  with_left.holds[0].valid_until = 1'000'000'000;
  const auto writer = parse_history(2, kind_hold(1, "exclusive", "counter", 500, 510), 0, 10'000'000'000);
  EXPECT_EQ(analyse_kinds({reader, writer}, {}, 0, false, 1'000'000'000).overlaps_expired, 1);
  EXPECT_EQ(analyse_kinds({with_left, writer}, {}, 0, false, 1'000'000'000).overlaps_held, 1);
}

TEST(CheckerKinds, MoreHoldersThanPermitsIsAViolation) {
  const std::vector<std::string> three{kind_hold(1, "permit", "counter", 0, 10),
                                       kind_hold(1, "permit", "counter", 2, 12),
                                       kind_hold(1, "permit", "counter", 4, 14)};
  EXPECT_TRUE(kinds(three, 3).violations.empty());
  EXPECT_EQ(kinds(three, 3).most_permits, 3);
  const auto v = kinds(three, 2);
  EXPECT_EQ(v.over_permits_held, 1);
  ASSERT_EQ(v.violations.size(), 1u);
  // Back to back, two at a time.
  EXPECT_TRUE(kinds({kind_hold(1, "permit", "counter", 0, 10), kind_hold(1, "permit", "counter", 2, 12),
                     kind_hold(2, "permit", "counter", 10, 14)}, 2).violations.empty());
}

TEST(CheckerKinds, HoldsOfSeveralKeysExcludeOnEveryCommonKey) {
  const auto disjoint = kinds({kind_hold(1, "exclusive", "a,b", 0, 10), kind_hold(1, "exclusive", "c", 5, 15)});
  EXPECT_TRUE(disjoint.violations.empty());
  const auto common = kinds({kind_hold(1, "exclusive", "a,b", 0, 10), kind_hold(1, "exclusive", "c,b", 5, 15)});
  EXPECT_EQ(common.overlaps_held, 1);
  ASSERT_EQ(common.violations.size(), 1u);
  EXPECT_NE(common.examples.at(0).find("key 'b'"), std::string::npos);
}

TEST(CheckerKinds, AFairWaiterOvertakenByALaterArrivalIsAViolation) {
  // Worker 1 called at 0, its first try was answered (busy) by 2; worker 2 called at 5.
  const std::string first = kind_hold(1, "exclusive", "counter", 30, 40, "valid", 1, 2);
  const std::string in_order = kind_hold(1, "exclusive", "counter", 41, 50, "valid", 5, 6);
  const std::string overtaking = kind_hold(1, "exclusive", "counter", 10, 20, "valid", 5, 6);
  EXPECT_TRUE(kinds({first, in_order}, 0, true).violations.empty());
  const auto v = kinds({first, overtaking}, 0, true);
  EXPECT_EQ(v.fair_inversions, 1);
  ASSERT_EQ(v.violations.size(), 1u);
  // Calls too close to tell: b called before a's answer was seen.
  const std::string unordered = kind_hold(1, "exclusive", "counter", 10, 20, "valid", 2, 3);
  EXPECT_TRUE(kinds({kind_hold(1, "exclusive", "counter", 30, 40, "valid", 1, 3), unordered}, 0, true)
                  .violations.empty());
}

TEST(CheckerKinds, AFairWaiterOvertakenDuringAFaultIsCountedByThatFault) {
  std::vector<WorkerHistory> workers;
  workers.push_back(parse_history(1, kind_hold(1, "exclusive", "counter", 30, 40, "valid", 1, 2), 0,
                                  1'000'000'000));
  workers.push_back(parse_history(2, kind_hold(1, "exclusive", "counter", 10, 20, "valid", 5, 6), 0,
                                  1'000'000'000));
  const std::vector<Fault> faults{{"restart-instance", 0, 1'000'000'000'000LL, "instance 4"}};
  const auto v = analyse_kinds(workers, faults, 0, true, 1'000'000'000);
  EXPECT_TRUE(v.violations.empty());
  EXPECT_EQ(v.fair_inversions, 0);
  EXPECT_EQ(v.fair_inversions_in_faults, 1);
  EXPECT_EQ(v.fair_inversions_by_fault, (std::map<std::string, long>{{"restart-instance", 1}}));
}

TEST(CheckerKinds, TwoWritersAreLeftToTheFencedStore) {
  // The exclusive checks are unchanged: an overlap of writers is judged by fencing.
  const auto writers = kinds({begin(1, "10", 0) + end(1, "10", "rejected", 50),
                              begin(1, "11", 20) + end(1, "11", "accepted", 25)});
  EXPECT_EQ(writers.overlaps_held, 0);
  EXPECT_TRUE(writers.violations.empty());
  // A reader is not: a writer overlapping it is a violation whatever the store says.
  const auto reader = kinds({kind_hold(1, "exclusive", "counter", 0, 50, "valid", 0, 0, "accepted"),
                             kind_hold(1, "shared", "counter", 20, 25)});
  EXPECT_EQ(reader.overlaps_held, 1);
}

TEST(CheckerKinds, HoldsThatDidNotWriteAreLeftOutOfTheStoreChecks) {
  const auto a = parse_history(1, kind_hold(1, "shared", "counter", 0, 10), 0, 100);
  const auto b = parse_history(2, kind_hold(1, "shared", "counter", 5, 15), 0, 100);
  const Verdict v = run({a, b}, {}, 0);
  EXPECT_EQ(v.sections, 2);
  EXPECT_EQ(v.overlaps, 0);
  EXPECT_TRUE(v.violations.empty());
}

}  // namespace
}  // namespace checker
