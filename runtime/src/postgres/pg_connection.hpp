// One libpq connection with deadlines, and a bounded pool of them. Every call is bounded by
// the deadline it is given: libpq runs in non-blocking mode and dlock polls its socket, so
// a server that stops answering costs the caller its timeout, never more.
//
//   PgPool pool(config, statements);
//   std::string error;
//   PgPool::Handle conn = pool.take(deadline, error);      // empty handle: `error` says why
//   PgResult result = conn->run(PgStatement::kAcquire, params, deadline);
//   if (result.status == PgResult::Status::kOk) ... result.text(0, 1) ...
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlock/config.hpp"
#include "postgres/pg_statements.hpp"
#include "settler.hpp"
#include "steady.hpp"

struct pg_conn;
struct pg_result;

namespace dlock::internal {

/// The answer to one statement.
class PgResult {
 public:
  enum class Status {
    kOk,       ///< rows (possibly none)
    kRefused,  ///< the server answered with an error: the statement was not applied
    kUnknown,  ///< no answer (timeout, broken connection): it may have been applied
  };
  PgResult() = default;
  PgResult(Status status, std::string error) : status(status), error(std::move(error)) {}
  explicit PgResult(pg_result* result);
  PgResult(PgResult&&) noexcept;
  PgResult& operator=(PgResult&&) noexcept;
  ~PgResult();

  [[nodiscard]] int rows() const;
  /// The value of a cell as text; empty for NULL.
  [[nodiscard]] std::string text(int row, int column) const;
  [[nodiscard]] std::int64_t number(int row, int column) const;
  [[nodiscard]] bool is_null(int row, int column) const;

  Status status = Status::kUnknown;
  std::string error;
  std::string sqlstate;  ///< kRefused: the server's error code

 private:
  pg_result* result_ = nullptr;
};

/// One connection. In pipeline mode (libpq's, PostgreSQL 14+) statements can be sent while
/// the answers of earlier ones are still owed: the server applies them in the order sent,
/// each in a transaction of its own (a Sync after each), and the answers come in that order.
/// An answer owed to someone else (owe()) is read, and handed over, on the way to the next
/// answer the connection's user waits for.
class PgConnection {
 public:
  enum class Mode { kPlain, kPipelined };

  /// Connects, sets the session's statement and lock timeouts to the command timeout and
  /// reads the server's clock. Returns null with `error` set when that cannot be done by
  /// `deadline`.
  static std::unique_ptr<PgConnection> open(const BackendConfig& config,
                                            const PgStatements& statements,
                                            Clock::time_point deadline, std::string& error,
                                            Mode mode = Mode::kPlain);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  /// Runs one of the prepared statements (prepared on first use) with text parameters.
  PgResult run(PgStatement statement, const std::vector<std::string>& params,
               Clock::time_point deadline);
  /// run() in two halves: send() returns once the statement is sent (false: it could not
  /// be, and the connection is broken); collect() reads its answer, after the owed ones.
  /// With `owe_to`, the statement's answer goes to it (it must not throw), read by a later
  /// collect() or settle(), by `deadline` at the latest when settle() reads it.
  bool send(PgStatement statement, const std::vector<std::string>& params,
            Clock::time_point deadline, PgResult& failure,
            std::function<void(PgResult)> owe_to = nullptr);
  PgResult collect(Clock::time_point deadline);
  /// Reads every owed answer and hands each to its `done`.
  void settle() noexcept;
  [[nodiscard]] bool owing() const { return !owed_.empty(); }
  /// Reads what arrived without waiting (owed answers stay to be read) and tells whether
  /// the connection is still there: a session the server ended is known before the next
  /// statement is sent on it.
  bool still_connected();
  /// Runs SQL text without parameters (schema set-up, LISTEN); the last result counts.
  PgResult run_text(const std::string& sql, Clock::time_point deadline);
  /// The server's clock at `when` (a steady time point), in µs since the Unix epoch, as
  /// estimated when the connection was opened or last resynced.
  [[nodiscard]] std::int64_t server_time_us(Clock::time_point when) const;
  /// Reads the server's clock again; false if that failed (the connection is then broken).
  bool resync_clock(Clock::time_point deadline);
  /// When the server's clock was last read.
  [[nodiscard]] Clock::time_point clock_read_at() const { return clock_read_at_; }
  /// Whether it can still be used: not broken, and no unread input (a server that ended the
  /// session while the connection sat idle has sent a termination message).
  [[nodiscard]] bool healthy();
  [[nodiscard]] bool broken() const { return broken_; }
  [[nodiscard]] int socket() const;
  /// Reads what arrived without waiting; false when the connection broke.
  bool consume_input();
  /// The next notification received (LISTEN), as its payload; false when there is none.
  bool next_notification(std::string& payload);

 private:
  /// An answer owed to someone other than the connection's user.
  struct Owed {
    std::function<void(PgResult)> done;
    Clock::time_point deadline;
  };

