#include "redis/master_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "redis/backend_admin.hpp"
#include "redis/keys.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/run_records.hpp"
#include "redis/subscriber.hpp"

namespace dlock::internal {
namespace {

// A reply that says this server is not (or no longer) the master to talk to.
bool wrong_master(const Reply& reply) {
  if (reply.status() == Reply::Status::kNotSent || reply.status() == Reply::Status::kBroken) {
    return true;
  }
  const ServerError error = reply.server_error();
  return error == ServerError::kReadOnly || error == ServerError::kNotReady;
}

class MasterBackend final : public Backend {
 public:
  MasterBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics,
                std::unique_ptr<MasterLocator> locator)
      : config_(std::move(config)),
        service_(std::move(service)),
        metrics_(std::move(metrics)),
        wait_replicas_(std::to_string(config_.wait_replicas)),
        // WAIT must answer before the socket's read timeout gives up on it.
        wait_timeout_(std::to_string(std::max<long long>(1, config_.command_timeout.count() * 3 / 4))),
        locator_(std::move(locator)) {
    locator_->set_listener([this](const Endpoint& master) {
      std::lock_guard lock(feed_mutex_);
      if (feed_) feed_->source(0).retarget(master);
    });
  }

  GrantReply acquire(const GrantRequest& request) override {
    const LockKeys keys = lock_keys(service_, request.key.str());
    GrantReply not_replicated;
    bool replicas_missing = false;
    const Reply last = on_master(request.give_up_at, [&](Connection& conn) {
      replicas_missing = false;
      ScriptCall acquire = acquire_call(keys, request, request.lease,
                                        conn.server_time_us(request.give_up_at));
      std::vector<Reply> replies = run_pipeline(conn, {&acquire}, wait_command());
      if (config_.wait_replicas == 0 || grant_of(replies[0]).kind != GrantReply::Kind::kAcquired) {
        return std::move(replies[0]);
      }
      const Reply& wait = replies[1];
      if (wait.ok() && wait.is_integer() && wait.integer() >= config_.wait_replicas) {
        return std::move(replies[0]);
      }
      // Not on enough replicas: a failover could lose the key, so it is no grant.
      replicas_missing = true;
      const ReleaseOutcome undone =
          release_outcome_of(release_call(keys, request.owner, Millis{0}).run(conn));
      not_replicated.outcome_unknown = undone == ReleaseOutcome::kUnavailable;
      not_replicated.error =
          wait.ok() && wait.is_integer()
              ? fmt::format("only {} of {} replicas confirmed the lock within {}ms; released it",
                            wait.integer(), config_.wait_replicas, wait_timeout_)
              : fmt::format("WAIT failed: {}", wait.ok() ? wait.text() : wait.error());
      return Reply::ok(nullptr);
    });
    if (!replicas_missing) return grant_of(last);
    // Often the first sign of a failover in progress: look for the master again now.
    locator_->relocate(last_generation_.load(), Clock::now() + config_.command_timeout);
    return not_replicated;
  }

  void renew(std::vector<RenewItem>& items) override {
    std::vector<ScriptCall> calls;
    calls.reserve(items.size());
    for (const auto& item : items) {
      calls.push_back(renew_call(lock_keys(service_, item.key->str()), item.owner, item.ttl));
    }
    std::vector<const ScriptCall*> pipeline;
    for (const auto& call : calls) pipeline.push_back(&call);
    on_master(Clock::now() + config_.command_timeout, [&](Connection& conn) {
      std::vector<Reply> replies = run_pipeline(conn, pipeline, wait_command());
      const bool replicated = config_.wait_replicas == 0 ||
                              (replies.back().ok() && replies.back().is_integer() &&
                               replies.back().integer() >= config_.wait_replicas);
      for (std::size_t i = 0; i < items.size(); ++i) {
        items[i].outcome = renew_outcome_of(replies[i]);
        // An extension that no replica confirmed could vanish in a failover.
        if (!replicated && items[i].outcome == RenewOutcome::kRenewed) {
          items[i].outcome = RenewOutcome::kUnavailable;
        }
      }
      for (auto& reply : replies) {
        if (!reply.ok() || wrong_master(reply)) return std::move(reply);
      }
      return Reply::ok(nullptr);
    });
  }

