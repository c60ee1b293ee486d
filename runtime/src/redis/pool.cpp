#include "redis/pool.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "lease_state.hpp"
#include "log.hpp"

namespace dlock::internal {

namespace {

// `config` with pool_size set: a pool_size left at 0 takes the default for `sharing`.
BackendConfig sized(BackendConfig config, ConnectionPool::Sharing sharing) {
  if (config.pool_size <= 0) {
    config.pool_size =
        sharing == ConnectionPool::Sharing::kShared ? kSharedPoolSize : kExclusivePoolSize;
  }
  return config;
}

}  // namespace

ConnectionPool::ConnectionPool(Endpoint endpoint, BackendConfig config, Sharing sharing)
    : endpoint_(std::move(endpoint)),
      config_(sized(std::move(config), sharing)),
      sharing_(sharing) {}

ConnectionPool::Sharing sharing_for(const BackendConfig& config) noexcept {
  return config.wait_replicas > 0 ? ConnectionPool::Sharing::kExclusive
                                  : ConnectionPool::Sharing::kShared;
}

ConnectionPool::Handle::~Handle() {
  if (pool_ != nullptr && conn_) pool_->give_back(std::move(conn_), lane_);
}

ConnectionPool::Handle& ConnectionPool::Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr && conn_) pool_->give_back(std::move(conn_), lane_);
    pool_ = other.pool_;
    conn_ = std::move(other.conn_);
    reused_ = other.reused_;
    lane_ = other.lane_;
  }
  return *this;
}

void ConnectionPool::give_back(std::shared_ptr<Connection> conn, Lane lane) {
  if (lane == Lane::kRenewal) {
    {
      std::lock_guard lock(mutex_);
      if (conn->broken()) {
        renewal_open_ = false;
      } else {
        renewal_idle_ = std::move(conn);
      }
    }
    opened_.notify_all();
    return;
  }
  // Replies still owed to detached commands: read by the next caller, or by the settler.
  if (!conn->broken() && conn->owed() > 0) settler::watch(weak_from_this());
  if (sharing_ == Sharing::kShared) {
    give_back_shared(std::move(conn));
    return;
  }
  bool pinned = false;
  {
    std::lock_guard lock(mutex_);
    if (conn->broken()) {
      --open_;
    } else {
      idle_.push_back(std::move(conn));
    }
    pinned = !pins_.empty();
  }
  // A pinned thread waits for one connection in particular.
  if (pinned) {
    returned_.notify_all();
  } else {
    returned_.notify_one();
  }
}

ConnectionPool::Pin& ConnectionPool::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    drop();
    pool_ = std::move(other.pool_);
    thread_ = other.thread_;
  }
  return *this;
}

void ConnectionPool::Pin::drop() noexcept {
  const auto pool = pool_.lock();
  pool_.reset();
  if (!pool) return;
  {
    std::lock_guard lock(pool->mutex_);
    const auto it = pool->pins_.find(thread_);
    if (it == pool->pins_.end() || --it->second.count > 0) return;
    pool->pins_.erase(it);
  }
  pool->returned_.notify_all();
}

void ConnectionPool::Pin::hold_off() noexcept {
  const auto pool = pool_.lock();
  if (!pool) return;
  std::lock_guard lock(pool->mutex_);
  const auto it = pool->pins_.find(thread_);
  if (it != pool->pins_.end()) it->second.serial = 0;
}

bool ConnectionPool::send_detached(const std::function<void(Connection&)>& append,
                                   std::function<void(Reply, Pin)> on_reply,
                                   Clock::time_point deadline, std::string& error) {
  std::weak_ptr<ConnectionPool> self = weak_from_this();
  if (self.expired()) {
    error = "the pool is not shared";
    return false;
  }
  Handle conn = take(deadline, error);
  if (!conn) return false;
  append(*conn);
  if (!conn->flush(deadline)) {
    error = conn->error();
    return false;
  }
  const std::uint64_t me = this_thread_token();
  {
    std::lock_guard lock(mutex_);
    Pinned& pin = pins_[me];
    pin.serial = conn->serial();
    ++pin.count;
  }
  // std::function copies what it holds; the pin moves, so it is shared until the reply.
  auto pin = std::make_shared<Pin>(self, me);
  conn->detach_last([on_reply = std::move(on_reply), pin](Reply reply) {
    on_reply(std::move(reply), std::move(*pin));
  });
  settler::watch(self);
  return true;
}

