// The etcd backend's admin operations (list, inspect, forced release, its audit list) and
// scheduled runs (run records, a member's clock).
//
// etcd keeps no time with a key, and has no clock to ask: audit entries and run records carry
// their times in their values, read from a member's clock (the Date of an HTTP answer, whole
// seconds); when a lock was granted is not known (acquired_at_ms 0). Lease TTLs come in whole
// seconds too: a lock's ttl is the middle of the second etcd gives.
//
//   audit/<revision, 20 digits>   at_ms user host pid note key owner token owner_host
//                                 owner_pid owner_name
//   runs/<digest of key>          started_at_ms finished_at_ms keep_ms key name label owner
//                                 token host pid outcome
//
// (numbers in decimal, text in hex, one space between two fields.)
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <limits>
#include <set>

#include "dlock/admin.hpp"
#include "etcd/etcd_backend.hpp"
#include "log.hpp"

namespace dlock::internal {
namespace {

constexpr std::int64_t kAuditKept = 1000;
// Keys a page of a long listing; a page too large for one gRPC answer (4 MiB) is asked again
// in halves.
constexpr std::int64_t kPageKeys = 256;
constexpr std::int64_t kMaxLeaseSeconds = 9'000'000'000;  // etcd's longest lease

// The fields of a stored value, read in order.
class Fields {
 public:
  explicit Fields(std::string_view value) : rest_(value) {}
  std::string text() { return unhex(next()); }
  long long number() {
    const std::string_view field = next();
    long long value = 0;
    std::from_chars(field.data(), field.data() + field.size(), value);
    return value;
  }

 private:
  std::string_view next() {
    const std::size_t space = std::min(rest_.find(' '), rest_.size());
    const std::string_view field = rest_.substr(0, space);
    rest_.remove_prefix(std::min(space + 1, rest_.size()));
    return field;
  }
  std::string_view rest_;
};

// A condition of `txn`: `key`'s `target` equals what the caller sets on the answer.
pb::Compare* equal(pb::TxnRequest& txn, const std::string& key, pb::Compare::CompareTarget target) {
  auto* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(target);
  compare->set_result(pb::Compare::EQUAL);
  return compare;
}

// Every key under `prefix` in key order, all as of one revision, a page at a time.
grpc::Status scan(EtcdChannel& channel, const std::string& prefix, Clock::time_point until,
                  const std::function<void(const pb::KeyValue&)>& each) {
  pb::RangeRequest range = under(prefix);
  range.set_limit(kPageKeys);
  for (;;) {
    pb::RangeResponse page;
    const grpc::Status status = channel.range(range, page, until);
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && range.limit() > 1) {
      range.set_limit(range.limit() / 2);
      continue;
    }
    if (!status.ok()) return status;
    for (const pb::KeyValue& kv : page.kvs()) each(kv);
    if (!page.more() || page.kvs().empty()) return status;
    if (range.revision() == 0) range.set_revision(page.header().revision());
    range.set_key(page.kvs(page.kvs_size() - 1).key() + '\0');
  }
}

std::int64_t clock_of(EtcdChannel& channel, const std::string& backend, Clock::time_point until) {
  std::string error;
  if (const auto now = channel.wall_clock_ms(until, error)) return *now;
  throw BackendUnavailable(
      fmt::format("backend {}: cannot read a member's clock: {}", backend, error));
}

// What a holder's key says of its lock, but the time it has left (its lease's).
LockInfo lock_in(const pb::KeyValue& kv) {
  Fields fields(kv.value());
  LockInfo info;
  info.lease = Millis{fields.number()};
  info.pid = fields.number();
  info.thread = fields.number();
  info.host = fields.text();
  info.name = fields.text();
  info.key = fields.text();
  info.owner = fields.text();
  info.token = static_cast<std::uint64_t>(kv.create_revision());
  info.acquired_at_ms = 0;  // not known: etcd keeps no time with a key
  // A lock key is put once, when it queues up; only a release before min_hold ends puts it
  // again (on a lease that runs out when min_hold does).
  info.min_hold = kv.version() > 1;
  return info;
}

std::string audit_value(const AuditEntry& who, const LockInfo& removed, std::int64_t at_ms) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {}", at_ms, hex(who.user), hex(who.host),
                     who.pid, hex(who.note), hex(removed.key), hex(removed.owner), removed.token,
                     hex(removed.host), removed.pid, hex(removed.name));
}