  ReleaseOutcome release(const Key& key, std::string_view owner, Millis keep_for) noexcept override {
    try {
      const ScriptCall call = release_call(lock_keys(service_, key.str()), owner, keep_for);
      return release_outcome_of(on_master(Clock::now() + config_.command_timeout,
                                          [&](Connection& conn) { return call.run(conn); }));
    } catch (...) {
      return ReleaseOutcome::kUnavailable;
    }
  }

  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return feed().watch(lock_keys(service_, key.str()).channel);
  }

  const BackendConfig& config() const override { return config_; }

  std::int64_t server_time_ms() override {
    std::int64_t now_ms = 0;
    admin::require(on_master(Clock::now() + config_.command_timeout,
                             [&](Connection& conn) { return runs::read_time_ms(conn, now_ms); }),
                   config_.name, "TIME");
    return now_ms;
  }

  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override {
    const ScriptCall call = runs::claim_call(lock_keys(service_, key.str()).lock, runs::run_key(service_, key.str()),
                                             mine, keep);
    const Reply reply = on_master(Clock::now() + config_.command_timeout,
                                  [&](Connection& conn) { return call.run(conn); });
    admin::require(reply, config_.name, "recording the run");
    if (auto claim = runs::claim_of(reply, mine)) return std::move(*claim);
    throw BackendUnavailable(fmt::format("backend '{}': unexpected reply to the run claim", config_.name));
  }

  bool finish_run(const Key& key, std::string_view owner, std::string_view outcome) noexcept override {
    try {
      const ScriptCall call = runs::finish_call(runs::run_key(service_, key.str()), owner, outcome);
      return runs::finished_of(on_master(Clock::now() + config_.command_timeout,
                                         [&](Connection& conn) { return call.run(conn); }));
    } catch (...) {
      return false;
    }
  }

  std::vector<RunRecord> admin_runs(std::string_view pattern) override {
    std::vector<RunRecord> out;
    for (const auto& run_key : scan(admin::scan_match(service_, "run"))) {
      const auto key = admin::user_key_of(service_, run_key, "run");
      if (!key || !glob_match(pattern, *key)) continue;
      std::optional<RunRecord> record;
      admin::require(on_master(Clock::now() + config_.command_timeout,
                               [&](Connection& conn) { return runs::read_run(conn, run_key, *key, record); }),
                     config_.name, "HGETALL");
      if (record) out.push_back(std::move(*record));
    }
    return out;
  }

  std::vector<LockInfo> admin_list(std::string_view pattern) override {
    std::vector<LockInfo> out;
    for (const auto& lock_key : scan(admin::scan_match(service_))) {
      const auto key = admin::user_key_of(service_, lock_key);
      if (!key || !glob_match(pattern, *key)) continue;
      std::optional<LockInfo> info;
      admin::require(on_master(Clock::now() + config_.command_timeout,
                               [&](Connection& conn) { return admin::read_lock(conn, lock_key, *key, info); }),
                     config_.name, "HGETALL");
      if (info) out.push_back(std::move(*info));
    }
    return out;
  }

  std::optional<LockInfo> admin_inspect(const Key& key) override {
    const std::string lock_key = lock_keys(service_, key.str()).lock;
    std::optional<LockInfo> info;
    admin::require(on_master(Clock::now() + config_.command_timeout,
                             [&](Connection& conn) { return admin::read_lock(conn, lock_key, key.str(), info); }),
                   config_.name, "HGETALL");
    return info;
  }

