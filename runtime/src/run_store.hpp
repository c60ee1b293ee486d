// The scheduled-runs seam (dlock/schedule.hpp): the server's clock and run records. Reached
// only from schedule.cpp and admin.cpp, through runs_of() (engine.hpp).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/key.hpp"
#include "dlock/schedule.hpp"

namespace dlock::internal {

/// What claim_run.lua (or the memory store) answered.
struct RunClaimReply {
  ClaimStatus status = ClaimStatus::kNotHeld;
  RunRecord record;  ///< kClaimed: ours, completed; kAlreadyRan: the earlier one
};

/// Every call throws BackendUnavailable when the servers cannot be reached within the
/// backend's timeouts (finish_run, which never throws, answers false).
class RunStore {
 public:
  virtual ~RunStore() = default;

  /// The server's clock, ms since the Unix epoch.
  virtual std::int64_t server_time_ms() = 0;
  /// Writes `mine` (key, owner, token, label, host and pid set; the name comes from the
  /// lock, the start time from the server) as the run record of `key`, kept for `keep`, if
  /// `mine.owner` holds the lock and no record exists.
  virtual RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) = 0;
  /// Sets the finish time and `outcome` of the record of `key` if it is `owner`'s.
  virtual bool finish_run(const Key& key, std::string_view owner,
                          std::string_view outcome) noexcept = 0;
  /// Run records whose key matches the glob `pattern`, in any order.
  virtual std::vector<RunRecord> list_runs(std::string_view pattern) = 0;
};

}  // namespace dlock::internal
