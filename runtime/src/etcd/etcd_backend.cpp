#include "etcd/etcd_backend.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "etcd/etcd_keys.hpp"
#include "log.hpp"
#include "owner.hpp"

namespace dlock::internal {
namespace {

// etcd refuses requests over 1.5 MiB; a key is stored in its holder's value.
constexpr std::size_t kMaxKeyBytes = 256 * 1024;
constexpr std::size_t kMaxNameBytes = 4096;

// etcd's longest lease TTL (about 285 years).
constexpr std::int64_t kMaxTtlSeconds = 9'000'000'000;
constexpr Millis kRetryDelete{1000};
constexpr std::size_t kOpsPerTxn = 64;

std::int64_t seconds_for(Millis lease) {
  return std::clamp<std::int64_t>(lease.count() / 1000 + (lease.count() % 1000 != 0), 1,
                                  kMaxTtlSeconds);
}

ReleaseOutcome deleted_outcome(const pb::TxnResponse& reply, bool maybe_applied) {
  // Not succeeded: the key there is another's, made after this one went.
  const auto deleted = reply.succeeded() && reply.responses_size() > 0
                           ? reply.responses(0).response_delete_range().deleted()
                           : 0;
  // Deleted by an earlier attempt whose answer was lost, most likely.
  return deleted > 0 || maybe_applied ? ReleaseOutcome::kReleased : ReleaseOutcome::kGone;
}

}  // namespace

EtcdBackend::EtcdBackend(const BackendConfig& config, const std::string& service)
    : config_(config),
      base_(config_.root + "/" + service + "/"),
      locks_(base_ + "locks/"),
      runs_(base_ + "runs/"),
      audit_(base_ + "audit/"),
      host_(hex(host_name())),
      channel_(std::make_shared<EtcdChannel>(config_)),
      keeper_([this] { keep_and_reap(); }) {}

EtcdBackend::~EtcdBackend() {
  book_->stop();
  keeper_.join();
}

GrantReply EtcdBackend::unavailable(std::string error, bool unknown) const {
  GrantReply reply;
  reply.kind = GrantReply::Kind::kUnavailable;
  reply.outcome_unknown = unknown;
  reply.error = fmt::format("backend {}: {}", config_.name, error);
  return reply;
}

std::string EtcdBackend::holder_value(const GrantRequest& request) const {
  return fmt::format("{} {} {} {} {} {} {}", request.lease.count(), process_id(), thread_id(),
                     host_, hex(request.name.substr(0, kMaxNameBytes)), hex(request.key.str()),
                     hex(request.owner));
}

std::optional<EtcdHold> EtcdBackend::new_hold(const GrantRequest& request,
                                              const std::string& prefix, Clock::time_point until,
                                              std::string& error) {
  // A hold's key is named by its lease (one hold a lease at a time), so that a lock's keys
  // keep a few names: etcd keeps every name ever deleted under the prefix until a
  // compaction, and each acquire's compare over the prefix walks them.
  const auto key = [&](std::int64_t lease) {
    return hold_key(prefix, request.kind, request.permits, lease);
  };
  const std::int64_t ttl_s = seconds_for(request.lease);
  // Fresh enough that the lease need not be renewed before a third of it has passed.
  const auto fresh_enough = later(Clock::now(), request.lease - request.lease / 3);
  if (const auto free = book_->take_free(ttl_s, fresh_enough)) {
    return EtcdHold{key(free->lease), free->lease, free->ttl_s, 0, free->fresh_until, false, {}};
  }
  const auto sent = Clock::now();
  pb::LeaseGrantResponse granted;
  const grpc::Status status = channel_->grant(ttl_s, granted, until);
  if (!status.ok() || !granted.error().empty()) {
    error = fmt::format("granting a lease: {}",
                        status.ok() ? granted.error() : describe(status));
    return std::nullopt;
  }
  // Filed under the TTL asked, which the next lock of this lease asks too.
  return EtcdHold{key(granted.id()), granted.id(), ttl_s, 0,
                  sent + std::chrono::seconds(granted.ttl()), false, {}};
}

// The acquiring transaction: a waiter queues up unless queued already, and lists the queue
// either way; a try that does not wait puts its key only on a free lock (nothing under the
// prefix), and else reads who is first.
pb::TxnRequest EtcdBackend::acquire_txn(const GrantRequest& request, const EtcdHold& hold,
                                        const std::string& prefix, bool waits) const {
  pb::TxnRequest txn;
  auto* compare = txn.add_compare();
  compare->set_target(pb::Compare::CREATE);
  compare->set_result(pb::Compare::EQUAL);
  compare->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(hold.key);
  put->set_value(holder_value(request));
  put->set_lease(hold.lease);
  // A permit's try lists the queue too: whether fewer than its permits are before its key
  // is no compare etcd offers.
  if (waits || request.kind == LockKind::kPermit) {
    compare->set_key(hold.key);
    *txn.add_success()->mutable_request_range() = queue_range(prefix, 0);
    *txn.add_failure()->mutable_request_range() = queue_range(prefix, 0);
  } else {
    // Free for an exclusive hold: no key; for a shared one: no exclusive key nor permit.
    // Nor the owner's: a try sent again after its first attempt was applied unseen reads it
    // (take_place).
    compare->set_key(prefix);
    compare->set_range_end(request.kind == LockKind::kShared ? writers_end(prefix)
                                                              : prefix_end(prefix));
    if (request.kind == LockKind::kShared) {
      auto* permits = txn.add_compare();
      permits->set_key(prefix + "p");
      permits->set_range_end(prefix + "q");
      permits->set_target(pb::Compare::CREATE);
      permits->set_result(pb::Compare::EQUAL);
      permits->set_create_revision(0);
    }
    auto* mine = txn.add_compare();
    mine->set_key(hold.key);
    mine->set_target(pb::Compare::CREATE);
    mine->set_result(pb::Compare::EQUAL);
    mine->set_create_revision(0);
    *txn.add_failure()->mutable_request_range() = only(hold.key);
    *txn.add_failure()->mutable_request_range() = queue_range(prefix, 1);
  }
  return txn;
}

GrantReply EtcdBackend::acquire(const GrantRequest& request) {
  const auto until = std::min(request.give_up_at, deadline());
  if (request.key.str().size() > kMaxKeyBytes) {
    return unavailable(fmt::format("a key of {} bytes is longer than the {} an etcd backend "
                                   "stores",
                                   request.key.str().size(), kMaxKeyBytes),
                       false);
  }
  auto* watch = request.waiting ? dynamic_cast<EtcdWatch*>(request.watch) : nullptr;
  const std::string prefix = prefix_of(request.key);
  std::optional<EtcdHold> hold = book_->find(request.owner);
  if (watch && hold && hold->waiting && hold->revision != 0) {
    // Queued already: a read tells where it stands, without a write through raft.
    Try t{request, watch, until, prefix, *hold, {}};
    if (auto reply = check_place(t)) return *reply;
    hold = book_->find(request.owner);  // its key went: queue again
  }
  for (int round = 0; round < 3; ++round) {
    std::string error;
    if (!hold && !(hold = new_hold(request, prefix, until, error))) return unavailable(error, false);
    book_->note(request.owner, *hold);
    const pb::TxnRequest txn = acquire_txn(request, *hold, prefix, watch != nullptr);
    bool maybe_applied = false;
    pb::TxnResponse reply;
    const grpc::Status status = channel_->txn(txn, reply, until, &maybe_applied);
    if (maybe_applied && !hold->in_doubt) {
      hold->in_doubt = true;
      book_->note(request.owner, *hold);
    }
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      book_->take(request.owner);  // its lease expired: queue again on a new one
      hold.reset();
      continue;
    }
    if (!status.ok()) {
      // A key that may exist stays in the book, for the owner-checked release to find.
      if (!maybe_applied && hold->revision == 0 && !hold->waiting) {
        book_->take(request.owner);
        book_->let_go(*hold);
      }
      return unavailable(describe(status), maybe_applied);
    }
    Try t{request, watch, until, prefix, *hold, std::move(reply)};
    return take_place(t);
  }
  return unavailable(fmt::format("the leases for {} kept expiring", printable(prefix)), false);
}