// Writes an audit entry and drops the oldest beyond the last kAuditKept.
grpc::Status write_audit(EtcdChannel& channel, const std::string& audit, std::int64_t revision,
                         const std::string& value, Clock::time_point until) {
  pb::TxnRequest txn;
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(fmt::format("{}{:020}", audit, revision));
  put->set_value(value);
  auto* newest = txn.add_success()->mutable_request_range();
  *newest = under(audit);
  newest->set_sort_target(pb::RangeRequest::KEY);
  newest->set_sort_order(pb::RangeRequest::DESCEND);
  newest->set_limit(kAuditKept);
  newest->set_keys_only(true);
  pb::TxnResponse reply;
  const grpc::Status status = channel.txn(txn, reply, until);
  if (!status.ok()) return status;
  const auto& kept = reply.responses(1).response_range();
  if (!kept.more() || kept.kvs().empty()) return status;
  pb::TxnRequest trim;
  auto* older = trim.add_success()->mutable_request_delete_range();
  older->set_key(audit);
  older->set_range_end(kept.kvs(kept.kvs_size() - 1).key());
  return channel.txn(trim, reply, until);
}

AuditEntry audit_entry(const pb::KeyValue& kv, std::size_t prefix_size) {
  Fields fields(kv.value());
  AuditEntry entry;
  entry.id = kv.key().substr(prefix_size);
  entry.at_ms = fields.number();
  entry.user = fields.text();
  entry.host = fields.text();
  entry.pid = fields.number();
  entry.note = fields.text();
  entry.key = fields.text();
  entry.owner = fields.text();
  entry.token = static_cast<std::uint64_t>(fields.number());
  entry.owner_host = fields.text();
  entry.owner_pid = fields.number();
  entry.owner_name = fields.text();
  return entry;
}

std::string run_value(const RunRecord& record, Millis keep) {
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {}", record.started_at_ms,
                     record.finished_at_ms, keep.count(), hex(record.key), hex(record.name),
                     hex(record.label), hex(record.owner), record.token, hex(record.host),
                     record.pid, hex(record.outcome));
}

// A run record as stored; its ttl as of `now_ms` (the server's clock).
RunRecord run_record(const pb::KeyValue& kv, std::int64_t now_ms, Millis* keep = nullptr) {
  Fields fields(kv.value());
  RunRecord record;
  record.started_at_ms = fields.number();
  record.finished_at_ms = fields.number();
  const Millis kept{fields.number()};
  record.key = fields.text();
  record.name = fields.text();
  record.label = fields.text();
  record.owner = fields.text();
  record.token = static_cast<std::uint64_t>(fields.number());
  record.host = fields.text();
  record.pid = fields.number();
  record.outcome = fields.text();
  const std::int64_t since = std::max<std::int64_t>(0, now_ms - record.started_at_ms);
  record.ttl = std::max(Millis{0}, kept - Millis{since});
  if (keep) *keep = kept;
  return record;
}

// Whether `found` (a range of the owner's lock key) says the owner holds the lock with
// `token`: its key is there, created then, and not released (a release before min_hold ends
// puts it again).
bool held(const pb::RangeResponse& found, std::uint64_t token) {
  return found.kvs_size() == 1 &&
         static_cast<std::uint64_t>(found.kvs(0).create_revision()) == token &&
         found.kvs(0).version() == 1;
}

// Puts the run record on `lease` if the lock key is as read and no record exists; else
// answers the lock key and the record as they are.
pb::TxnRequest claim_txn(const pb::KeyValue& lock, const std::string& run, const std::string& value,
                         std::int64_t lease) {
  pb::TxnRequest txn;
  equal(txn, lock.key(), pb::Compare::MOD)->set_mod_revision(lock.mod_revision());
  equal(txn, run, pb::Compare::CREATE)->set_create_revision(0);  // no record
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(run);
  put->set_value(value);
  put->set_lease(lease);
  *txn.add_failure()->mutable_request_range() = only(lock.key());
  *txn.add_failure()->mutable_request_range() = only(run);
  return txn;
}

}  // namespace

std::int64_t EtcdBackend::server_time_ms() { return clock_of(*channel_, config_.name, deadline()); }

