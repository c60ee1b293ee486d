// The etcd engine's queue of a lock (etcd_backend.hpp has the tree): where a request's key
// stands among the lock's keys in create order, a waiter's place and watch, and leaving.
#include <fmt/format.h>

#include "etcd/etcd_backend.hpp"
#include "etcd/etcd_keys.hpp"
#include "log.hpp"

namespace dlock::internal {

GrantReply EtcdBackend::stand(Try& t, const pb::RangeResponse& listed) {
  std::vector<Queued> kinds;
  std::optional<std::size_t> place;
  for (const pb::KeyValue& kv : listed.kvs()) {
    if (kv.key() == t.hold.key) place = kinds.size();
    kinds.push_back(kind_of_key(kv.key(), t.prefix));
  }
  // Read in the transaction that put it, or that found it there: not seen only if etcd
  // answered against its own rules.
  if (!place) {
    return unavailable(fmt::format("{} was not among its lock's keys", printable(t.hold.key)),
                       true);
  }
  const Standing standing = standing_of(kinds, *place, t.watch != nullptr && t.hold.waiting);
  const std::int64_t token = listed.kvs(static_cast<int>(*place)).create_revision();
  if (standing.is == Standing::Is::kHolder) return granted(t, token);
  t.hold.revision = token;  // a waiter's place, or the key that leaving deletes
  const pb::KeyValue& first = listed.kvs(0);
  if (standing.is == Standing::Is::kWaiter && t.watch) {
    // A permit may be freed by any key before its own going: it watches them all.
    if (t.request.kind == LockKind::kPermit) {
      return queued(t, t.prefix, first.create_revision(), prefix_end(t.prefix));
    }
    const pb::KeyValue& before = listed.kvs(static_cast<int>(standing.blocker));
    return queued(t, before.key(), before.create_revision());
  }
  leave_queue(t);
  GrantReply reply;
  reply.kind = GrantReply::Kind::kBusy;
  reply.last_token = static_cast<std::uint64_t>(first.create_revision());
  if (standing.is == Standing::Is::kRefused) {
    reply.kind = GrantReply::Kind::kRefused;
    reply.error = held_as(kinds.front());
  }
  return reply;
}

void EtcdBackend::leave_queue(Try& t) {
  if (t.watch) t.watch->settled();
  book_->take(t.request.owner);
  pb::TxnResponse reply;
  // A budget of its own: the acquire's may be spent, and a key left behind would hold up
  // the requests behind it until its lease is revoked.
  bool maybe_applied = false;
  const grpc::Status status =
      channel_->txn(delete_of(t.hold.key, t.hold.revision), reply, deadline(), &maybe_applied);
  t.hold.waiting = false;
  // A copy that may still reach a member (an attempt that timed out): the lease is revoked
  // rather than reused, so that no later key of this name meets it.
  t.hold.in_doubt |= maybe_applied;
  if (status.ok()) {
    book_->let_go(t.hold);
  } else {
    book_->revoke(t.hold.lease, t.hold.fresh_until);  // and the key on it
  }
}

// The owner's key waits: it keeps its place, its lease kept alive by this process, and
// watches from the revision the queue was read at.
GrantReply EtcdBackend::queued(Try& t, const std::string& before, std::int64_t before_token,
                               const std::string& range_end) {
  if (!t.hold.waiting) t.hold.kept_at = Clock::now();
  t.hold.waiting = true;
  book_->note(t.request.owner, t.hold);
  t.watch->queued(t.request.owner);
  t.watch->arm(before, t.reply.header().revision(), range_end);
  GrantReply reply;
  reply.kind = GrantReply::Kind::kBusy;
  reply.last_token = static_cast<std::uint64_t>(before_token);
  return reply;
}

// A queued waiter's place, read (one linearizable read-only transaction): its own key, and
// the lock's keys, where it stands (stand: a key of another kind before it, refused and
// about to go, is waited for too). Nothing when its key is gone (then it queues again).
std::optional<GrantReply> EtcdBackend::check_place(Try& t) {
  pb::TxnRequest txn;
  auto* own = txn.add_success()->mutable_request_range();
  own->set_key(t.hold.key);
  own->set_keys_only(true);
  *txn.add_success()->mutable_request_range() = queue_range(t.prefix, 0);
  const grpc::Status status = channel_->txn(txn, t.reply, t.until);
  if (!status.ok()) return unavailable(describe(status), false);
  const auto& mine = t.reply.responses(0).response_range();
  if (mine.kvs_size() != 1 || mine.kvs(0).create_revision() != t.hold.revision) {
    t.hold.waiting = false;
    t.hold.revision = 0;
    book_->note(t.request.owner, t.hold);
    return std::nullopt;
  }
  return stand(t, t.reply.responses(1).response_range());
}

}  // namespace dlock::internal
