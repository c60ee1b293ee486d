// What single, sentinel and cluster share: every lock lives on exactly one server, so every
// operation but acquire and renew is "run this on the server of that key". A topology says
// how to reach that server (the master, or the master of a cluster slot, following
// redirects) and how to scan all of its servers; this class does the rest.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine.hpp"
#include "redis/connection.hpp"
#include "redis/keys.hpp"
#include "redis/scripts.hpp"
#include "redis/pool.hpp"

namespace dlock::internal {

/// All three seams (engine.hpp); a topology adds acquire, renew and watch.
class RoutedBackend : public Backend,
                      public RunStore,
                      public AdminBackend,
                      public std::enable_shared_from_this<RoutedBackend> {
 public:
  // The lock seam.
  ReleaseOutcome release(const Key& key, std::string_view owner, Millis keep_for) noexcept override;
  bool release_later(const Key& key, std::string_view owner, Millis keep_for,
                     std::function<void(ReleaseOutcome)> done) noexcept override;
  std::vector<ReleaseOutcome> release_together(
      const std::vector<ReleaseItem>& items) noexcept override;
  bool release_together_later(const std::vector<ReleaseItem>& items,
                              std::function<void(std::vector<ReleaseOutcome>)> done) noexcept
      override;
  [[nodiscard]] const BackendConfig& config() const override { return config_; }

  // Scheduled runs.
  std::int64_t server_time_ms() override;
  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override;
  bool finish_run(const Key& key, std::string_view owner,
                  std::string_view outcome) noexcept override;
  std::vector<RunRecord> list_runs(std::string_view pattern) override;

  // Admin.
  std::vector<LockInfo> list(std::string_view pattern) override;
  std::optional<LockInfo> inspect(const Key& key) override;
  std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) override;
  std::vector<AuditEntry> history(std::size_t limit) override;

 protected:
  RoutedBackend(BackendConfig config, std::string service)
      : config_(std::move(config)), service_(std::move(service)) {}

  /// A call on one server; `asking` is true when it must be preceded by ASKING (cluster).
  using ServerCall = std::function<Reply(Connection& conn, bool asking)>;

  /// Runs `call` on the server that holds `redis_key` (any server for an empty key) until
  /// `deadline`, following the topology's moves. Every call made through it is idempotent.
  virtual Reply on_server_of(std::string_view redis_key, Clock::time_point deadline,
                             const ServerCall& call) = 0;
  /// The pool of the server that holds `redis_key` as far as known now, without waiting or
  /// asking anyone; null when that is not known.
  virtual std::shared_ptr<ConnectionPool> known_pool_of(std::string_view redis_key) = 0;
  /// Every key matching the SCAN pattern `match` on every server, sorted, each once.
  /// Throws BackendUnavailable.
  virtual std::vector<std::string> scan_all(const std::string& match) = 0;

  const BackendConfig config_;
  const std::string service_;

 private:
  Reply on_server_of(std::string_view redis_key, const ServerCall& call) {
    return on_server_of(redis_key, Clock::now() + config_.command_timeout, call);
  }
  /// Sends the release `call` on the calling thread's connection to the server of `lock`
  /// without waiting (Backend::release_later). `done` gets what `read` makes of the reply;
  /// `unknown` when no answer came; what `again` returns, off this thread, when the answer
  /// says nothing was applied. False when no connection to that server is known.
  template <typename Outcome>
  bool send_release(const std::string& lock, ScriptCall call,
                    std::function<std::optional<Outcome>(const Reply&)> read,
                    std::function<Outcome()> again, Outcome unknown,
                    std::function<void(Outcome)> done);
  std::vector<LockKeys> keys_of(const std::vector<ReleaseItem>& items) const;
  /// Reads `read(conn, redis_key, user_key, asking)` for every key of `kind` matching the
  /// user-key glob `pattern`.
  template <typename Item, typename Read>
  std::vector<Item> read_matching(std::string_view pattern, std::string_view kind,
                                  const Read& read);
};

}  // namespace dlock::internal
