#include "etcd/etcd_backend.hpp"

#include <fmt/format.h>

#include <algorithm>

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

std::int64_t seconds_for(Millis lease) {
  return std::clamp<std::int64_t>(lease.count() / 1000 + (lease.count() % 1000 != 0), 1,
                                  kMaxTtlSeconds);
}

pb::RangeRequest queue_range(const std::string& prefix, std::int64_t limit) {
  pb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(prefix_end(prefix));
  range.set_sort_order(pb::RangeRequest::ASCEND);
  range.set_sort_target(pb::RangeRequest::CREATE);
  range.set_keys_only(true);
  range.set_limit(limit);
  return range;
}

ReleaseOutcome deleted_outcome(const pb::TxnResponse& reply, bool maybe_applied) {
  const auto deleted = reply.responses(0).response_delete_range().deleted();
  // Deleted by an earlier attempt whose answer was lost, most likely.
  return deleted > 0 || maybe_applied ? ReleaseOutcome::kReleased : ReleaseOutcome::kGone;
}

pb::TxnRequest delete_of(const std::string& key) {
  pb::TxnRequest txn;
  txn.add_success()->mutable_request_delete_range()->set_key(key);
  return txn;
}

}  // namespace

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = prefix.back();
    if (static_cast<unsigned char>(last) != 0xFF) {
      last = static_cast<char>(static_cast<unsigned char>(last) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

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
  return fmt::format("{} {} {} {} {} {}", request.lease.count(), process_id(), thread_id(), host_,
                     hex(request.name.substr(0, kMaxNameBytes)), hex(request.key.str()));
}

std::optional<EtcdHold> EtcdBackend::new_hold(const GrantRequest& request, const std::string& key,
                                              Clock::time_point until, std::string& error) {
  const std::int64_t ttl_s = seconds_for(request.lease);
  // Fresh enough that the lease need not be renewed before a third of it has passed.
  const auto fresh_enough = later(Clock::now(), request.lease - request.lease / 3);
  if (const auto free = book_->take_free(ttl_s, fresh_enough)) {
    return EtcdHold{key, free->lease, free->ttl_s, 0, free->fresh_until, false, {}};
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
  return EtcdHold{key, granted.id(), ttl_s, 0, sent + std::chrono::seconds(granted.ttl()), false,
                  {}};
}

// One acquire call: what its rounds share.
struct EtcdBackend::Try {
  const GrantRequest& request;
  EtcdWatch* watch;  // set when the caller waits: its key then stays in the queue
  Clock::time_point until;
  std::string prefix;
  EtcdHold hold;
  pb::TxnResponse reply;
};

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
  const std::string mine = prefix + std::string(request.owner);
  std::optional<EtcdHold> hold = book_->find(request.owner);
  for (int round = 0; round < 3; ++round) {
    std::string error;
    if (!hold && !(hold = new_hold(request, mine, until, error))) return unavailable(error, false);
    book_->note(request.owner, *hold);
    pb::TxnRequest txn;
    auto* compare = txn.add_compare();
    compare->set_target(pb::Compare::CREATE);
    compare->set_result(pb::Compare::EQUAL);
    compare->set_create_revision(0);
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(mine);
    put->set_value(holder_value(request));
    put->set_lease(hold->lease);
    if (watch) {
      // Queue up unless queued already; either way, list the queue.
      compare->set_key(mine);
      *txn.add_success()->mutable_request_range() = queue_range(prefix, 0);
      *txn.add_failure()->mutable_request_range() = queue_range(prefix, 0);
    } else {
      // Only on a free lock (no key under the prefix); else see who is first.
      compare->set_key(prefix);
      compare->set_range_end(prefix_end(prefix));
      *txn.add_failure()->mutable_request_range() = queue_range(prefix, 1);
    }
    Try t{request, watch, until, prefix, *hold, {}};
    bool maybe_applied = false;
    const grpc::Status status = channel_->txn(txn, t.reply, until, &maybe_applied);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      book_->take(request.owner);  // its lease expired: queue again on a new one
      hold.reset();
      continue;
    }
    if (!status.ok()) {
      // A key that may exist stays in the book, for the owner-checked release to find.
      if (!maybe_applied && !watch) book_->take(request.owner);
      return unavailable(describe(status), maybe_applied);
    }
    return take_place(t);
  }
  return unavailable(fmt::format("the leases for {} kept expiring", printable(prefix)), false);
}

// What the transaction found: the owner's key first under the prefix holds the lock; behind
// another, a waiter keeps its place and watches the key just before its own, and a try that
// does not wait has made no key.
GrantReply EtcdBackend::take_place(Try& t) {
  GrantReply reply;
  const std::string& owner_key = t.hold.key;
  std::int64_t token = 0;
  std::string before;
  std::int64_t before_token = 0;
  if (t.watch || !t.reply.succeeded()) {
    const auto& listed = t.reply.responses(t.reply.responses_size() - 1).response_range();
    for (const auto& kv : listed.kvs()) {
      if (kv.key() == owner_key) {
        token = kv.create_revision();
        break;
      }
      before = kv.key();
      before_token = kv.create_revision();
    }
  } else {
    token = t.reply.header().revision();  // created by this transaction
  }
  if (token != 0 && before.empty()) {
    t.hold.revision = token;
    t.hold.waiting = false;
    if (t.watch) t.watch->settled();
    reply.kind = GrantReply::Kind::kAcquired;
    reply.token = static_cast<std::uint64_t>(token);
    const auto now = Clock::now();
    reply.ttl = std::clamp(std::chrono::duration_cast<Millis>(t.hold.fresh_until - now),
                           Millis{1}, t.request.lease);
    // Deleted by this process when the holder's validity ends unrenewed: etcd itself would
    // wait for the lease's whole seconds.
    t.hold.delete_at = later(now, reply.ttl);
    book_->note(t.request.owner, t.hold);
    return reply;
  }
  reply.kind = GrantReply::Kind::kBusy;
  reply.last_token = static_cast<std::uint64_t>(before_token);
  if (!t.watch) {
    // Nothing was made: the lease goes back for the next lock.
    book_->take(t.request.owner);
    book_->free_lease(t.hold);
    return reply;
  }
  t.hold.revision = token;
  if (!t.hold.waiting) t.hold.kept_at = Clock::now();
  t.hold.waiting = true;
  book_->note(t.request.owner, t.hold);
  t.watch->queued(t.request.owner);
  t.watch->arm(before, t.reply.header().revision());
  return reply;
}