  std::optional<LockInfo> admin_force_release(const Key& key, const AuditEntry& who) override {
    const ScriptCall call = admin::force_release_call(lock_keys(service_, key.str()));
    const Reply reply = on_master(Clock::now() + config_.command_timeout,
                                  [&](Connection& conn) { return call.run(conn); });
    admin::require(reply, config_.name, "force release");
    std::optional<LockInfo> removed;
    std::int64_t now_ms = 0;
    if (!admin::removed_of(reply, key.str(), removed, now_ms)) {
      throw BackendUnavailable(fmt::format("backend '{}': unexpected reply to force release", config_.name));
    }
    if (!removed) return removed;
    const AuditEntry entry = admin::complete_audit(who, *removed, now_ms);
    admin::log_forced(config_.name, entry);
    const std::string audit = admin::audit_key(service_);
    admin::require(on_master(Clock::now() + config_.command_timeout,
                             [&](Connection& conn) { return admin::push_audit(conn, audit, entry); }),
                   config_.name, "recording the audit entry (the lock was released)");
    return removed;
  }

  std::vector<AuditEntry> admin_history(std::size_t limit) override {
    std::vector<AuditEntry> out;
    const std::string audit = admin::audit_key(service_);
    admin::require(on_master(Clock::now() + config_.command_timeout,
                             [&](Connection& conn) {
                               out.clear();
                               return admin::read_audit(conn, audit, limit, out);
                             }),
                   config_.name, "LRANGE");
    return out;
  }

 private:
  // Every key matching `match` on the master, sorted, each once.
  std::vector<std::string> scan(const std::string& match) {
    std::vector<std::string> found;
    admin::require(on_master(Clock::now() + config_.command_timeout,
                             [&](Connection& conn) { return admin::scan_keys_sorted(conn, match, found); }),
                   config_.name, "SCAN");
    return found;
  }

  std::vector<std::string_view> wait_command() const {
    if (config_.wait_replicas == 0) return {};
    return {"WAIT", wait_replicas_, wait_timeout_};
  }

  // Runs `call` on the master. If the master turns out not to be one (refused, READONLY),
  // finds the master again and, if it moved, runs `call` there, until `deadline`. Every
  // script is idempotent for one owner, so running it again is safe.
  template <typename Call>
  Reply on_master(Clock::time_point deadline, const Call& call) {
    MasterLocator::Master master = locator_->current(deadline);
    for (;;) {
      if (!master.pool) {
        return Reply::failed(Reply::Status::kNotSent,
                             fmt::format("no master for backend '{}': {}", config_.name, master.error));
      }
      last_generation_ = master.generation;
      Reply reply = master.pool->run([&](Connection& conn) { return call(conn); });
      if (!wrong_master(reply) || Clock::now() >= deadline) return reply;
      MasterLocator::Master next = locator_->relocate(master.generation, deadline);
      if (!next.pool || next.generation == master.generation) return reply;
      master = std::move(next);
    }
  }

  // The subscriber listens on the current master. The lookup happens outside feed_mutex_:
  // finding a new master calls the listener, which takes that mutex.
  ReleaseFeed& feed() {
    const auto master = locator_->current(Clock::now() + config_.connect_timeout);
    std::lock_guard lock(feed_mutex_);
    if (!feed_) {
      std::vector<Endpoint> where;
      if (master.pool) where.push_back(master.pool->endpoint());
      feed_ = std::make_unique<ReleaseFeed>(std::vector<std::vector<Endpoint>>{where}, config_, metrics_);
    } else if (master.pool) {
      feed_->source(0).retarget(master.pool->endpoint());  // no-op unless the master moved
    }
    return *feed_;
  }

  const BackendConfig config_;
  const std::string service_;
  const std::shared_ptr<Metrics> metrics_;
  const std::string wait_replicas_;
  const std::string wait_timeout_;
  std::atomic<std::uint64_t> last_generation_{0};
  std::mutex feed_mutex_;
  std::unique_ptr<ReleaseFeed> feed_;
  // Last, so that it goes first: its threads may call the listener, which uses feed_.
  const std::unique_ptr<MasterLocator> locator_;
};

}  // namespace

std::shared_ptr<Backend> make_master_backend(const BackendConfig& config, const std::string& service,
                                             std::shared_ptr<Metrics> metrics,
                                             std::unique_ptr<MasterLocator> locator) {
  return std::make_shared<MasterBackend>(config, service, std::move(metrics), std::move(locator));
}

}  // namespace dlock::internal