bool ConnectionPool::settle_idle(Clock::time_point owed_before) {
  if (sharing_ == Sharing::kShared) return settle_shared(owed_before);
  std::vector<std::shared_ptr<Connection>> due;
  bool owing = false;
  {
    std::lock_guard lock(mutex_);
    for (auto it = idle_.begin(); it != idle_.end();) {
      if ((*it)->owed() > 0 && (*it)->owed_since() < owed_before) {
        due.push_back(std::move(*it));
        it = idle_.erase(it);
        continue;
      }
      owing = owing || (*it)->owed() > 0;
      ++it;
    }
  }
  for (auto& conn : due) {
    conn->settle(later(Clock::now(), config_.command_timeout));
    give_back(std::move(conn), Lane::kShared);
  }
  return owing;
}

void ConnectionPool::clear() {
  std::vector<std::shared_ptr<Connection>> dropped;
  std::shared_ptr<Connection> renewal;
  std::lock_guard lock(mutex_);
  open_ -= static_cast<int>(idle_.size());
  dropped.swap(idle_);
  for (const Member& member : members_) member.conn->retire();
  prune(dropped);
  if (renewal_idle_) {
    renewal = std::move(renewal_idle_);
    renewal_open_ = false;
  }
}

ConnectionPool::Handle ConnectionPool::take_idle(Lane lane) {
  std::lock_guard lock(mutex_);
  if (lane == Lane::kRenewal) {
    if (!renewal_idle_) return {};
    return Handle(this, std::move(renewal_idle_), true, Lane::kRenewal);
  }
  if (sharing_ == Sharing::kShared) {
    const auto it = std::find_if(members_.begin(), members_.end(), [](const Member& member) {
      return member.users == 0 && lendable(*member.conn);
    });
    if (it == members_.end()) return {};
    ++it->users;
    return Handle(this, it->conn, true);
  }
  if (idle_.empty()) return {};
  auto conn = std::move(idle_.back());
  idle_.pop_back();
  return Handle(this, std::move(conn), true);
}

void ConnectionPool::note_silence() {
  std::lock_guard lock(mutex_);
  silent_ = true;
}

void ConnectionPool::note_answer() {
  std::lock_guard lock(mutex_);
  silent_ = false;
}

bool ConnectionPool::silent() {
  std::lock_guard lock(mutex_);
  return opening_ || silent_;
}

bool ConnectionPool::retire_unless_opening() {
  std::lock_guard lock(mutex_);
  if (opening_) return false;
  retired_ = true;
  return true;
}

void ConnectionPool::open_renewal() {
  {
    std::lock_guard lock(mutex_);
    if (renewal_idle_ || renewal_open_ || opening_ || retired_) return;
    opening_ = true;
  }
  // A previous open still running has passed `opening_ = false`, its last step: waited for.
  const bool started = opener_.start(
      [this] {
        std::string error;
        const auto started_at = Clock::now();
        auto conn = Connection::open(endpoint_, config_, error);
        {
          std::lock_guard lock(mutex_);
          opening_ = false;
          if (conn) {
            renewal_idle_ = std::move(conn);
            renewal_open_ = true;
          } else {
            open_error_ = std::move(error);
          }
          // Opened, or refused sooner than a stopped server makes an open fail (a connect or
          // command timeout): the server is not silent. It answers, or it is gone and the
          // caller's other paths find where it went.
          const auto timeout = std::min(config_.connect_timeout, config_.command_timeout);
          if (conn || Clock::now() - started_at < timeout) silent_ = false;
        }
        opened_.notify_all();
      },
      BackgroundJob::Previous::kWait);
  if (!started) {
    std::lock_guard lock(mutex_);
    opening_ = false;
    open_error_ = fmt::format("cannot start a thread to connect to {}", to_string(endpoint_));
  }
}

ConnectionPool::Handle ConnectionPool::take_renewal(Clock::time_point deadline,
                                                    std::string& error) {
  open_renewal();
  std::unique_lock lock(mutex_);
  if (!silent_) opened_.wait_until(lock, deadline, [this] { return !opening_; });
  if (renewal_idle_) return Handle(this, std::move(renewal_idle_), true, Lane::kRenewal);
  if (opening_) {  // at the deadline: the server stays silent
    silent_ = true;
    error =
        fmt::format("{} did not answer a connect within the renewal round", to_string(endpoint_));
  } else if (renewal_open_ && sharing_ == Sharing::kShared) {
    // On loan (a fallback only: one renewal worker per backend). A shared connection will
    // not do: the round reads it without its lock (fan_out.hpp).
    error = fmt::format("the renewal connection to {} is in use", to_string(endpoint_));
  } else if (renewal_open_) {  // on loan: as take() does, a shared one
    lock.unlock();
    return take(deadline, error);
  } else {
    error = open_error_;
  }
  return {};
}

