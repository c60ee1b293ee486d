// A bounded, thread-safe pool of connections to one Redis endpoint. Broken connections are
// dropped, and new ones are opened on demand, which is how the pool reconnects.
//
// A shared pool (Sharing::kShared) lends each connection to several threads at once: their
// commands are pipelined on it (Connection::share()), each with its own deadline. A caller
// gets a connection nobody uses if there is one, a new one while fewer than pool_size are
// open, and otherwise the one fewest callers use; it never waits for a connection to come
// back. An exclusive pool lends each connection to one caller at a time, which the
// non-blocking calls of fan_out.hpp need, and so do commands that hold a connection on the
// server (WAIT). Beyond the
// pool_size connections that callers share, one more is kept for the watchdog's renewals
// (Lane::kRenewal), so that acquirers holding every shared connection (waiting on WAIT or
// on a slow server) cannot make leases expire.
//
// A command can also be sent without waiting for its reply (send_detached): the reply is
// read by the connection's next user, or by the settler (settler.hpp). Until it is, the
// sending thread is pinned to that connection, so that its next command is applied after it.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "background_job.hpp"
#include "redis/connection.hpp"
#include "settler.hpp"

namespace dlock::internal {

class ConnectionPool final : public Settleable,
                             public std::enable_shared_from_this<ConnectionPool> {
 public:
  /// Who a connection is for: anyone (acquire, release, admin), or the watchdog's renewals.
  enum class Lane { kShared, kRenewal };
  /// Whether callers share connections (the renewal connection is never shared).
  enum class Sharing { kExclusive, kShared };

  ConnectionPool(Endpoint endpoint, BackendConfig config, Sharing sharing = Sharing::kExclusive);
  /// Destroying a pool waits for a background open (bounded by its connect and command
  /// timeouts).
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  /// A connection on loan; goes back to the pool when destroyed unless it broke.
  class Handle {
   public:
    Handle() = default;
    Handle(ConnectionPool* pool, std::shared_ptr<Connection> conn, bool reused,
           Lane lane = Lane::kShared)
        : pool_(pool), conn_(std::move(conn)), reused_(reused), lane_(lane) {}
    Handle(Handle&&) noexcept = default;
    /// Gives back the connection it had first.
    Handle& operator=(Handle&& other) noexcept;
    ~Handle();
    explicit operator bool() const noexcept { return conn_ != nullptr; }
    Connection* operator->() const noexcept { return conn_.get(); }
    Connection& operator*() const noexcept { return *conn_; }
    /// Whether the connection had served earlier calls (and so may have gone stale).
    [[nodiscard]] bool reused() const noexcept { return reused_; }

   private:
    ConnectionPool* pool_ = nullptr;
    std::shared_ptr<Connection> conn_;
    bool reused_ = false;
    Lane lane_ = Lane::kShared;
  };

  /// An idle connection, or a new one while fewer than pool_size exist; otherwise waits
  /// for one until `deadline`. An empty handle comes with `error` set. kRenewal takes the
  /// renewal connection (opened on first use), or a shared one while that is on loan.
  Handle take(Clock::time_point deadline, std::string& error, Lane lane = Lane::kShared);
  /// An idle connection if there is one (for kRenewal, the renewal connection); never opens
  /// one and never waits.
  Handle take_idle(Lane lane = Lane::kShared);
  /// Starts opening the renewal connection in the background if there is none (an open of
  /// a stopped server costs its connect and command timeouts), so that a round over several
  /// servers opens them all at once.
  void open_renewal();
  /// The renewal connection for a round that must not wait past `deadline`: an idle one, or
  /// the one open_renewal() is opening, waited for until `deadline`. A server that left a
  /// round unanswered (note_silence) is not waited for until a connection to it opens or an
  /// open is refused: an empty handle comes back at once, with `error` set. So a stopped
  /// server holds one round, not every round until its open gives up.
  Handle take_renewal(Clock::time_point deadline, std::string& error);
  /// The server left a renewal round unanswered (or a renewal open still ran at the round's
  /// end): it is silent until it answers a round or a renewal open finishes.
  void note_silence();
  /// The server answered a renewal round: not silent.
  void note_answer();
  /// Unless a background open runs, marks the pool as about to be dropped: open_renewal()
  /// starts none from now on, so that whoever holds the last reference never waits for
  /// one. Returns whether it did.
  [[nodiscard]] bool retire_unless_opening();
  /// Whether the server is silent (note_silence), or a background open runs: calls that
  /// would wait for it are better not made now.
  [[nodiscard]] bool silent();

  /// While it lives, the thread that sent a detached command stays behind it: that thread's
  /// next take() gets the connection the command went on, or waits until no pin is left.
  class Pin {
   public:
    Pin() = default;
    Pin(std::weak_ptr<ConnectionPool> pool, std::uint64_t thread) noexcept
        : pool_(std::move(pool)), thread_(thread) {}
    Pin(Pin&& other) noexcept : pool_(std::move(other.pool_)), thread_(other.thread_) {}
    Pin& operator=(Pin&& other) noexcept;
    ~Pin() { drop(); }
    /// The command was not applied as sent (it is sent again elsewhere): until this pin is
    /// dropped, the thread's next take() waits instead of using that connection.
    void hold_off() noexcept;

   private:
    void drop() noexcept;
    std::weak_ptr<ConnectionPool> pool_;
    std::uint64_t thread_ = 0;
  };

  /// Sends a command (queued by `append`) on the calling thread's connection and returns
  /// without reading its reply. `on_reply` gets the reply, on whichever thread reads it
  /// (it must not throw, and must be quick), with the thread's pin. Returns false, with
  /// `error`, when the command was not sent by `deadline`: nothing was applied. The pool
  /// must be owned by a shared_ptr.
  bool send_detached(const std::function<void(Connection&)>& append,
                     std::function<void(Reply, Pin)> on_reply, Clock::time_point deadline,
                     std::string& error);
  bool settle_idle(Clock::time_point owed_before) override;

  /// Runs `call` on a connection. If a reused connection turns out to be dead before it
  /// could have applied anything (the server restarted, an idle socket was closed), tries
  /// once more on a fresh one.
  Reply run(const std::function<Reply(Connection&)>& call, Lane lane = Lane::kShared);

  [[nodiscard]] const Endpoint& endpoint() const noexcept { return endpoint_; }
  /// Drops every idle connection (after a failover or a server restart); a shared pool's
  /// connections take no new callers and close once their callers are done.
  void clear();

 private:
  void give_back(std::shared_ptr<Connection> conn, Lane lane);
  void give_back_shared(std::shared_ptr<Connection> conn);
  std::shared_ptr<Connection> pick_idle();
  /// The calling thread's connection when it is pinned: false while it is on loan (or, when
  /// shared, retiring). With mutex_ held.
  bool take_pinned(std::uint64_t serial, Handle& out);
  /// A shared pool's take(): see the file comment.
  Handle take_shared(Clock::time_point deadline, std::string& error);
  /// With mutex_ held: removes the shared connections that broke or are retiring and that
  /// nobody uses, into `dropped` (destroyed once mutex_ is let go: their detached replies'
  /// callbacks take it).
  void prune(std::vector<std::shared_ptr<Connection>>& dropped);
  [[nodiscard]] bool done_with(const Connection& conn) const;
  bool settle_shared(Clock::time_point owed_before);
  /// With mutex_ held: for a thread pinned behind its own release, that connection once it
  /// can have it; nothing once the pin is dropped (or if there was none); an empty handle,
  /// with `error`, when `deadline` passed first.
  std::optional<Handle> take_behind_pin(std::unique_lock<std::mutex>& lock,
                                        Clock::time_point deadline, std::string& error);
  /// A shared connection that takes new callers: neither broken nor retiring.
  [[nodiscard]] static bool lendable(const Connection& conn);

  struct Pinned {
    std::uint64_t serial = 0;  // the connection (Connection::serial); 0: none, wait
    int count = 0;             // detached commands of the thread not yet settled
  };

  struct Member {  // a connection of a shared pool
    std::shared_ptr<Connection> conn;
    int users = 0;  // handles out
  };

  const Endpoint endpoint_;
  const BackendConfig config_;
  const Sharing sharing_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::shared_ptr<Connection>> idle_;   // exclusive
  std::vector<Member> members_;                     // shared
  std::unordered_map<std::uint64_t, Pinned> pins_;  // by this_thread_token()
  int open_ = 0;  // idle plus on loan (exclusive), members plus opening (shared)
  std::shared_ptr<Connection> renewal_idle_;  // the renewal connection, when not on loan
  bool renewal_open_ = false;                 // it exists, idle or on loan
  bool silent_ = false;                       // see note_silence()
  bool opening_ = false;                      // opener_ runs
  bool retired_ = false;                      // see retire_unless_opening()
  std::string open_error_;                    // why the last background open failed
  std::condition_variable opened_;            // opener_ finished
  // The background open of a renewal connection; declared last (see its header).
  BackgroundJob opener_{"dlock-connect"};
};

/// How a backend's pools share their connections: a WAIT after each acquire (wait_replicas)
/// holds the connection on the server, and would hold up every command pipelined behind it.
[[nodiscard]] ConnectionPool::Sharing sharing_for(const BackendConfig& config) noexcept;

}  // namespace dlock::internal
