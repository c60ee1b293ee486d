#include "redis/redlock_records.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "redis/backend_admin.hpp"
#include "redis/keys.hpp"
#include "redis/reply.hpp"
#include "redis/run_records.hpp"

namespace dlock::internal {
namespace {

template <typename T>
using Answers = RedlockQuorum::Answers<T>;

// SCANs the records of `kind` ("lock", "run") of `service` on one instance and reads, with
// `read(conn, redis_key, user_key, std::optional<Item>&)`, those whose user key matches the
// glob `pattern`. Returns the first failing reply.
template <typename Item, typename Read>
Reply scan_and_read(Connection& conn, std::string_view service, std::string_view kind,
                    std::string_view pattern, const Read& read, std::vector<Item>& out) {
  std::vector<std::string> found;
  Reply scanned = admin::scan_keys_sorted(conn, admin::scan_match(service, kind), found);
  if (!answered(scanned)) return scanned;
  for (const auto& redis_key : found) {
    const auto key = admin::user_key_of(service, redis_key, kind);
    if (!key || !glob_match(pattern, *key)) continue;
    std::optional<Item> item;
    Reply reply = read(conn, redis_key, *key, item);
    if (!answered(reply)) return reply;
    if (item) out.push_back(std::move(*item));
  }
  return Reply::ok(nullptr);
}

class RedlockRecords final : public RunStore, public AdminBackend {
 public:
  RedlockRecords(std::shared_ptr<RedlockQuorum> quorum, std::string service)
      : quorum_(std::move(quorum)), service_(std::move(service)) {}

  // Scheduled runs.

