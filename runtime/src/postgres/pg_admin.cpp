// dlockctl's operations and scheduled runs on PostgreSQL (pg_backend.hpp).
#include <fmt/format.h>

#include <limits>

#include "dlock/admin.hpp"
#include "log.hpp"
#include "postgres/pg_backend.hpp"
#include "postgres/pg_rows.hpp"

namespace dlock::internal {
namespace {

using Status = PgResult::Status;


}  // namespace

std::vector<LockInfo> PgBackend::list(std::string_view pattern) {
  const PgResult result = checked(call(PgStatement::kList, Params{service_}, deadline()));
  std::vector<LockInfo> out;
  for (LockInfo& info : locks_of(result)) {
    if (glob_match(pattern, info.key)) out.push_back(std::move(info));
  }
  return out;
}

std::optional<LockInfo> PgBackend::inspect(const Key& key) {
  const PgResult result =
      checked(call(PgStatement::kInspect, Params{service_, hex(key.str())}, deadline()));
  std::vector<LockInfo> locks = locks_of(result);
  if (locks.empty()) return std::nullopt;
  return std::move(locks.front());
}

// The key's own holder, or else every holder in its queue (each audited).
std::optional<LockInfo> PgBackend::force_release(const Key& key, const AuditEntry& who) {
  const PgResult result = checked(call(
      PgStatement::kForceRelease,
      Params{service_, hex(key.str()), statements_->channel(), payload_of(key.str()), who.id,
             hex(who.user), hex(who.host), number_text(who.pid), hex(who.note)},
      deadline()));
  if (result.rows() == 0) {
    const std::optional<LockInfo> lock = inspect(key);
    if (!lock || lock->holders.empty()) return std::nullopt;
    return force_release_queued(key, *lock, who);
  }
  LockInfo removed = lock_info(result, 0);
  log_forced(removed, who);
  return removed;
}

// The holders `lock` shows, those still there: a holder granted since is left alone.
std::optional<LockInfo> PgBackend::force_release_queued(const Key& key, const LockInfo& lock,
                                                        const AuditEntry& who) {
  std::optional<LockInfo> first;
  std::vector<HolderInfo> removed_holders;
  const auto until = deadline();
  for (const HolderInfo& holder : lock.holders) {
    const PgResult result = checked(call(
        PgStatement::kQueueForce,
        Params{service_, hex(key.str()), statements_->channel(), payload_of(key.str()), who.id,
               hex(who.user), hex(who.host), number_text(who.pid), hex(who.note), holder.owner,
               number_text(static_cast<std::int64_t>(holder.token)), hex(holder.host),
               number_text(holder.pid), hex(holder.name)},
        until));
    if (result.rows() == 0) continue;  // released meanwhile
    LockInfo removed = lock;
    removed.holders = {holder};
    describe_by_first_holder(removed);
    log_forced(removed, who);
    removed_holders.push_back(holder);
    if (!first) first = std::move(removed);
  }
  if (first) first->holders = std::move(removed_holders);
  return first;
}

void PgBackend::log_forced(const LockInfo& removed, const AuditEntry& who) const {
  log(LogLevel::kWarn,
      "forced release: backend={} key={} owner={} token={} by {}@{} pid {} note=\"{}\"",
      config_.name, printable(removed.key), removed.owner, removed.token, who.user, who.host,
      who.pid, printable(who.note));
}

std::vector<AuditEntry> PgBackend::history(std::size_t limit) {
  const auto most = std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max());
  const PgResult result = checked(call(
      PgStatement::kHistory,
      Params{service_, number_text(static_cast<std::int64_t>(most))}, deadline()));
  std::vector<AuditEntry> out;
  for (int row = 0; row < result.rows(); ++row) out.push_back(audit_entry(result, row));
  return out;
}

RunClaimReply PgBackend::claim_run(const Key& key, const RunRecord& mine, Millis keep) {
  const PgResult result = checked(call(
      PgStatement::kClaimRun,
      Params{service_, hex(key.str()), mine.owner, number_text(std::max(keep, Millis{1}).count()),
             hex(mine.label), hex(mine.host), number_text(mine.pid),
             number_text(static_cast<std::int64_t>(mine.token))},
      deadline()));
  if (result.rows() == 0) return {ClaimStatus::kNotHeld, {}};
  const bool claimed = result.number(0, 0) == 1;
  return {claimed ? ClaimStatus::kClaimed : ClaimStatus::kAlreadyRan, run_record(result, 0, 1)};
}

bool PgBackend::finish_run(const Key& key, std::string_view owner,
                                 std::string_view outcome) noexcept {
  try {
    const PgResult result =
        call(PgStatement::kFinishRun,
             Params{service_, hex(key.str()), std::string(owner), hex(outcome)}, deadline());
    return result.status == Status::kOk && result.rows() == 1;
  } catch (...) {
    return false;
  }
}

std::vector<RunRecord> PgBackend::list_runs(std::string_view pattern) {
  const PgResult result = checked(call(PgStatement::kListRuns, Params{service_}, deadline()));
  std::vector<RunRecord> out;
  for (int row = 0; row < result.rows(); ++row) {
    RunRecord record = run_record(result, row, 0);
    if (glob_match(pattern, record.key)) out.push_back(std::move(record));
  }
  return out;
}

}  // namespace dlock::internal