// What the transaction found. A waiter, or a permit, finds where its key stands in the
// lock's keys (stand). A try of a lock is granted by the transaction, or by an earlier
// attempt applied unseen (its key was there); else it made no key, and is refused when the
// first key is a permit's.
GrantReply EtcdBackend::take_place(Try& t) {
  const auto& listed = t.reply.responses(t.reply.responses_size() - 1).response_range();
  if (t.watch || t.request.kind == LockKind::kPermit) return stand(t, listed);
  if (t.reply.succeeded()) return granted(t, t.reply.header().revision());
  const auto& own = t.reply.responses(0).response_range();
  if (own.kvs_size() == 1) return granted(t, own.kvs(0).create_revision());
  // Nothing was made: the lease goes back for the next lock (or is revoked, in doubt).
  book_->take(t.request.owner);
  book_->let_go(t.hold);
  GrantReply reply;
  reply.kind = GrantReply::Kind::kBusy;
  if (listed.kvs_size() == 0) return reply;
  reply.last_token = static_cast<std::uint64_t>(listed.kvs(0).create_revision());
  const Queued first = kind_of_key(listed.kvs(0).key(), t.prefix);
  if (first.permits != 0) {
    reply.kind = GrantReply::Kind::kRefused;
    reply.error = held_as(first);
  }
  return reply;
}