  // The median of the instances' clocks, from a quorum of them.
  std::int64_t server_time_ms() override {
    Answers<std::int64_t> answers = quorum_->ask_each<std::int64_t>(
        [](Connection& conn, std::int64_t& now_ms) { return runs::read_time_ms(conn, now_ms); });
    quorum_->require_quorum(answers, "TIME");
    std::vector<std::int64_t> times;
    for (const auto& time : answers.per) {
      if (time) times.push_back(*time);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  // Claimed when a quorum of instances recorded it; a record on a quorum can exist for one
  // owner only, so two owners can never both claim a key.
  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override {
    const ScriptCall call = runs::claim_call(lock_keys(service_, key.str()).lock,
                                             runs::run_key(service_, key.str()), mine, keep);
    const Answers<RunClaimReply> answers =
        quorum_->ask_each<RunClaimReply>([&](Connection& conn, RunClaimReply& claim) {
          Reply reply = call.run(conn);
          std::optional<RunClaimReply> read = runs::claim_of(reply, mine);
          if (!read && answered(reply)) {
            return Reply::failed(Reply::Status::kBroken, "unexpected reply to the run claim");
          }
          if (read) claim = std::move(*read);
          return reply;
        });
    std::size_t claimed = 0;
    std::size_t not_held = 0;
    const RunClaimReply* ours = nullptr;
    // Earlier runs by owner: one counts only when a quorum holds its record.
    std::map<std::string, std::pair<std::size_t, const RunClaimReply*>> earlier;
    for (const auto& claim : answers.per) {
      if (!claim) continue;
      if (claim->status == ClaimStatus::kClaimed) {
        ++claimed;
        if (!ours || claim->record.started_at_ms > ours->record.started_at_ms) ours = &*claim;
      } else if (claim->status == ClaimStatus::kAlreadyRan) {
        auto& [count, first] = earlier[claim->record.owner];
        if (count++ == 0) first = &*claim;
      } else {
        ++not_held;
      }
    }
    const std::size_t unknown = quorum_->size() - answers.answered();
    if (claimed >= quorum_->quorum()) return *ours;
    if (claimed + unknown >= quorum_->quorum()) {
      throw BackendUnavailable(
          fmt::format("backend '{}': recording the run: {} of {} instances did not answer ({})",
                      quorum_->config().name, unknown, quorum_->size(), answers.first_error));
    }
    for (const auto& [owner, seen] : earlier) {
      if (seen.first >= quorum_->quorum()) return *seen.second;
    }
    if (not_held >= quorum_->quorum()) return RunClaimReply{ClaimStatus::kNotHeld, {}};
    // Records of no quorum (a claim that reached too few instances), a lock held on too few:
    // neither this run nor an earlier one holds, so the slot is tried again later.
    throw BackendUnavailable(fmt::format(
        "backend '{}': recording the run: no quorum agrees ({} claimed, {} earlier run(s) on "
        "fewer than {} instances, {} not held)",
        quorum_->config().name, claimed, earlier.size(), quorum_->quorum(), not_held));
  }

  bool finish_run(const Key& key, std::string_view owner,
                  std::string_view outcome) noexcept override {
    try {
      const ScriptCall call = runs::finish_call(runs::run_key(service_, key.str()), owner, outcome);
      const Answers<bool> answers = quorum_->ask_each<bool>([&](Connection& conn, bool& finished) {
        Reply reply = call.run(conn);
        finished = runs::finished_of(reply);
        return reply;
      });
      const auto finished = std::count_if(answers.per.begin(), answers.per.end(),
                                          [](const std::optional<bool>& f) { return f && *f; });
      return static_cast<std::size_t>(finished) >= quorum_->quorum();
    } catch (...) {
      return false;
    }
  }

  // A key's record is the one a majority of the answering instances agree on (by owner);
  // otherwise the first found.
  std::vector<RunRecord> list_runs(std::string_view pattern) override {
    std::vector<bool> answered;
    std::vector<RunRecord> out;
    for (auto& entry : by_key<RunRecord>("run", pattern, read_run, "runs", answered)) {
      std::vector<RunRecord> records;
      for (auto& record : entry.second) {
        if (record) records.push_back(std::move(*record));
      }
      out.push_back(most_common_owner(records));
    }
    return out;
  }

  // Admin: every instance is asked; a lock is held when a majority holds it for one owner.

  std::vector<LockInfo> list(std::string_view pattern) override {
    std::vector<bool> answered;
    std::vector<LockInfo> out;
    for (const auto& entry : by_key<LockInfo>("lock", pattern, read_lock, "list", answered)) {
      if (auto info = combine(entry.second, answered)) out.push_back(std::move(*info));
    }
    return out;
  }

  std::optional<LockInfo> inspect(const Key& key) override {
    const std::string lock_key = lock_keys(service_, key.str()).lock;
    const Answers<std::optional<LockInfo>> answers = quorum_->ask_each<std::optional<LockInfo>>(
        [&](Connection& conn, std::optional<LockInfo>& info) {
          return admin::read_lock(conn, lock_key, key.str(), info);
        });
    quorum_->require_quorum(answers, "inspect");
    return combine(held(answers), answers.answered_mask());
  }

  std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) override {
    using Removed = std::pair<std::optional<LockInfo>, std::int64_t>;  // what, server time
    const ScriptCall call = admin::force_release_call(lock_keys(service_, key.str()));
    const Answers<Removed> answers = quorum_->ask_each<Removed>([&](Connection& conn,
                                                                    Removed& removed) {
      Reply reply = call.run(conn);
      if (answered(reply) && !admin::removed_of(reply, key.str(), removed.first, removed.second)) {
        return Reply::failed(Reply::Status::kBroken, "unexpected reply to force release");
      }
      return reply;
    });
    quorum_->require_any(answers, "force release");
    std::vector<std::optional<LockInfo>> per(quorum_->size());
    std::int64_t now_ms = 0;
    std::vector<bool> silent(quorum_->size());
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      silent[i] = !answers.answered_by(i);
      if (silent[i]) continue;
      per[i] = answers.per[i]->first;
      now_ms = std::max(now_ms, answers.per[i]->second);
    }
    std::optional<LockInfo> removed = combine(per, answers.answered_mask(), /*majority=*/false);
    if (removed) record_forced(who, *removed, now_ms, silent);
    // Deleted on fewer than a quorum: the instances that did not answer may still hold the
    // lock for its owner (whose next renewal restores the rest), so "released" would be
    // wrong; what was deleted is in the audit above.
    if (answers.answered() < quorum_->quorum()) {
      throw BackendUnavailable(fmt::format(
          "backend '{}': force release reached only {} of {} instances; a quorum is {} ({}): "
          "{}the lock may still be held; try again when more instances answer",
          quorum_->config().name, answers.answered(), quorum_->size(), quorum_->quorum(),
          answers.first_error,
          removed ? "deleted where reached (recorded in the history), but " : ""));
    }
    return removed;
  }