ConnectionPool::Handle ConnectionPool::take(Clock::time_point deadline, std::string& error,
                                            Lane lane) {
  std::unique_lock lock(mutex_);
  if (lane == Lane::kRenewal) {
    if (renewal_idle_) return Handle(this, std::move(renewal_idle_), true, Lane::kRenewal);
    if (!renewal_open_ && !opening_) {
      renewal_open_ = true;
      lock.unlock();
      auto conn = Connection::open(endpoint_, config_, error);
      if (!conn) {
        std::lock_guard relock(mutex_);
        renewal_open_ = false;
        return {};
      }
      return Handle(this, std::move(conn), false, Lane::kRenewal);
    }
    // Already on loan (each backend has one renewal worker, so this is only a fallback):
    // wait for a shared one like everyone else.
  }
  if (sharing_ == Sharing::kShared) {
    lock.unlock();
    return take_shared(deadline, error);
  }
  if (auto pinned = take_behind_pin(lock, deadline, error)) return std::move(*pinned);
  for (;;) {
    if (!idle_.empty()) return Handle(this, pick_idle(), true);
    if (open_ < config_.pool_size) break;
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= config_.pool_size) {
      error =
          fmt::format("all {} connections to {} are busy", config_.pool_size, to_string(endpoint_));
      return {};
    }
  }
  ++open_;
  lock.unlock();
  auto conn = Connection::open(endpoint_, config_, error);
  if (!conn) {
    lock.lock();
    --open_;
    lock.unlock();
    returned_.notify_one();
    return {};
  }
  return Handle(this, std::move(conn), false);
}

// An idle connection that owes no detached reply if there is one: a reply owed is its
// sender's to wait for, not an unrelated caller's. With mutex_ held, idle_ not empty.
std::shared_ptr<Connection> ConnectionPool::pick_idle() {
  auto it = std::find_if(idle_.rbegin(), idle_.rend(),
                         [](const auto& conn) { return conn->owed() == 0; });
  auto chosen = it == idle_.rend() ? std::prev(idle_.end()) : std::prev(it.base());
  auto conn = std::move(*chosen);
  idle_.erase(chosen);
  return conn;
}

bool ConnectionPool::take_pinned(std::uint64_t serial, Handle& out) {
  if (serial == 0) return false;
  if (sharing_ == Sharing::kShared) {
    const auto it = std::find_if(members_.begin(), members_.end(), [&](const Member& member) {
      return member.conn->serial() == serial;
    });
    if (it == members_.end() || !lendable(*it->conn)) return false;
    ++it->users;
    out = Handle(this, it->conn, true);
    return true;
  }
  const auto it = std::find_if(idle_.begin(), idle_.end(),
                               [&](const auto& conn) { return conn->serial() == serial; });
  if (it == idle_.end()) return false;
  auto conn = std::move(*it);
  idle_.erase(it);
  out = Handle(this, std::move(conn), true);
  return true;
}

Reply ConnectionPool::run(const std::function<Reply(Connection&)>& call, Lane lane) {
  Reply earlier = Reply::failed(Reply::Status::kNotSent, {});
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string error;
    Handle conn = take(Clock::now() + config_.command_timeout, error, lane);
    Reply reply = conn ? call(*conn) : Reply::failed(Reply::Status::kNotSent, error);
    reply.follow(earlier);
    // A reset on a reused socket usually means the server went away while it sat idle.
    // Every dlock script is idempotent for one owner, so one retry on a new connection
    // is safe even if the first request was applied (the retry's reply says so). A reply
    // the caller could not read, on a connection still in step, is no reason to run again.
    const bool stale =
        conn && reply.status() == Reply::Status::kBroken && conn.reused() && conn->broken();
    if (!stale) return reply;
    clear();
    earlier = std::move(reply);
  }
  Reply failed = Reply::failed(Reply::Status::kBroken,
                               fmt::format("connection to {} failed", to_string(endpoint_)));
  failed.follow(earlier);
  return failed;
}

}  // namespace dlock::internal