std::optional<pb::KeyValue> EtcdBackend::holder_of(const Key& key, Clock::time_point until) {
  pb::RangeRequest range = under(prefix_of(key));
  range.set_sort_target(pb::RangeRequest::CREATE);
  range.set_sort_order(pb::RangeRequest::ASCEND);
  range.set_limit(1);
  pb::RangeResponse reply;
  const grpc::Status status = channel_->range(range, reply, until);
  if (!status.ok()) throw unreachable(status);
  if (reply.kvs().empty()) return std::nullopt;
  return reply.kvs(0);
}

// ttl 0: the lease is gone, and the key with it.
LockInfo EtcdBackend::info_of(const pb::KeyValue& kv, Clock::time_point until) {
  LockInfo info = lock_in(kv);
  info.ttl = Millis{-1};  // a key on no lease (put by hand) does not expire
  if (kv.lease() == 0) return info;
  pb::LeaseTimeToLiveResponse lease;
  const grpc::Status status = channel_->time_to_live(kv.lease(), lease, until);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND || (status.ok() && lease.ttl() < 0)) {
    info.ttl = Millis{0};
    return info;
  }
  if (!status.ok()) throw unreachable(status);
  // TTL is in whole seconds, rounded down: the middle of that second, at most the lease.
  info.ttl = Millis{lease.ttl() * 1000 + 500};
  if (lease.grantedttl() > 0) info.ttl = std::min(info.ttl, Millis{lease.grantedttl() * 1000});
  return info;
}

// The lock of `keys`, in create order: its holders (standing_of) and its queue. A key whose
// lease has just run out is passed over: the next one holds the lock.
std::optional<LockInfo> EtcdBackend::lock_of(const google::protobuf::RepeatedPtrField<pb::KeyValue>& keys,
                                             const std::string& prefix, Clock::time_point until) {
  std::vector<LockInfo> infos;
  std::vector<Queued> kinds;
  for (const pb::KeyValue& kv : keys) {
    LockInfo one = info_of(kv, until);
    if (one.ttl == Millis{0}) continue;
    infos.push_back(std::move(one));
    kinds.push_back(kind_of_key(kv.key(), prefix));
  }
  if (infos.empty()) return std::nullopt;
  // Every lock here is served in arrival order: each waiter keeps its place.
  return lock_of_queue(infos, kinds, std::vector<bool>(infos.size(), true));
}

std::vector<LockInfo> EtcdBackend::list(std::string_view pattern) {
  const auto until = deadline();
  // A lock's keys come together.
  std::vector<google::protobuf::RepeatedPtrField<pb::KeyValue>> locks;
  std::string lock;
  const grpc::Status status = scan(*channel_, locks_, until, [&](const pb::KeyValue& kv) {
    const std::string_view dir = std::string_view(kv.key()).substr(0, kv.key().rfind('/') + 1);
    if (locks.empty() || dir != lock) {
      lock = std::string(dir);
      locks.emplace_back();
    }
    *locks.back().Add() = kv;
  });
  if (!status.ok()) throw unreachable(status);
  std::vector<LockInfo> out;
  for (auto& keys : locks) {
    std::sort(keys.begin(), keys.end(), [](const pb::KeyValue& a, const pb::KeyValue& b) {
      return a.create_revision() < b.create_revision();
    });
    if (!glob_match(pattern, lock_in(keys[0]).key)) continue;
    const std::string prefix = keys[0].key().substr(0, keys[0].key().rfind('/') + 1);
    if (auto info = lock_of(keys, prefix, until)) out.push_back(std::move(*info));
  }
  return out;
}

std::optional<LockInfo> EtcdBackend::inspect(const Key& key) {
  const auto until = deadline();
  const std::string prefix = prefix_of(key);
  pb::RangeRequest range = queue_range(prefix, 0);
  range.set_keys_only(false);
  pb::RangeResponse reply;
  const grpc::Status status = channel_->range(range, reply, until);
  if (!status.ok()) throw unreachable(status);
  return lock_of(reply.kvs(), prefix, until);
}

