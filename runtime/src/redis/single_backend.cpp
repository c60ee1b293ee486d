#include "redis/single_backend.hpp"

#include <hiredis/hiredis.h>

#include <mutex>

#include "log.hpp"
#include "owner.hpp"
#include "redis/keys.hpp"
#include "redis/pool.hpp"
#include "redis/scripts.hpp"
#include "redis/subscriber.hpp"

namespace dlock::internal {
namespace {

// The fencing counter outlives its lock so that tokens keep growing; after a week idle it
// may go, and tokens then continue from the server clock (see acquire.lua).
constexpr std::string_view kFenceLifetimeMs = "604800000";

std::string millis_text(Millis d) { return std::to_string(d.count()); }

long long element_integer(const Reply& reply, std::size_t i, bool& ok) {
  const redisReply* e = reply.element(i);
  if (e == nullptr || e->type != REDIS_REPLY_INTEGER) {
    ok = false;
    return 0;
  }
  return e->integer;
}

class SingleBackend final : public Backend {
 public:
  SingleBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics)
      : config_(std::move(config)),
        service_(std::move(service)),
        metrics_(std::move(metrics)),
        pool_(config_.endpoints.at(0), config_) {}

  GrantReply acquire(const GrantRequest& request) override {
    const LockKeys keys = lock_keys(service_, request.key.str());
    const std::string lease = millis_text(request.lease);
    const std::string pid = std::to_string(process_id());
    const std::string thread = std::to_string(thread_id());
    std::string not_after;
    Reply reply = pool_.run([&](Connection& conn) {
      not_after = std::to_string(conn.server_time_us(request.give_up_at));
      return run_script(conn, acquire_script(), {keys.lock, keys.fence},
                        {request.owner, lease, not_after, host_name(), pid, thread, request.name,
                         kFenceLifetimeMs});
    });
    GrantReply out;
    if (!reply.ok()) {
      out.kind = GrantReply::Kind::kUnavailable;
      out.outcome_unknown = reply.status() != Reply::Status::kNotSent;
      out.error = reply.error();
      return out;
    }
    bool ok = true;
    const long long code = element_integer(reply, 0, ok);
    const long long value = element_integer(reply, 1, ok);
    if (reply.is_error() || !ok) {
      out.kind = GrantReply::Kind::kUnavailable;
      out.error = reply.is_error() ? std::string(reply.text()) : "unexpected reply to acquire";
      return out;
    }
    if (code == 1) {
      out.kind = GrantReply::Kind::kAcquired;
      out.token = static_cast<std::uint64_t>(value);
    } else if (code == 0) {
      out.kind = GrantReply::Kind::kBusy;
      out.ttl = Millis{std::max(0LL, value)};
    } else {
      out.kind = GrantReply::Kind::kUnavailable;
      out.error = "the server answered after the command timeout; nothing was taken";
    }
    return out;
  }

  void renew(std::vector<RenewItem>& items) override {
    std::vector<LockKeys> keys;
    std::vector<std::string> ttls;
    keys.reserve(items.size());
    ttls.reserve(items.size());
    for (const auto& item : items) {
      keys.push_back(lock_keys(service_, item.key->str()));
      ttls.push_back(millis_text(item.ttl));
    }
    pool_.run([&](Connection& conn) {
      for (std::size_t i = 0; i < items.size(); ++i) {
        append_script(conn, renew_script(), {keys[i].lock}, {items[i].owner, ttls[i]});
      }
      std::vector<std::size_t> unknown_script;
      for (std::size_t i = 0; i < items.size(); ++i) {
        Reply reply = conn.read_reply();
        if (!reply.ok()) {
          for (std::size_t j = i; j < items.size(); ++j) items[j].outcome = RenewOutcome::kUnavailable;
          return reply;
        }
        if (is_noscript(reply)) {
          unknown_script.push_back(i);
        } else {
          items[i].outcome = outcome_of(reply);
        }
      }
      for (std::size_t i : unknown_script) {
        items[i].outcome = outcome_of(run_script(conn, renew_script(), {keys[i].lock},
                                                 {items[i].owner, ttls[i]}));
      }
      return Reply::ok(nullptr);
    });
  }

  ReleaseOutcome release(const Key& key, std::string_view owner, Millis keep_for) noexcept override {
    try {
      const LockKeys keys = lock_keys(service_, key.str());
      const std::string keep = millis_text(keep_for);
      Reply reply = pool_.run([&](Connection& conn) {
        return run_script(conn, release_script(), {keys.lock, keys.channel}, {owner, keep});
      });
      if (!reply.ok() || !reply.is_integer()) return ReleaseOutcome::kUnavailable;
      switch (reply.integer()) {
        case 1: return ReleaseOutcome::kReleased;
        case 2: return ReleaseOutcome::kKept;
        case 0: return ReleaseOutcome::kGone;
        default: return ReleaseOutcome::kTaken;
      }
    } catch (...) {
      return ReleaseOutcome::kUnavailable;
    }
  }

  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return subscriber().watch(lock_keys(service_, key.str()).channel);
  }

  const BackendConfig& config() const override { return config_; }

 private:
  static RenewOutcome outcome_of(const Reply& reply) {
    if (!reply.ok() || !reply.is_integer()) return RenewOutcome::kUnavailable;
    switch (reply.integer()) {
      case 1: return RenewOutcome::kRenewed;
      case 0: return RenewOutcome::kGone;
      default: return RenewOutcome::kTaken;
    }
  }

  Subscriber& subscriber() {
    std::call_once(subscriber_once_, [this] {
      subscriber_ = std::make_unique<Subscriber>(config_.endpoints.at(0), config_, metrics_);
    });
    return *subscriber_;
  }

  const BackendConfig config_;
  const std::string service_;
  const std::shared_ptr<Metrics> metrics_;
  ConnectionPool pool_;
  std::once_flag subscriber_once_;
  std::unique_ptr<Subscriber> subscriber_;
};

}  // namespace

std::shared_ptr<Backend> make_single_backend(const BackendConfig& config, const std::string& service,
                                             std::shared_ptr<Metrics> metrics) {
  return std::make_shared<SingleBackend>(config, service, std::move(metrics));
}

}  // namespace dlock::internal
