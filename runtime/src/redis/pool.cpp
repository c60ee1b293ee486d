#include "redis/pool.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "log.hpp"

namespace dlock::internal {

ConnectionPool::ConnectionPool(Endpoint endpoint, BackendConfig config)
    : endpoint_(std::move(endpoint)), config_(std::move(config)) {}

ConnectionPool::Handle::~Handle() {
  if (pool_ != nullptr && conn_) pool_->give_back(std::move(conn_), lane_);
}

void ConnectionPool::give_back(std::unique_ptr<Connection> conn, Lane lane) {
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
  {
    std::lock_guard lock(mutex_);
    if (conn->broken()) {
      --open_;
    } else {
      idle_.push_back(std::move(conn));
    }
  }
  returned_.notify_one();
}

void ConnectionPool::clear() {
  std::vector<std::unique_ptr<Connection>> dropped;
  std::unique_ptr<Connection> renewal;
  std::lock_guard lock(mutex_);
  open_ -= static_cast<int>(idle_.size());
  dropped.swap(idle_);
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
  for (;;) {
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Handle(this, std::move(conn), true);
    }
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
    const bool stale = conn && reply.status() == Reply::Status::kBroken && conn.reused() &&
                       conn->broken();
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
