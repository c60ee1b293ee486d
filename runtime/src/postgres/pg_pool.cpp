// PgPool (pg_connection.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "postgres/pg_connection.hpp"

namespace dlock::internal {
namespace {

// A condition-variable wait needs a deadline it can convert without overflowing.
Clock::time_point bounded(Clock::time_point deadline) {
  return std::min(deadline, later(Clock::now(), std::chrono::hours(24)));
}

}  // namespace

PgPool::PgPool(BackendConfig config, std::shared_ptr<const PgStatements> statements)
    : config_(std::move(config)), statements_(std::move(statements)) {
  if (config_.pool_size <= 0) config_.pool_size = kExclusivePoolSize;
}

PgPool::~PgPool() {
  // Answers still owed (a thread that released and left): read them, bounded, so that their
  // outcome is reported and flush() does not wait for them in vain.
  for (auto& [thread, owed] : owed_) owed.conn->settle();
}

std::unique_ptr<PgConnection> PgPool::settle_mine(std::unique_lock<std::mutex>& lock) {
  const auto me = std::this_thread::get_id();
  // The settler is reading it: its answer is on the way, bounded by the owed deadline.
  settled_.wait(lock, [&] { return settling_.count(me) == 0; });
  auto it = owed_.find(me);
  if (it == owed_.end()) return nullptr;
  // The answers stay owed: the thread's next statement goes out behind them, and they are
  // read on the way to its answer.
  std::unique_ptr<PgConnection> conn = std::move(it->second.conn);
  owed_.erase(it);
  if (!conn->still_connected()) {
    lock.unlock();
    conn->settle();  // reads what came before the end, and reports each
    lock.lock();
    --open_;
    returned_.notify_one();
    return nullptr;
  }
  return conn;
}

bool PgPool::send_detached(PgStatement statement, const std::vector<std::string>& params,
                           Clock::time_point deadline, std::function<void(PgResult)> done) {
  std::string error;
  Handle handle = take(deadline, error, Lane::kShared, false);
  if (!handle) return false;
  // One answer owed per connection at most: the thread's earlier one is read first, so
  // that a slow statement cannot use up the time of those queued behind it.
  if (handle->owing()) handle->settle();
  PgResult failure;
  if (!handle->send(statement, params, deadline, failure, std::move(done))) return false;
  try {
    std::lock_guard lock(mutex_);
    // take() gave this thread its connection back, so it owes on no other one.
    auto slot = owed_.try_emplace(std::this_thread::get_id()).first;
    slot->second = Owed{handle.detach(), Clock::now()};
  } catch (...) {
    // Out of memory: sent all the same, so its answer is read here.
    if (handle) handle->settle();
    return true;
  }
  settler::watch(weak_from_this());
  return true;
}

bool PgPool::settle_idle(Clock::time_point owed_before) {
  std::vector<std::pair<std::thread::id, Owed>> due;
  bool owing = false;
  {
    std::lock_guard lock(mutex_);
    // Out of memory: the rest wait for their threads, or for the next round. With `due`
    // reserved, only the set's insert can throw, before its entry is touched.
    try {
      due.reserve(owed_.size());
      for (auto it = owed_.begin(); it != owed_.end();) {
        if (it->second.sent < owed_before) {
          settling_.insert(it->first);
          due.emplace_back(it->first, std::move(it->second));
          it = owed_.erase(it);
        } else {
          owing = true;
          ++it;
        }
      }
    } catch (...) {
      owing = true;
    }
  }
  for (auto& [thread, owed] : due) {
    owed.conn->settle();
    give_back(std::move(owed.conn), Lane::kShared);
    {
      std::lock_guard lock(mutex_);
      settling_.erase(thread);
    }
    settled_.notify_all();
  }
  return owing;
}

PgPool::Handle& PgPool::Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr && conn_) pool_->give_back(std::move(conn_), lane_);
    pool_ = std::exchange(other.pool_, nullptr);
    conn_ = std::move(other.conn_);
    lane_ = other.lane_;
  }
  return *this;
}

PgPool::Handle::~Handle() {
  if (pool_ != nullptr && conn_) pool_->give_back(std::move(conn_), lane_);
}

std::unique_ptr<PgConnection> PgPool::idle_one(Lane lane) {
  if (lane == Lane::kRenewal) return std::move(renewal_);
  if (idle_.empty()) return nullptr;
  auto conn = std::move(idle_.back());
  idle_.pop_back();
  return conn;
}

PgPool::Handle PgPool::take_idle() {
  std::unique_lock lock(mutex_);
  while (auto conn = idle_one(Lane::kShared)) {
    if (conn->healthy()) return Handle(this, std::move(conn), Lane::kShared);
    --open_;
  }
  return {};
}

PgPool::Handle PgPool::take(Clock::time_point deadline, std::string& error, Lane lane, bool wait) {
  std::unique_lock lock(mutex_);
  if (lane == Lane::kShared && (!owed_.empty() || !settling_.empty())) {
    if (auto mine = settle_mine(lock)) return Handle(this, std::move(mine), Lane::kShared);
  }
  // The renewal lane has its own connection while it is not on loan, else shares.
  if (lane == Lane::kRenewal && renewal_on_loan_) lane = Lane::kShared;
  if (lane == Lane::kRenewal) renewal_on_loan_ = true;
  for (;;) {
    while (auto conn = idle_one(lane)) {
      lock.unlock();
      if (conn->healthy()) return Handle(this, std::move(conn), lane);
      conn.reset();
      lock.lock();
      if (lane == Lane::kShared) --open_;
    }
    if (lane == Lane::kRenewal || open_ < config_.pool_size) {
      if (lane == Lane::kShared) ++open_;
      lock.unlock();
      auto conn = PgConnection::open(
          config_, *statements_, std::min(deadline, later(Clock::now(), config_.connect_timeout)),
          error, PgConnection::Mode::kPipelined);
      if (conn) return Handle(this, std::move(conn), lane);
      lock.lock();
      if (lane == Lane::kShared) --open_;
      if (lane == Lane::kRenewal) renewal_on_loan_ = false;
      returned_.notify_one();
      return {};
    }
    if (!wait) {
      error = fmt::format("no connection free ({} in use)", open_);
      return {};
    }
    if (returned_.wait_until(lock, bounded(deadline)) == std::cv_status::timeout &&
        Clock::now() >= deadline) {
      error = fmt::format("no connection free within the timeout ({} in use)", open_);
      return {};
    }
  }
}

void PgPool::give_back(std::unique_ptr<PgConnection> conn, Lane lane) noexcept {
  // A connection given back with answers owed (its user sent nothing after them): read
  // them now, so that an idle connection has nothing in flight.
  if (conn->owing()) conn->settle();
  std::lock_guard lock(mutex_);
  if (lane == Lane::kRenewal) {
    if (!conn->broken()) renewal_ = std::move(conn);
    renewal_on_loan_ = false;
    return;
  }
  if (conn->broken()) {
    --open_;
  } else {
    idle_.push_back(std::move(conn));
  }
  returned_.notify_one();
}

}  // namespace dlock::internal