void EtcdBackend::renew(std::vector<RenewItem>& items) {
  for (auto& item : items) item.outcome = RenewOutcome::kUnavailable;
  if (items.empty()) return;
  const auto sent = Clock::now();
  const auto until = renewal_until(items, sent, deadline());
  // Each hold's key must still be there (a key deleted by hand leaves its lease alive), and
  // its lease is kept alive.
  std::vector<std::optional<EtcdHold>> holds(items.size());
  std::vector<std::int64_t> leases;
  pb::TxnRequest check;
  for (std::size_t i = 0; i < items.size(); ++i) {
    holds[i] = book_->find(items[i].owner);
    if (!holds[i] || holds[i]->revision == 0) {
      items[i].outcome = RenewOutcome::kGone;
      holds[i].reset();
      continue;
    }
    auto* range = check.add_success()->mutable_request_range();
    range->set_key(holds[i]->key);
    range->set_keys_only(true);
    leases.push_back(holds[i]->lease);
  }
  if (leases.empty()) return;
  pb::TxnResponse checked;
  if (!channel_->txn(check, checked, until).ok()) return;
  const auto ttls = channel_->keep_alive(leases, until);
  if (!ttls) return;
  std::size_t at = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!holds[i]) continue;
    const auto& found = checked.responses(static_cast<int>(at)).response_range();
    const std::int64_t ttl_s = (*ttls)[at++];
    const bool there = found.kvs_size() == 1 &&
                       found.kvs(0).create_revision() == holds[i]->revision;
    if (there && ttl_s > 0) {
      items[i].outcome = RenewOutcome::kRenewed;
      book_->kept(items[i].owner, holds[i]->lease, sent, ttl_s, later(sent, items[i].ttl));
    } else {
      items[i].outcome = RenewOutcome::kGone;
    }
  }
}

ReleaseOutcome EtcdBackend::release(const Key& key, std::string_view owner,
                                    Millis keep_for) noexcept {
  try {
    const auto until = deadline();
    std::optional<EtcdHold> hold = book_->take(owner);
    const std::string mine = prefix_of(key) + std::string(owner);
    if (keep_for > Millis{0}) return keep_until(owner, mine, hold, keep_for, until);
    pb::TxnResponse reply;
    bool maybe_applied = false;
    const grpc::Status status = channel_->txn(delete_of(mine), reply, until, &maybe_applied);
    if (!status.ok()) {
      // The key goes with its lease, unless the revoke gets through first.
      if (hold) channel_->revoke_later(hold->lease);
      return ReleaseOutcome::kUnavailable;
    }
    const ReleaseOutcome outcome = deleted_outcome(reply, maybe_applied);
    if (hold && outcome == ReleaseOutcome::kReleased && hold->revision != 0) book_->free_lease(*hold);
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
    channel_->revoke_later(granted.id());
    if (hold) channel_->revoke_later(hold->lease);
    return ReleaseOutcome::kUnavailable;
  }
  if (!reply.succeeded()) {
    book_->free_lease(kept);
    return ReleaseOutcome::kGone;
  }
  if (hold) {
    book_->free_lease(*hold);
    // On time while this process lives; with its lease (whole seconds) if it does not.
    if (hold->revision != 0) {
      book_->doom(key, hold->revision, later(Clock::now(), keep_for), kept.fresh_until);
    }
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
    if (!work.keep.empty()) {
      std::vector<std::int64_t> leases;
      for (const auto& [owner, lease] : work.keep) leases.push_back(lease);
      const auto sent = Clock::now();
      // On failure: again in a third of the TTL, while the lease may still live.
      if (const auto ttls = channel_->keep_alive(leases, deadline())) {
        for (std::size_t i = 0; i < work.keep.size(); ++i) {
          book_->kept(work.keep[i].first, work.keep[i].second, sent, (*ttls)[i]);
        }
      }
    }
    for (const EtcdDoomed& doomed : work.remove) {
      pb::TxnRequest txn = delete_of(doomed.key);
      auto* compare = txn.add_compare();
      compare->set_key(doomed.key);
      compare->set_target(pb::Compare::CREATE);
      compare->set_result(pb::Compare::EQUAL);
      compare->set_create_revision(doomed.revision);
      pb::TxnResponse reply;
      const auto retry_at = later(Clock::now(), kRetryDelete);
      if (!channel_->txn(txn, reply, deadline()).ok() && retry_at < doomed.until) {
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