// A lock held shared, or a semaphore, has several holders: each goes (and is audited) in
// turn, within one command timeout.
std::optional<LockInfo> EtcdBackend::force_release(const Key& key, const AuditEntry& who) {
  // Only the holders there when it began (by their create revisions): one granted meanwhile
  // was created after them.
  const auto until = deadline();
  const std::string prefix = prefix_of(key);
  pb::RangeResponse seen;
  const grpc::Status status = channel_->range(queue_range(prefix, 0), seen, until);
  if (!status.ok()) throw unreachable(status);
  std::vector<Queued> kinds;
  for (const pb::KeyValue& kv : seen.kvs()) kinds.push_back(kind_of_key(kv.key(), prefix));
  std::set<std::int64_t> holders;
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (standing_of(kinds, i).is != Standing::Is::kHolder) continue;
    holders.insert(seen.kvs(static_cast<int>(i)).create_revision());
  }
  std::optional<LockInfo> first = force_release_first(key, who);
  while (first && first->mode != "exclusive" && Clock::now() < until) {
    const auto next = holder_of(key, until);
    if (!next || !holders.contains(next->create_revision())) break;
    if (!force_release_first(key, who)) break;
  }
  return first;
}

std::optional<LockInfo> EtcdBackend::force_release_first(const Key& key, const AuditEntry& who) {
  const std::string prefix = prefix_of(key);
  const auto until = deadline();
  // Read first: a clock that cannot be read leaves the lock alone.
  const std::int64_t at_ms = clock_of(*channel_, config_.name, until);
  while (Clock::now() < until) {  // again while the lock changes under it
    const auto holder = holder_of(key, until);
    if (!holder) return std::nullopt;
    LockInfo removed = info_of(*holder, until);
    const Queued kind = kind_of_key(holder->key(), prefix);
    removed.mode = to_string(kind.kind);
    removed.permits = std::max(0, kind.permits);
    // Only the key as read: one moved to another lease meanwhile (released before its
    // min_hold ends) may have left its old lease to another lock of its process.
    pb::TxnRequest txn;
    equal(txn, holder->key(), pb::Compare::MOD)->set_mod_revision(holder->mod_revision());
    txn.add_success()->mutable_request_delete_range()->set_key(holder->key());
    *txn.add_failure()->mutable_request_range() = only(holder->key());
    pb::TxnResponse reply;
    bool maybe_applied = false;
    const grpc::Status status = channel_->txn(txn, reply, until, &maybe_applied);
    if (!status.ok()) throw unreachable(status);
    // Gone after an attempt that may have deleted it: that attempt's, as far as can be told
    // (looking again would remove the next holder too).
    const bool ours = maybe_applied && reply.responses(0).response_range().kvs().empty();
    if (!reply.succeeded() && !ours) continue;  // released or moved meanwhile: look again
    // The holder's next renewal finds its key gone; the waiters' watches saw the delete. Its
    // lease is left to run out: by the time a revoke arrived, the holder may have released
    // and reused it for another lock.
    log(LogLevel::kWarn,
        "forced release: backend={} key={} owner={} token={} by {}@{} pid {} note=\"{}\"",
        config_.name, printable(removed.key), removed.owner, removed.token, who.user, who.host,
        who.pid, printable(who.note));
    const grpc::Status recorded = write_audit(*channel_, audit_, reply.header().revision(),
                                              audit_value(who, removed, at_ms), until);
    if (!recorded.ok()) {
      log(LogLevel::kWarn, "backend {}: the forced release of {} was not recorded: {}",
          config_.name, printable(removed.key), describe(recorded));
    }
    return removed;
  }
  throw BackendUnavailable(
      fmt::format("backend {}: the lock on {} kept changing", config_.name, printable(key.str())));
}

std::vector<AuditEntry> EtcdBackend::history(std::size_t limit) {
  if (limit == 0) return {};
  pb::RangeRequest range = under(audit_);
  range.set_sort_target(pb::RangeRequest::KEY);
  range.set_sort_order(pb::RangeRequest::DESCEND);
  range.set_limit(static_cast<std::int64_t>(
      std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max())));
  pb::RangeResponse reply;
  const grpc::Status status = channel_->range(range, reply, deadline());
  if (!status.ok()) throw unreachable(status);
  std::vector<AuditEntry> out;
  for (const pb::KeyValue& kv : reply.kvs()) out.push_back(audit_entry(kv, audit_.size()));
  return out;
}

