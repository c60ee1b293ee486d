#include "redis/master_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "redis/backend_admin.hpp"
#include "redis/keys.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/reply.hpp"
#include "redis/routed_backend.hpp"
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

class MasterBackend final : public RoutedBackend {
 public:
  MasterBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics,
                std::unique_ptr<MasterLocator> locator)
      : RoutedBackend(std::move(config), std::move(service)),
        metrics_(std::move(metrics)),
        wait_replicas_(std::to_string(config_.wait_replicas)),
        // WAIT must answer before the socket's read timeout gives up on it.
        wait_timeout_(
            std::to_string(std::max<long long>(1, config_.command_timeout.count() * 3 / 4))),
        locator_(std::move(locator)) {
    locator_->set_listener([this](const Endpoint& master) {
      std::lock_guard lock(feed_mutex_);
      if (feed_) feed_->source(0).retarget(master);
    });
  }

  // One server holds every key; with WAIT for replicas, one by one (each grant is checked).
  [[nodiscard]] bool takes_together(const std::vector<Key>& /*keys*/) const override {
    return config_.wait_replicas == 0;
  }

  GrantReply acquire_together(const std::vector<Key>& keys, const GrantRequest& request) override {
    std::vector<LockKeys> all;
    all.reserve(keys.size());
    for (const Key& key : keys) all.push_back(lock_keys(service_, key.str()));
    const Reply last = on_master(request.give_up_at, [&](Connection& conn) {
      return run_acquisition(conn, request.give_up_at, false, [&](std::int64_t not_after) {
        return acquire_together_call(all, request, request.lease, not_after);
      });
    });
    return together_grant_of(last, keys.size());
  }

  GrantReply acquire(const GrantRequest& request) override {
    const LockKeys keys = lock_keys(service_, request.key.str());
    GrantReply not_replicated;
    bool replicas_missing = false;
    const Reply last = on_master(request.give_up_at, [&](Connection& conn) {
      replicas_missing = false;
      const auto send = [&] {
        const ScriptCall acquire =
            acquire_call(keys, request, request.lease, conn.server_time_us(request.give_up_at));
        return run_pipeline(conn, {&acquire}, wait_command());
      };
      std::vector<Reply> replies = send();
      if (late_by_a_stale_clock(conn, replies[0], request.give_up_at)) replies = send();
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
              : fmt::format("WAIT failed: {}", describe(wait));
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
      calls.push_back(
          renew_call(lock_keys(service_, item.key->str()), item.owner, item.ttl, item.token));
    }
    std::vector<const ScriptCall*> pipeline;
    for (const auto& call : calls) pipeline.push_back(&call);
    // On the connection kept for renewals: acquirers holding every shared one (WAIT under
    // contention) must not make leases expire.
    on_master(Clock::now() + config_.command_timeout, ConnectionPool::Lane::kRenewal,
              [&](Connection& conn) {
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

  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return feed().watch(lock_keys(service_, key.str()).channel);
  }

  // With wait_replicas, a grant counts only once WAIT confirms it, which a grant made by
  // someone else's release cannot wait for: waiters then take the lock themselves.
  [[nodiscard]] bool hands_off() const override { return config_.wait_replicas == 0; }
  // Every kind (holders.lua).
  [[nodiscard]] bool supports(LockKind /*kind*/, bool /*fair*/) const override { return true; }

 private:
  Reply on_server_of(std::string_view, Clock::time_point deadline,
                     const ServerCall& call) override {
    return on_master(deadline, [&](Connection& conn) { return call(conn, false); });
  }

  std::shared_ptr<ConnectionPool> known_pool_of(std::string_view) override {
    return locator_->known();
  }

  std::vector<std::string> scan_all(const std::string& match) override {
    std::vector<std::string> found;
    require(
        on_master(Clock::now() + config_.command_timeout,
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
    return on_master(deadline, ConnectionPool::Lane::kShared, call);
  }
  template <typename Call>
  Reply on_master(Clock::time_point deadline, ConnectionPool::Lane lane, const Call& call) {
    MasterLocator::Master master = locator_->current(deadline);
    Reply earlier = Reply::failed(Reply::Status::kNotSent, {});  // what the last master answered
    for (;;) {
      if (!master.pool) {
        Reply none = Reply::failed(
            Reply::Status::kNotSent,
            fmt::format("no master for backend '{}': {}", config_.name, master.error));
        none.follow(earlier);
        return none;
      }
      last_generation_ = master.generation;
      Reply reply = master.pool->run([&](Connection& conn) { return call(conn); }, lane);
      reply.follow(earlier);
      if (!wrong_master(reply) || Clock::now() >= deadline) return reply;
      MasterLocator::Master next = locator_->relocate(master.generation, deadline);
      if (!next.pool || next.generation == master.generation) return reply;
      master = std::move(next);
      earlier = std::move(reply);
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
      feed_ = std::make_unique<ReleaseFeed>(std::vector<std::vector<Endpoint>>{where}, config_,
                                            metrics_);
    } else if (master.pool) {
      feed_->source(0).retarget(master.pool->endpoint());  // no-op unless the master moved
    }
    return *feed_;
  }

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

Engine make_master_backend(const BackendConfig& config, const std::string& service,
                           std::shared_ptr<Metrics> metrics,
                           std::unique_ptr<MasterLocator> locator) {
  return Engine::of(
      std::make_shared<MasterBackend>(config, service, std::move(metrics), std::move(locator)));
}

}  // namespace dlock::internal