GrantReply EtcdBackend::granted(Try& t, std::int64_t token) {
  t.hold.revision = token;
  t.hold.waiting = false;
  if (t.watch) t.watch->settled();
  GrantReply reply;
  reply.kind = GrantReply::Kind::kAcquired;
  reply.token = static_cast<std::uint64_t>(token);
  const auto now = Clock::now();
  // Granted now, though a reused lease (or a waiter's, kept alive while it waited) may have
  // less than the lease left: valid until then, unless renewed; min_hold and max_hold still
  // count from now.
  const Millis left = std::clamp(std::chrono::duration_cast<Millis>(t.hold.fresh_until - now),
                                 Millis{1}, t.request.lease);
  if (left < t.request.lease) reply.valid_for = left;
  // Deleted by this process when the holder's validity ends unrenewed: etcd itself would
  // wait for the lease's whole seconds.
  t.hold.delete_at = later(now, left);
  book_->note(t.request.owner, t.hold);
  return reply;
}

void EtcdBackend::renew(std::vector<RenewItem>& items) {
  for (auto& item : items) item.outcome = RenewOutcome::kUnavailable;
  if (items.empty()) return;
  const auto sent = Clock::now();
  const auto until = renewal_until(items, sent, deadline());
  // Each hold's lease is kept alive, then its key must still be there (a key deleted by
  // hand, or by a forced release, leaves its lease alive).
  std::vector<std::optional<EtcdHold>> holds(items.size());
  std::vector<std::int64_t> leases;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < items.size(); ++i) {
    holds[i] = book_->find(items[i].owner);
    if (!holds[i] || holds[i]->revision == 0) {
      items[i].outcome = RenewOutcome::kGone;
      holds[i].reset();
      continue;
    }
    leases.push_back(holds[i]->lease);
    keys.push_back(holds[i]->key);
  }
  if (leases.empty()) return;
  const auto ttls = channel_->keep_alive(leases, until);
  if (!ttls) return;
  const auto revisions = created_at(keys, until);
  if (!revisions) return;
  std::size_t at = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!holds[i]) continue;
    const std::int64_t ttl_s = (*ttls)[at];
    const bool there = (*revisions)[at++] == holds[i]->revision;
    // Unless released, or deleted by the reaper, meanwhile.
    if (there && ttl_s > 0 &&
        book_->kept(items[i].owner, holds[i]->lease, sent, ttl_s, later(sent, items[i].ttl))) {
      items[i].outcome = RenewOutcome::kRenewed;
    } else {
      items[i].outcome = RenewOutcome::kGone;
    }
  }
}

// The create revision of each key (0: none), read in transactions of at most kOpsPerTxn
// ranges (etcd refuses more than --max-txn-ops, 128 by default).
std::optional<std::vector<std::int64_t>> EtcdBackend::created_at(
    const std::vector<std::string>& keys, Clock::time_point until) {
  std::vector<std::int64_t> revisions;
  for (std::size_t from = 0; from < keys.size(); from += kOpsPerTxn) {
    pb::TxnRequest check;
    const std::size_t to = std::min(keys.size(), from + kOpsPerTxn);
    for (std::size_t i = from; i < to; ++i) {
      auto* range = check.add_success()->mutable_request_range();
      range->set_key(keys[i]);
      range->set_keys_only(true);
    }
    pb::TxnResponse checked;
    const grpc::Status status = channel_->txn(check, checked, until);
    if (!status.ok()) {
      log(LogLevel::kDebug, "backend {}: renewal check: {}", config_.name, describe(status));
      return std::nullopt;
    }
    for (const auto& response : checked.responses()) {
      const auto& found = response.response_range();
      revisions.push_back(found.kvs_size() == 1 ? found.kvs(0).create_revision() : 0);
    }
  }
  return revisions;
}