  std::vector<AuditEntry> history(std::size_t limit) override {
    const std::string audit = admin::audit_key(service_);
    const Answers<std::vector<AuditEntry>> answers = quorum_->ask_each<std::vector<AuditEntry>>(
        [&](Connection& conn, std::vector<AuditEntry>& here) {
          return admin::read_audit(conn, audit, limit, here);
        });
    quorum_->require_any(answers, "history");
    std::vector<AuditEntry> all;
    for (const auto& here : answers.per) {
      if (!here) continue;
      for (const auto& e : *here) {
        const bool known =
            std::any_of(all.begin(), all.end(), [&](const AuditEntry& a) { return a.id == e.id; });
        if (!known) all.push_back(e);
      }
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const AuditEntry& a, const AuditEntry& b) { return a.at_ms > b.at_ms; });
    if (all.size() > limit) all.resize(limit);
    return all;
  }

 private:
  static Reply read_run(Connection& conn, const std::string& redis_key, const std::string& key,
                        std::optional<RunRecord>& out) {
    return runs::read_run(conn, redis_key, key, out);
  }
  static Reply read_lock(Connection& conn, const std::string& redis_key, const std::string& key,
                         std::optional<LockInfo>& out) {
    return admin::read_lock(conn, redis_key, key, out);
  }

  // Every record of `kind` ("lock", "run") whose user key matches `pattern`, by key, as each
  // instance has it (none where it has none); `answered`: which instances answered. Throws
  // BackendUnavailable unless a quorum answered.
  template <typename Item, typename Read>
  std::map<std::string, std::vector<std::optional<Item>>> by_key(std::string_view kind,
                                                                 std::string_view pattern,
                                                                 const Read& read,
                                                                 std::string_view what,
                                                                 std::vector<bool>& answered) {
    const Answers<std::vector<Item>> answers =
        quorum_->ask_each<std::vector<Item>>([&](Connection& conn, std::vector<Item>& here) {
          return scan_and_read<Item>(conn, service_, kind, pattern, read, here);
        });
    quorum_->require_quorum(answers, what);
    answered = answers.answered_mask();
    std::map<std::string, std::vector<std::optional<Item>>> seen;
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      if (!answers.per[i]) continue;
      for (const auto& item : *answers.per[i]) {
        auto& per = seen[item.key];
        per.resize(quorum_->size());
        per[i] = item;
      }
    }
    return seen;
  }