  PgConnection(pg_conn* conn, const PgStatements& statements);
  bool connect(Clock::time_point deadline, std::string& error);
  bool set_up(const BackendConfig& config, Clock::time_point deadline, std::string& error);
  /// After a statement was queued (`sent`): ends it with a Sync in pipeline mode, and
  /// flushes.
  bool send_and_flush(bool sent, Clock::time_point deadline, std::string& error);
  bool prepare(PgStatement statement, Clock::time_point deadline, PgResult& failure);
  /// Reads the answer of the oldest statement not read yet.
  PgResult read_answer(Clock::time_point deadline);
  /// Reads the owed answers, each by `deadline` if it is earlier than its own.
  void settle_by(Clock::time_point deadline) noexcept;
  /// Waits for the socket to be readable (and writable if `write`); false at `deadline`.
  bool wait(bool write, Clock::time_point deadline) const;
  PgResult fail(std::string error);

  pg_conn* conn_;
  const PgStatements& statements_;
  std::vector<bool> prepared_;
  std::int64_t clock_offset_us_ = 0;  ///< server µs - steady µs
  Clock::time_point clock_read_at_;
  bool broken_ = false;
  bool pipelined_ = false;
  std::deque<Owed> owed_;
};

/// A bounded pool of connections to the database. Callers wait (until their deadline) for
/// a connection when pool_size are on loan; broken ones are dropped and replaced on demand.
/// One more connection is kept for the watchdog's renewals, so that acquirers holding every
/// connection on a slow server cannot make leases expire.
///
/// A statement can be sent without waiting for its answer (send_detached): the connection
/// stays with the sending thread, whose next take() gets that connection back, so the
/// thread's next statement is applied after it. Pool connections are pipelined: that next
/// statement goes out at once, and one wait reads both answers. The settler (settler.hpp)
/// reads the answers nobody came back for.
class PgPool final : public Settleable, public std::enable_shared_from_this<PgPool> {
 public:
  enum class Lane { kShared, kRenewal };

  PgPool(BackendConfig config, std::shared_ptr<const PgStatements> statements);
  ~PgPool() override;
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  class Handle {
   public:
    Handle() = default;
    Handle(PgPool* pool, std::unique_ptr<PgConnection> conn, Lane lane)
        : pool_(pool), conn_(std::move(conn)), lane_(lane) {}
    Handle(Handle&& other) noexcept = default;
    Handle& operator=(Handle&& other) noexcept;
    ~Handle();
    explicit operator bool() const noexcept { return conn_ != nullptr; }
    PgConnection* operator->() const noexcept { return conn_.get(); }
    PgConnection& operator*() const noexcept { return *conn_; }
    /// The connection, no longer to be given back by this handle.
    std::unique_ptr<PgConnection> detach() noexcept {
      pool_ = nullptr;
      return std::move(conn_);
    }

   private:
    PgPool* pool_ = nullptr;
    std::unique_ptr<PgConnection> conn_;
    Lane lane_ = Lane::kShared;
  };

  /// A healthy idle connection, or a new one while fewer than pool_size exist, or (with
  /// `wait`) the next one given back before `deadline`. An empty handle comes with `error`
  /// set. A thread with an answer owed gets that connection once the answer is read.
  Handle take(Clock::time_point deadline, std::string& error, Lane lane = Lane::kShared,
              bool wait = true);
  /// An idle connection if there is one; never opens one and never waits.
  Handle take_idle();
  /// Sends `statement` and returns without its answer, which goes to `done` (once, on this
  /// thread's next take() or on the settler's thread; it must not throw). False when it
  /// could not be sent, or no connection was to be had without waiting for one: then
  /// nothing was applied and `done` is not called.
  bool send_detached(PgStatement statement, const std::vector<std::string>& params,
                     Clock::time_point deadline, std::function<void(PgResult)> done);
  bool settle_idle(Clock::time_point owed_before) override;

  [[nodiscard]] const BackendConfig& config() const { return config_; }
  [[nodiscard]] const PgStatements& statements() const { return *statements_; }

 private:
  /// The connection of a thread that sent statements whose answers are not read yet.
  struct Owed {
    std::unique_ptr<PgConnection> conn;
    Clock::time_point sent;
  };

  void give_back(std::unique_ptr<PgConnection> conn, Lane lane) noexcept;
  std::unique_ptr<PgConnection> idle_one(Lane lane);
  /// The calling thread's connection with answers owed, or null.
  std::unique_ptr<PgConnection> settle_mine(std::unique_lock<std::mutex>& lock);

  BackendConfig config_;
  std::shared_ptr<const PgStatements> statements_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<PgConnection>> idle_;
  std::unique_ptr<PgConnection> renewal_;
  bool renewal_on_loan_ = false;
  int open_ = 0;  ///< shared-lane connections open or being opened, owed ones included
  std::map<std::thread::id, Owed> owed_;
  /// Threads whose owed answer the settler is reading; they wait for it in take().
  std::set<std::thread::id> settling_;
  std::condition_variable settled_;
};

}  // namespace dlock::internal
