// The shared pool's side of ConnectionPool (pool.hpp): connections lent to several callers
// at once, whose commands are pipelined on them.
#include <fmt/format.h>

#include <algorithm>

#include "lease_state.hpp"
#include "redis/pool.hpp"
#include "steady.hpp"

namespace dlock::internal {

// A retiring connection that still owes detached replies (releases nobody waits for) stays
// until they are read or their time is up: another caller's timeout is no reason to fail
// them.
bool ConnectionPool::done_with(const Connection& conn) const {
  if (conn.broken()) return true;
  if (!conn.retiring()) return false;
  return conn.owed() == 0 || Clock::now() - conn.owed_since() > config_.command_timeout;
}

void ConnectionPool::prune(std::vector<std::shared_ptr<Connection>>& dropped) {
  for (auto it = members_.begin(); it != members_.end();) {
    if (it->users == 0 && done_with(*it->conn)) {
      dropped.push_back(std::move(it->conn));
      it = members_.erase(it);
      --open_;
    } else {
      ++it;
    }
  }
}

bool ConnectionPool::lendable(const Connection& conn) { return !conn.broken() && !conn.retiring(); }

std::optional<ConnectionPool::Handle> ConnectionPool::take_behind_pin(
    std::unique_lock<std::mutex>& lock, Clock::time_point deadline, std::string& error) {
  const std::uint64_t me = this_thread_token();
  for (bool last = false;; last = returned_.wait_until(lock, deadline) == std::cv_status::timeout) {
    const auto pin = pins_.find(me);
    if (pin == pins_.end()) return std::nullopt;
    Handle pinned;
    if (take_pinned(pin->second.serial, pinned)) return pinned;
    if (last) {
      error = fmt::format("a release sent by this thread to {} is still unanswered",
                          to_string(endpoint_));
      return Handle();
    }
  }
}

ConnectionPool::Handle ConnectionPool::take_shared(Clock::time_point deadline, std::string& error) {
  std::vector<std::shared_ptr<Connection>> dropped;  // destroyed after the lock is let go
  std::unique_lock lock(mutex_);
  if (auto pinned = take_behind_pin(lock, deadline, error)) return std::move(*pinned);
  for (;;) {
    prune(dropped);
    Member* best = nullptr;
    int leaving = 0;  // retiring or broken, still in use: not counted against pool_size
    for (Member& member : members_) {
      if (!lendable(*member.conn)) {
        ++leaving;
        continue;
      }
      if (best == nullptr || member.users < best->users) best = &member;
    }
    const bool full = open_ - leaving >= config_.pool_size;
    if (best != nullptr && (best->users == 0 || full)) {
      ++best->users;
      return Handle(this, best->conn, true);
    }
    if (!full) break;
    // Every connection is still being opened.
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout) {
      error = fmt::format("no connection to {} opened in time", to_string(endpoint_));
      return {};
    }
  }
  ++open_;
  lock.unlock();
  std::shared_ptr<Connection> conn = Connection::open(endpoint_, config_, error);
  lock.lock();
  if (!conn) {
    --open_;
    lock.unlock();
    returned_.notify_all();
    return {};
  }
  conn->share(config_.spin);
  members_.push_back(Member{conn, 1});
  lock.unlock();
  returned_.notify_all();
  return Handle(this, std::move(conn), false);
}

void ConnectionPool::give_back_shared(std::shared_ptr<Connection> conn) {
  conn->forget_thread();
  std::vector<std::shared_ptr<Connection>> dropped;  // destroyed after the lock is let go
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(members_.begin(), members_.end(),
                                 [&](const Member& member) { return member.conn == conn; });
    if (it != members_.end()) --it->users;
    prune(dropped);
  }
  returned_.notify_all();
}

bool ConnectionPool::settle_shared(Clock::time_point owed_before) {
  std::vector<std::shared_ptr<Connection>> owing;
  {
    std::lock_guard lock(mutex_);
    for (const Member& member : members_) {
      if (member.conn->owed() > 0) owing.push_back(member.conn);
    }
  }
  bool still = false;
  for (const auto& conn : owing) {
    if (conn->owed_since() < owed_before) {
      (void)conn->settle(later(Clock::now(), config_.command_timeout));
    }
    still = still || (!conn->broken() && conn->owed() > 0);
  }
  if (!owing.empty()) {
    std::vector<std::shared_ptr<Connection>> dropped;
    {
      std::lock_guard lock(mutex_);
      prune(dropped);
    }
    owing.clear();
    returned_.notify_all();  // a pinned thread may go on
  }
  return still;
}

}  // namespace dlock::internal
