// Renewing the leases of a ZooKeeper backend: each is a znode of this session, checked
// through the leader.
#include <optional>
#include <vector>

#include "log.hpp"
#include "zookeeper/zk_backend.hpp"

namespace dlock::internal {

using namespace zk;

namespace {

// Rounds one renewal makes at most when connections are lost under it (each waits for the
// next connection, and all of them end by the renewal's deadline).
constexpr int kZkRenewRounds = 3;

// The C client fails the requests of a connection it gave up (a silent server) with
// ZOPERATIONTIMEOUT, and those of one that broke with ZCONNECTIONLOSS.
bool connection_lost(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }

}  // namespace

void ZookeeperBackend::renew(std::vector<RenewItem>& items) {
  for (auto& item : items) item.outcome = RenewOutcome::kUnavailable;
  if (items.empty()) return;
  const auto sent = Clock::now();
  const auto until = renewal_until(items, sent, deadline());
  // A connection lost during the round (its server stalled, or it broke) is not left to the
  // watchdog's next try: the round goes again at once through the member the session moves
  // to, while its time lasts. The validity still counts from the first send. A session found expired goes
  // again too: the next round opens a new one, and the items come back gone.
  for (int round = 0; round < kZkRenewRounds; ++round) {
    const int rc = renew_round(items, sent, until);
    if ((!connection_lost(rc) && rc != ZSESSIONEXPIRED) || Clock::now() >= until) return;
    log(LogLevel::kDebug, "backend {}: a renewal lost its connection ({}); it goes again",
        config_.name, zerror(rc));
  }
}

int ZookeeperBackend::renew_round(std::vector<RenewItem>& items, Clock::time_point sent,
                                  Clock::time_point until) {
  std::string error;
  const auto handle = session_->handle(until, error);
  if (!handle) return kNoAnswer;
  // Through the leader first: a member cut off from it would still answer reads, from data
  // that may no longer hold the znode.
  ZkBatch batch;
  const std::size_t synced = batch.sync(*handle, "/");
  std::vector<std::optional<std::size_t>> asked(items.size());
  std::vector<Held> held(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].outcome != RenewOutcome::kUnavailable) continue;  // settled in a round before
    const auto found = book_->find(items[i].owner);
    if (!found || found->generation != handle->generation()) {
      items[i].outcome = RenewOutcome::kGone;  // its session ended, and the znode with it
      continue;
    }
    held[i] = *found;
    asked[i] = batch.exists(*handle, found->path);
  }
  batch.wait(until);
  if (const int rc = batch.answer(synced).rc; rc != ZOK) return rc;
  int lost = ZOK;  // the connection went after the sync's answer, before an item's
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!asked[i]) continue;
    const ZkAnswer& answer = batch.answer(*asked[i]);
    if (connection_lost(answer.rc)) lost = answer.rc;
    if (answer.rc == ZOK && answer.stat.ephemeralOwner == handle->session_id()) {
      items[i].outcome = RenewOutcome::kRenewed;
      // Unless released meanwhile (a min_hold's end is not moved).
      book_->renewed(items[i].owner, held[i], later(sent, items[i].ttl));
    } else if (answer.rc == ZOK || answer.rc == ZNONODE) {
      items[i].outcome = answer.rc == ZOK ? RenewOutcome::kTaken : RenewOutcome::kGone;
      book_->forget(held[i].path);
    }
  }
  return lost;
}

}  // namespace dlock::internal
