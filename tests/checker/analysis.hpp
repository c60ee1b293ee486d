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
  std::string write;       ///< accepted | rejected | "" (no E line)
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

/// Runs every check. `lease_ns` widens each fault's window for the attribution of overlaps.
Verdict analyse(const std::vector<WorkerHistory>& workers, const std::vector<StoreOp>& store,
                const std::vector<Fault>& faults, long fenced_counter, long raw_counter,
                long store_accepted, long store_rejected, long stale_reads, long long lease_ns);

}  // namespace checker
