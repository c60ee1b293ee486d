// The checker's verdict over one run: the workers' histories, the fenced store's log and the
// faults injected.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace checker {

/// One critical section as a worker recorded it (CLOCK_MONOTONIC nanoseconds).
struct Hold {
  int worker = 0;
  long sequence = 0;
  std::string token;
  long long begin = 0;
  long long end = 0;    ///< end of the body; the kill time for a worker killed inside it
  bool completed = false;  ///< an E line was written
  bool killed = false;     ///< the worker died inside the body
  std::string write;       ///< accepted | rejected | none (did not write) | "" (no E line)
  // Lock kinds (--kind): the optional fields of a B line and the last field of an E line.
  std::string kind = "exclusive";   ///< exclusive | shared | permit
  std::vector<std::string> keys;    ///< the lease's keys (empty: the one lock key)
  std::vector<std::string> tokens;  ///< one per key, in the order of keys
  long long call = 0;    ///< the guard was called: no request sent before (0: not recorded)
  long long answer = 0;  ///< the first try's answer was read by then (0: not recorded)
  bool valid_at_end = true;  ///< the client still held the lease when the body ended
  /// The client counted its lease held at least until then: the latest of begin + what it
  /// had left at the begin and of the validity lines' t + what it had left at t (0: not
  /// recorded). For a hold without an end line (its worker killed, its body failed) it is all
  /// that is known of its validity.
  long long valid_until = 0;
  /// Whether the client still counted its lease held at `t` (t >= begin), as far as its
  /// history shows.
  [[nodiscard]] bool held_at(long long t) const {
    if (completed && valid_at_end) return true;  // to its end, so at t too
    if (valid_until > 0) return t < valid_until;
    return valid_at_end;  // a history that does not record it
  }
  /// Whether the fenced store judges this hold: an exclusive hold of the one lock key that
  /// writes (shared holds, permits and holds of several keys do not write).
  [[nodiscard]] bool fenced() const { return kind == "exclusive" && keys.size() <= 1 && write != "none"; }
};

/// A fault as the controller ran it.
struct Fault {
  std::string kind;
  long long begin = 0, end = 0;
  std::string detail;
};

/// One operation of the fenced store, in the store's order.
struct StoreOp {
  char op = 'R';             ///< R or W
  std::string token;
  std::string outcome;       ///< ok | stale (R), accepted | rejected (W)
};

/// Counts of one worker's history.
struct WorkerHistory {
  std::vector<Hold> holds;
  long busy = 0, unavailable = 0, errors = 0;
};

/// Parses one history file; `killed_at` (0: not killed) closes a hold left open.
WorkerHistory parse_history(int worker, const std::string& text, long long killed_at, long long run_end);

/// Parses the store's log list ("R token ok value", "W token accepted value", ...).
std::vector<StoreOp> parse_store_log(const std::vector<std::string>& lines);

struct Verdict {
  long sections = 0, completed = 0, cut_by_kill = 0;
  long writers_completed = 0;   ///< completed holds that wrote to the fenced store (Hold::fenced)
  long busy = 0, unavailable = 0, errors = 0;
  long overlaps = 0;            ///< pairs of holds whose bodies ran at the same time
  long stale_holds = 0;         ///< holds on the lower-token side of at least one overlap
  long overlaps_caught = 0;     ///< the stale side's write was rejected (or never made)
  long overlaps_serialized = 0; ///< the stale side's write reached the store before the newer read
  long overlaps_uncaught = 0;   ///< the stale side's write was accepted after the newer read
  std::map<std::string, long> overlaps_by_fault;  ///< fault kind (or "none") -> overlaps
  long store_accepted = 0, store_rejected = 0, stale_reads = 0;
  long stale_writes_accepted = 0;  ///< replay: an accepted write below a token already seen
  long duplicate_tokens = 0;       ///< two holds with one token
  long token_regressions = 0;      ///< a later hold with a token not above an earlier one's
  long fenced_counter = 0, raw_counter = 0;
  bool counter_exact = false;      ///< fenced counter == accepted writes
  bool history_matches_store = false;
  std::vector<std::string> violations;
};

/// What the lock kinds promise, checked key by key over every hold (fenced or not).
struct KindVerdict {
  /// Pairs of holds of one key whose kinds exclude each other and whose bodies overlapped,
  /// by the kind of the later one ("exclusive", "shared", "permit").
  std::map<std::string, long> overlaps_by_kind;
  long overlaps_expired = 0;     ///< one side's client no longer counted its lease held where
                                 ///< the overlap started, or its history cannot show it did (a
                                 ///< worker killed past what it had left at its begin)
                                 ///< (permits: over N only with such holds)
  long overlaps_beyond_promise = 0;  ///< both held, during a clock step or a restart without data
  long overlaps_held = 0;        ///< both clients held their leases: a violation
  long most_permits = 0;         ///< the most permits of one key held at one instant
  long over_permits_held = 0;    ///< instants over N counting only holds valid at their end (a violation)
  long fair_pairs = 0;           ///< pairs where a was answered before b called and granted after: a waited
  long fair_inversions = 0;      ///< of those, b granted before a (sections b)
  long fair_inversions_in_faults = 0;
  std::map<std::string, long> fair_inversions_by_fault;  ///< fault kind -> those in faults
  std::vector<std::string> examples;  ///< one line per kind of finding, for the report
  std::vector<std::string> violations;
};

/// Checks the kinds over the holds of every worker: exclusion per key (an exclusive hold
/// overlaps no other hold of any of its keys, shared holds only shared ones), at most
/// `permits` permit holds at once, and, for `fair`, arrival order. Two writers of the fenced
/// store (Hold::fenced) are left to analyse: fencing decides whether their overlap harmed. Overlaps where one side's
/// lease had lapsed by its end, or during a fault past what the topology promises (a clock
/// step, a restart without data: only fencing helps there), are counted apart and are not
/// violations.
KindVerdict analyse_kinds(const std::vector<WorkerHistory>& workers, const std::vector<Fault>& faults,
                          long permits, bool fair, long long lease_ns);

/// Runs every check. `lease_ns` widens each fault's window for the attribution of overlaps.
Verdict analyse(const std::vector<WorkerHistory>& workers, const std::vector<StoreOp>& store,
                const std::vector<Fault>& faults, long fenced_counter, long raw_counter,
                long store_accepted, long store_rejected, long stale_reads, long long lease_ns);

}  // namespace checker