RunClaimReply EtcdBackend::claim_run(const Key& key, const RunRecord& mine, Millis keep) {
  const auto until = deadline();
  // The owner's key, as this process made it (a lease the run's guard holds here).
  const auto hold = book_->find(mine.owner);
  if (!hold || hold->waiting || hold->key.rfind(prefix_of(key), 0) != 0) {
    return {ClaimStatus::kNotHeld, {}};
  }
  pb::RangeResponse lock;
  grpc::Status status = channel_->range(only(hold->key), lock, until);
  if (!status.ok()) throw unreachable(status);
  if (!held(lock, mine.token)) return {ClaimStatus::kNotHeld, {}};
  RunRecord record = mine;
  record.name = lock_in(lock.kvs(0)).name;
  record.outcome = "running";
  record.started_at_ms = clock_of(*channel_, config_.name, until);
  record.finished_at_ms = 0;
  // The record goes with a lease of its keep: whole seconds, rounded up (and etcd may make a
  // short one longer).
  pb::LeaseGrantResponse lease;
  const std::int64_t seconds = keep.count() / 1000 + (keep.count() % 1000 > 0 ? 1 : 0);
  status = channel_->grant(std::clamp<std::int64_t>(seconds, 1, kMaxLeaseSeconds), lease, until);
  if (!status.ok()) throw unreachable(status);
  if (!lease.error().empty()) {
    throw BackendUnavailable(fmt::format("backend {}: {}", config_.name, lease.error()));
  }
  keep = std::max(keep, Millis{lease.ttl() * 1000});
  record.ttl = keep;
  pb::TxnResponse reply;
  bool maybe_applied = false;
  status = channel_->txn(claim_txn(lock.kvs(0), run_of(key), run_value(record, keep), lease.id()),
                         reply, until, &maybe_applied);
  if (!status.ok()) {
    book_->revoke(lease.id(), later(Clock::now(), Millis{lease.ttl() * 1000}));
    throw unreachable(status);
  }
  if (reply.succeeded()) return {ClaimStatus::kClaimed, record};
  const auto& run = reply.responses(1).response_range();
  // Written by an earlier attempt whose answer was lost.
  if (run.kvs_size() == 1 && run.kvs(0).lease() == lease.id()) {
    return {ClaimStatus::kClaimed, record};
  }
  book_->revoke(lease.id(), later(Clock::now(), Millis{lease.ttl() * 1000}));
  const auto& now_lock = reply.responses(0).response_range();
  if (now_lock.kvs_size() != 1 || now_lock.kvs(0).mod_revision() != lock.kvs(0).mod_revision() ||
      run.kvs_size() != 1) {
    return {ClaimStatus::kNotHeld, {}};
  }
  return {ClaimStatus::kAlreadyRan, run_record(run.kvs(0), record.started_at_ms)};
}

bool EtcdBackend::finish_run(const Key& key, std::string_view owner,
                             std::string_view outcome) noexcept {
  try {
    const auto until = deadline();
    const std::string run = run_of(key);
    pb::RangeResponse found;
    if (!channel_->range(only(run), found, until).ok() || found.kvs_size() != 1) return false;
    const pb::KeyValue& kv = found.kvs(0);
    Millis keep{0};
    RunRecord record = run_record(kv, 0, &keep);
    if (record.owner != owner) return false;
    std::string error;
    const auto now = channel_->wall_clock_ms(until, error);
    if (!now) return false;
    // Never before the start, whichever members' clocks the two came from.
    record.finished_at_ms = std::max(*now, record.started_at_ms);
    record.outcome = std::string(outcome);
    const std::string value = run_value(record, keep);
    pb::TxnRequest txn;
    equal(txn, run, pb::Compare::MOD)->set_mod_revision(kv.mod_revision());
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(run);
    put->set_value(value);
    put->set_ignore_lease(true);
    *txn.add_failure()->mutable_request_range() = only(run);
    pb::TxnResponse reply;
    bool maybe_applied = false;
    if (!channel_->txn(txn, reply, until, &maybe_applied).ok()) return false;
    if (reply.succeeded()) return true;
    // Written by an earlier attempt whose answer was lost, perhaps.
    const auto& now_there = reply.responses(0).response_range();
    return maybe_applied && now_there.kvs_size() == 1 && now_there.kvs(0).value() == value;
  } catch (...) {
    return false;
  }
}

std::vector<RunRecord> EtcdBackend::list_runs(std::string_view pattern) {
  const auto until = deadline();
  const std::int64_t now_ms = clock_of(*channel_, config_.name, until);
  std::vector<RunRecord> out;
  const grpc::Status status = scan(*channel_, runs_, until, [&](const pb::KeyValue& kv) {
    RunRecord record = run_record(kv, now_ms);
    if (glob_match(pattern, record.key)) out.push_back(std::move(record));
  });
  if (!status.ok()) throw unreachable(status);
  return out;
}

}  // namespace dlock::internal