  // The record most instances agree on (by owner); the first of them.
  static RunRecord most_common_owner(std::vector<RunRecord>& records) {
    std::size_t best = 0;
    std::size_t best_count = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto count = static_cast<std::size_t>(
          std::count_if(records.begin(), records.end(),
                        [&](const RunRecord& r) { return r.owner == records[i].owner; }));
      if (count > best_count) {
        best = i;
        best_count = count;
      }
    }
    return std::move(records[best]);
  }

  // Per instance: the lock it holds (none where it holds none or did not answer).
  std::vector<std::optional<LockInfo>> held(const Answers<std::optional<LockInfo>>& answers) const {
    std::vector<std::optional<LockInfo>> per(quorum_->size());
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      if (answers.per[i]) per[i] = *answers.per[i];
    }
    return per;
  }

  // Writes the audit entry of a forced release to every instance that answered it (`skip`:
  // those that did not).
  void record_forced(const AuditEntry& who, const LockInfo& removed, std::int64_t now_ms,
                     const std::vector<bool>& skip) {
    const AuditEntry entry = admin::complete_audit(who, removed, now_ms);
    admin::log_forced(quorum_->config().name, entry);
    const std::string audit = admin::audit_key(service_);
    const Answers<bool> recorded = quorum_->ask_each<bool>(
        [&](Connection& conn, bool&) { return admin::push_audit(conn, audit, entry); }, skip);
    if (recorded.answered() == 0) {
      throw BackendUnavailable(fmt::format(
          "backend '{}': the lock was released but no instance recorded the audit entry",
          quorum_->config().name));
    }
  }

  // The lock as a majority of instances hold it (with `majority` false: as most of the
  // instances that had it held it), with every instance's view in `instances`, and the
  // longest queue any of them has.
  std::optional<LockInfo> combine(const std::vector<std::optional<LockInfo>>& per,
                                  const std::vector<bool>& answered, bool majority = true) const {
    const std::optional<std::string> owner = most_votes(per, majority);
    if (!owner) return std::nullopt;
    std::optional<LockInfo> out;
    std::vector<Millis> ttls;
    for (const auto& info : per) {
      if (!info || info->owner != *owner) continue;
      ttls.push_back(info->ttl);
      if (!out) {
        out = *info;
      } else {
        out->token = std::max(out->token, info->token);
        out->min_hold = out->min_hold || info->min_hold;
      }
    }
    // A fair lock's waiters have their places on one instance (its order instance), which may
    // not hold the lock for this owner; the holder's own place there (kept from its grant
    // until its release) is not a waiter's.
    out->queue.clear();
    for (const auto& info : per) {
      if (!info) continue;
      std::vector<WaiterInfo> queue;
      for (const WaiterInfo& waiter : info->queue) {
        if (waiter.owner != *owner) queue.push_back(waiter);
      }
      if (queue.size() > out->queue.size()) out->queue = std::move(queue);
    }
    // Held for as long as a majority (or, without one, all of them) still has the key.
    std::sort(ttls.begin(), ttls.end(), std::greater<>());
    out->ttl = ttls[std::min(ttls.size(), majority ? quorum_->quorum() : ttls.size()) - 1];
    out->instances.clear();
    for (std::size_t i = 0; i < per.size(); ++i) {
      out->instances.push_back(instance_view(i, per[i], answered[i]));
    }
    return out;
  }

  // The owner most instances hold the lock for; none when no instance holds it (with
  // `majority`: when no owner has a quorum).
  std::optional<std::string> most_votes(const std::vector<std::optional<LockInfo>>& per,
                                        bool majority) const {
    std::map<std::string, std::size_t> votes;
    for (const auto& info : per) {
      if (info) ++votes[info->owner];
    }
    std::string owner;
    std::size_t best = 0;
    for (const auto& [o, n] : votes) {
      if (n > best) {
        owner = o;
        best = n;
      }
    }
    if (best == 0 || (majority && best < quorum_->quorum())) return std::nullopt;
    return owner;
  }

  InstanceLockInfo instance_view(std::size_t i, const std::optional<LockInfo>& info,
                                 bool answered) const {
    InstanceLockInfo detail;
    detail.endpoint = to_string(quorum_->endpoint(i));
    detail.answered = answered;
    if (!detail.answered) detail.error = "no answer";
    if (info) {
      detail.held = true;
      detail.owner = info->owner;
      detail.token = info->token;
      detail.ttl = info->ttl;
    }
    return detail;
  }

  const std::shared_ptr<RedlockQuorum> quorum_;
  const std::string service_;
};

}  // namespace

void add_redlock_records(Engine& engine, std::shared_ptr<RedlockQuorum> quorum,
                         const std::string& service) {
  auto records = std::make_shared<RedlockRecords>(std::move(quorum), service);
  engine.runs = records;
  engine.admin = records;
}

}  // namespace dlock::internal
