// The PostgreSQL engine's object (postgres_backend.hpp makes it): the lock seam in
// postgres_backend.cpp, the queue of the lock kinds in pg_queue.cpp, admin and scheduled
// runs in pg_admin.cpp.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "admin_backend.hpp"
#include "backend.hpp"
#include "postgres/pg_connection.hpp"
#include "postgres/pg_listener.hpp"
#include "postgres/pg_rows.hpp"
#include "run_store.hpp"

namespace dlock::internal {

class PgBackend final : public Backend,
                        public RunStore,
                        public AdminBackend,
                        public std::enable_shared_from_this<PgBackend> {
 public:
  PgBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics);

  GrantReply acquire(const GrantRequest& request) override;
  void renew(std::vector<RenewItem>& items) override;
  ReleaseOutcome release(const Key& key, std::string_view owner,
                         Millis keep_for) noexcept override;
  bool release_later(const Key& key, std::string_view owner, Millis keep_for,
                     std::function<void(ReleaseOutcome)> done) noexcept override;
  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return listener_.watch(payload_of(key.str()));
  }
  /// Waiters keep a place in the key's queue (pg_queue_sql.hpp), every kind of lock.
  [[nodiscard]] bool queues() const override { return true; }
  [[nodiscard]] bool supports(LockKind /*kind*/, bool /*fair*/) const override { return true; }
  [[nodiscard]] const BackendConfig& config() const override { return config_; }

  std::vector<LockInfo> list(std::string_view pattern) override;
  std::optional<LockInfo> inspect(const Key& key) override;
  std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) override;
  std::vector<AuditEntry> history(std::size_t limit) override;

  std::int64_t server_time_ms() override;
  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override;
  bool finish_run(const Key& key, std::string_view owner,
                  std::string_view outcome) noexcept override;
  std::vector<RunRecord> list_runs(std::string_view pattern) override;

 private:
  using Params = std::vector<std::string>;
  using Build = std::function<Params(PgConnection&)>;

  [[nodiscard]] Clock::time_point deadline() const {
    return later(Clock::now(), config_.command_timeout);
  }
  [[nodiscard]] std::string payload_of(std::string_view key) const;
  /// Runs `statement` on a pool connection (waiting for one unless `wait` is false).
  PgResult call(PgStatement statement, const Build& build, Clock::time_point deadline,
                PgPool::Lane lane = PgPool::Lane::kShared, bool wait = true);
  PgResult call(PgStatement statement, Params params, Clock::time_point deadline,
                PgPool::Lane lane = PgPool::Lane::kShared, bool wait = true) {
    return call(
        statement, [&](PgConnection&) { return params; }, deadline, lane, wait);
  }
  /// `result` if the statement ran; else throws BackendUnavailable.
  PgResult checked(PgResult result) const;
  bool ensure_schema(PgConnection& conn, Clock::time_point deadline, std::string& error);
  /// The acquiring statements' parameters for `request` on `conn`: service, key, owner,
  /// lease, not-after (server µs; `resync` reads the server's clock first), host, pid,
  /// thread, name.
  Params grant_params(PgConnection& conn, const GrantRequest& request, bool resync,
                      Clock::time_point until);
  void renew_in(PgStatement statement, std::vector<RenewItem*>& items, Clock::time_point until);

  // The key's queue (pg_queue.cpp): every kind but a plain exclusive try, and every waiter.
  GrantReply acquire_queued(const GrantRequest& request);
  GrantReply standing_in(const GrantRequest& request, const QueueAnswer& answer);
  bool left_queue(const GrantRequest& request);
  /// Takes `owner`'s entry out of the key's queue (keep_for 0) or keeps it for keep_for.
  ReleaseOutcome release_queued(const Key& key, std::string_view owner, Millis keep_for,
                                bool wait) noexcept;

  /// Whether `owner` has asked for a place in a queue (its release goes there).
  bool queued(std::string_view owner);
  void forget(std::string_view owner);
  std::optional<LockInfo> force_release_queued(const Key& key, const LockInfo& lock,
                                               const AuditEntry& who);
  void log_forced(const LockInfo& removed, const AuditEntry& who) const;

  /// A release refused by the server, sent again from the settler's thread.
  ReleaseOutcome release_once_more(const Key& key, const std::string& owner,
                                   Millis keep_for) noexcept;
  /// kRelease's `result` as an outcome; when it released nothing, after_miss().
  ReleaseOutcome release_outcome(const PgResult& result, const Key& key, std::string_view owner,
                                 Millis keep_for, Clock::time_point until, bool wait);
  /// After a release that found the key's row not the owner's: the owner's entry in the
  /// key's queue, if any, goes; else missed().
  ReleaseOutcome after_miss(const Key& key, std::string_view owner, Millis keep_for,
                            Clock::time_point until, bool wait) noexcept;
  /// Why a release found nothing to release: kTaken or kGone (waiting for a connection
  /// only with `wait`; the settler must not), asked by `until`.
  ReleaseOutcome missed(const Key& key, std::string_view owner, Clock::time_point until,
                        bool wait) noexcept;
  [[nodiscard]] Params release_params(const Key& key, std::string_view owner,
                                      Millis keep_for) const;
  void sweep_now_and_then() noexcept;
  void post_sweep();

  BackendConfig config_;
  std::string service_;
  std::shared_ptr<const PgStatements> statements_;
  std::shared_ptr<PgPool> pool_;
  PgListener listener_;
  std::string host_;
  std::string pid_;
  std::mutex schema_mutex_;
  std::atomic<bool> schema_ready_{false};
  std::atomic<Clock::rep> next_sweep_{0};
  std::mutex queued_mutex_;
  /// Owners that asked for a place in a key's queue, until their release.
  std::set<std::string, std::less<>> queued_;
  std::atomic<std::size_t> queued_count_{0};  ///< queued_.size(), read without the mutex
};

}  // namespace dlock::internal