ReleaseOutcome EtcdBackend::release(const Key& /*key*/, std::string_view owner,
                                    Millis keep_for) noexcept {
  try {
    const auto until = deadline();
    std::optional<EtcdHold> hold = book_->take(owner);
    // Not in the book: never made (a try that did not get through), or deleted by the
    // reaper when its validity ended.
    if (!hold) return ReleaseOutcome::kGone;
    if (keep_for > Millis{0}) return keep_until(owner, hold->key, hold, keep_for, until);
    pb::TxnResponse reply;
    bool maybe_applied = false;
    const grpc::Status status =
        channel_->txn(delete_of(hold->key, hold->revision), reply, until, &maybe_applied);
    if (!status.ok()) {
      // The key goes with its lease: revoked while it may live.
      book_->revoke(hold->lease, hold->fresh_until);
      return ReleaseOutcome::kUnavailable;
    }
    const ReleaseOutcome outcome = deleted_outcome(reply, maybe_applied);
    hold->in_doubt |= maybe_applied || hold->revision == 0;
    if (outcome == ReleaseOutcome::kReleased) {
      book_->let_go(*hold);
    } else {
      book_->revoke(hold->lease, hold->fresh_until);  // it may have gone with its lease
    }
    return outcome;
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

// A release before min_hold ends: the key moves to a lease of its own that runs out then.
ReleaseOutcome EtcdBackend::keep_until(std::string_view owner, const std::string& key,
                                       std::optional<EtcdHold> hold, Millis keep_for,
                                       Clock::time_point until) {
  pb::LeaseGrantResponse granted;
  const auto sent = Clock::now();
  grpc::Status status = channel_->grant(seconds_for(keep_for), granted, until);
  if (!status.ok() || !granted.error().empty()) {
    if (hold) book_->note(owner, *hold);  // still the holder's, as far as is known
    return ReleaseOutcome::kUnavailable;
  }
  pb::TxnRequest txn;
  auto* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(pb::Compare::CREATE);
  compare->set_result(pb::Compare::GREATER);
  compare->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_ignore_value(true);
  put->set_lease(granted.id());
  pb::TxnResponse reply;
  status = channel_->txn(txn, reply, until);
  const EtcdHold kept{key, granted.id(), seconds_for(keep_for), 0,
                      sent + std::chrono::seconds(granted.ttl()), false, {}};
  if (!status.ok()) {
    book_->revoke(granted.id(), kept.fresh_until);
    if (hold) book_->revoke(hold->lease, hold->fresh_until);
    return ReleaseOutcome::kUnavailable;
  }
  if (!reply.succeeded()) {
    book_->let_go(kept);
    return ReleaseOutcome::kGone;
  }
  if (hold) {
    // The kept key still bears the name of the hold's lease: that lease goes, rather than to
    // this process's next lock of the key, whose key would then be this one.
    book_->revoke(hold->lease, hold->fresh_until);
    // On time while this process lives; with its lease (whole seconds) if it does not.
    book_->doom(key, hold->revision, later(Clock::now(), keep_for), kept.fresh_until);
  }
  return ReleaseOutcome::kKept;
}

// Keeps alive the leases of keys queued behind another holder (the watchdog renews held
// locks only), and deletes the keys whose holder's validity ended unrenewed and those
// whose min_hold ended.
void EtcdBackend::keep_and_reap() {
  for (;;) {
    const auto work = book_->wait_for_work();
    if (work.empty()) return;
    // One deadline for the round, and none of it after stop().
    const auto until = deadline();
    if (!work.keep.empty()) {
      std::vector<std::int64_t> leases;
      for (const auto& [owner, lease] : work.keep) leases.push_back(lease);
      const auto sent = Clock::now();
      // On failure: again in a third of the TTL, while the lease may still live.
      if (const auto ttls = channel_->keep_alive(leases, until)) {
        for (std::size_t i = 0; i < work.keep.size(); ++i) {
          book_->kept(work.keep[i].first, work.keep[i].second, sent, (*ttls)[i]);
        }
      }
    }
    for (const auto& [lease, until_gone] : work.revoke) {
      if (book_->stopped()) return;
      const grpc::Status status = channel_->revoke(lease, until);
      const auto retry_at = later(Clock::now(), kRetryDelete);
      if (member_trouble(status) && retry_at < until_gone) book_->revoke(lease, until_gone);
    }
    for (const EtcdDoomed& doomed : work.remove) {
      if (book_->stopped()) return;
      const pb::TxnRequest txn = delete_of(doomed.key, doomed.revision);
      pb::TxnResponse reply;
      const auto retry_at = later(Clock::now(), kRetryDelete);
      if (!channel_->txn(txn, reply, until).ok() && retry_at < doomed.until) {
        book_->doom(doomed.key, doomed.revision, retry_at, doomed.until);
      }
    }
  }
}

Engine make_etcd_backend(const BackendConfig& config, const std::string& service,
                         std::shared_ptr<Metrics>) {
  if (config.endpoints.empty()) {
    throw ConfigError(fmt::format(
        "backends.{}: an etcd backend needs endpoints (the cluster's members)", config.name));
  }
  if (config.root.empty() || config.root.front() != '/' || config.root.back() == '/') {
    throw ConfigError(fmt::format("backends.{}.root: '{}' is not a key prefix like /dlock",
                                  config.name, printable(config.root)));
  }
  if (config.tls.enabled && !config.tls.verify) {
    throw ConfigError(fmt::format(
        "backends.{}.tls.verify: an etcd backend always verifies the members' certificates",
        config.name));
  }
  return Engine::of(std::make_shared<EtcdBackend>(config, service));
}

}  // namespace dlock::internal
