// A bounded, thread-safe pool of connections to one Redis endpoint. Broken connections are
// dropped, and new ones are opened on demand, which is how the pool reconnects.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "redis/connection.hpp"

namespace dlock::internal {

class ConnectionPool {
 public:
  ConnectionPool(Endpoint endpoint, BackendConfig config);

  /// A connection on loan; goes back to the pool when destroyed unless it broke.
  class Handle {
   public:
    Handle() = default;
    Handle(ConnectionPool* pool, std::unique_ptr<Connection> conn, bool reused)
        : pool_(pool), conn_(std::move(conn)), reused_(reused) {}
    Handle(Handle&&) noexcept = default;
    Handle& operator=(Handle&&) noexcept = default;
    ~Handle();
    explicit operator bool() const noexcept { return conn_ != nullptr; }
    Connection* operator->() const noexcept { return conn_.get(); }
    Connection& operator*() const noexcept { return *conn_; }
    /// Whether the connection had served earlier calls (and so may have gone stale).
    [[nodiscard]] bool reused() const noexcept { return reused_; }

   private:
    ConnectionPool* pool_ = nullptr;
    std::unique_ptr<Connection> conn_;
    bool reused_ = false;
  };

  /// An idle connection, or a new one while fewer than pool_size exist; otherwise waits
  /// for one until `deadline`. An empty handle comes with `error` set.
  Handle take(Clock::time_point deadline, std::string& error);
  /// An idle connection if there is one; never opens one and never waits.
  Handle take_idle();

  /// Runs `call` on a connection. If a reused connection turns out to be dead before it
  /// could have applied anything (the server restarted, an idle socket was closed), tries
  /// once more on a fresh one.
  Reply run(const std::function<Reply(Connection&)>& call);

  [[nodiscard]] const Endpoint& endpoint() const noexcept { return endpoint_; }
  /// Drops every idle connection (after a failover or a server restart).
  void clear();

 private:
  void give_back(std::unique_ptr<Connection> conn);

  const Endpoint endpoint_;
  const BackendConfig config_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_ = 0;  // idle plus on loan
};

}  // namespace dlock::internal
