// Test harness: a real PostgreSQL server on a free loopback port, in a throw-away directory,
// stopped by process id; and a small synchronous libpq client.
//
//   dlock::test::PostgresServer server;        // nothing runs yet
//   server.start();                            // initdb + postgres on 127.0.0.1:<free port>
//   server.create_database("locks");
//   server.exec("CREATE TABLE t (k text)", "locks");
//   auto rows = server.exec("SELECT k FROM t", "locks");   // vector<vector<string>>
//   std::string dsn = server.dsn("locks");     // postgresql://dlock@127.0.0.1:PORT/locks
//   server.pause();                            // SIGSTOP to the postmaster and its children
//   server.resume();
//   server.restart();                          // SIGKILL, then start on the same port and data
//   server.kill_backends_of("my-app");         // pg_terminate_backend by application_name
//
// The server: `initdb -A trust -U dlock -E UTF8 --locale=C --no-sync`, then postgres with
// fsync, synchronous_commit and full_page_writes off, max_connections=200, its Unix socket in
// the directory and its log (stderr) in DIR/postgres.log. No password: user "dlock" is trusted.
//
// Run as root (CI), initdb and postgres run as the `postgres` system user, else as `nobody`,
// through `setpriv --reuid --regid --clear-groups --pdeathsig SIGKILL` (util-linux): a change
// of user clears the parent-death signal the harness sets, so setpriv sets it again after the
// change. The directory is given to that user, and made under /tmp when $TMPDIR is not
// reachable by it.
//
// Processes: the postmaster is a harness child like a RedisServer (registry, safety nets,
// PR_SET_PDEATHSIG). Its own children (backends, checkpointer, ...) each run in a session of
// their own (postgres calls setsid), so a process-group kill does not reach them; they end by
// themselves when the postmaster dies, and stop() also kills them by pid (from /proc). While
// paused they are stopped and could not notice, so pause() adds them to the registry (the exit
// and signal safety nets kill them; live_child_pids() lists them) and starts a watchdog
// (setpriv --pdeathsig SIGTERM sh) that kills them if the test program dies by SIGKILL.
//
// synchronous_commit=off: a commit is written out by the WAL writer within ~0.6 s, so stop()
// or restart() right after a commit can lose it, as a crash of a real server with that setting
// would. A test whose data must survive restart() commits with `SET synchronous_commit = on`
// in that session, or passes "synchronous_commit=on" in Options::extra_config.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::test {

/// Paths of initdb and postgres found at configure time (DLOCK_PG_INITDB, DLOCK_PG_POSTGRES;
/// Debian's /usr/lib/postgresql/<version>/bin first). Empty when not found.
[[nodiscard]] std::string postgres_initdb_program();
[[nodiscard]] std::string postgres_server_program();

/// Rows of a result, each value as text; SQL NULL is "".
using PostgresRows = std::vector<std::vector<std::string>>;

/// The server answered with an error (its message, with the SQLSTATE, e.g. "42P01").
class PostgresError : public std::runtime_error {
 public:
  PostgresError(const std::string& message, std::string sqlstate)
      : std::runtime_error(message), sqlstate_(std::move(sqlstate)) {}
  [[nodiscard]] const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};

/// Connecting failed, the connection broke, or no answer came within the timeout.
class PostgresIoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A small synchronous client (libpq, non-blocking with a deadline) for setting up and checking
/// tests. Connects on first use; after an I/O error or a timeout the connection is dropped and
/// the next exec connects again (a statement is never sent twice). Not thread-safe.
class PostgresClient {
 public:
  /// `dsn`: a libpq connection string or URI. `timeout` bounds the connect and each exec.
  explicit PostgresClient(std::string dsn, std::string application_name = "dlock-test-harness",
                          std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~PostgresClient();
  PostgresClient(PostgresClient&&) noexcept;
  PostgresClient& operator=(PostgresClient&&) noexcept;
  PostgresClient(const PostgresClient&) = delete;
  PostgresClient& operator=(const PostgresClient&) = delete;

  /// Runs `sql` (one statement or several separated by ';', simple query protocol) and returns
  /// the rows of the last statement that returned rows. Throws PostgresError for an error
  /// answer, PostgresIoError for I/O problems and timeouts.
  PostgresRows exec(const std::string& sql);
  /// True when `SELECT 1` answers within the timeout. Never throws.
  bool ping() noexcept;
  /// The server process serving this connection (pg_backend_pid), connecting if needed.
  [[nodiscard]] int backend_pid();
  [[nodiscard]] bool connected() const;
  /// Drops the connection; the next exec reconnects.
  void disconnect() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// How to run one PostgreSQL server.
struct PostgresServerOptions {
  /// Port to listen on; 0 picks a free one (and another if it is taken before the server binds
  /// it). Once started, the server keeps its port across restarts.
  int port = 0;
  /// Settings "name=value", each passed as `-c name=value` after the harness's own (so they
  /// override them), e.g. "max_locks_per_transaction=128".
  std::vector<std::string> extra_config;
  /// Keep the directory after destruction (also when DLOCK_TEST_KEEP_DIRS=1).
  bool keep_dir = false;
  /// Label used in the directory name and in error messages.
  std::string name = "postgres";
  /// Bound on initdb.
  std::chrono::milliseconds initdb_timeout = std::chrono::seconds(30);
  /// Bound on the wait until the server accepts connections after a start.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(15);
};

/// One PostgreSQL server (postmaster and its children) on 127.0.0.1 with its own directory
/// (mkdtemp) holding data/, postgres.log, initdb.log and the Unix socket. The constructor starts
/// nothing; the destructor stops the server and removes the directory. Not thread-safe;
/// movable, not copyable.
class PostgresServer {
 public:
  using Options = PostgresServerOptions;

  explicit PostgresServer(Options options = {});
  ~PostgresServer();
  PostgresServer(PostgresServer&&) noexcept;
  PostgresServer& operator=(PostgresServer&&) noexcept;
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  /// The first start makes the directory and runs initdb (bounded by initdb_timeout); every
  /// start then runs postgres and waits (bounded by start_timeout) until it is ready and answers
  /// a query. A later start reuses directory, data and port. Throws std::runtime_error with the
  /// log tail on failure, std::logic_error if already running.
  void start();
  /// SIGKILL to the postmaster (its process group) and to each of its children; reaps the
  /// postmaster, waits (bounded) until the children are gone and removes the server's System V
  /// shared-memory segment, which a killed postmaster leaves behind. A crash, as far as the data
  /// is concerned: the next start recovers from the WAL. No-op when not running.
  void stop() noexcept;
  /// stop(), then start() on the same port with the same data: a crashed server coming back.
  void restart();
  /// SIGSTOP to the postmaster, then to each of its children: connections stay open, nothing
  /// answers and no new connection gets through the start-up. Returns once all are stopped.
  void pause();
  /// SIGCONT to all that pause() stopped.
  void resume();

  /// Runs `sql` on `database` through a fresh connection (PostgresClient, application_name
  /// "dlock-test-harness"), bounded by `timeout`.
  PostgresRows exec(const std::string& sql, const std::string& database = "postgres",
                    std::chrono::milliseconds timeout = std::chrono::seconds(5));
  /// CREATE DATABASE "name" (owner dlock).
  void create_database(const std::string& name);
  /// pg_terminate_backend for each client connection with this application_name, waiting up
  /// to 5 s for each to end; returns how many ended.
  int kill_backends_of(const std::string& application_name);
  /// The same for every client connection (a test's PostgresClient too) but the one asking.
  int kill_all_backends();

  /// Whether the postmaster is alive (reaps it and returns false if it has exited).
  [[nodiscard]] bool running();
  [[nodiscard]] bool paused() const;
  /// The postmaster's process id, or -1 when not running.
  [[nodiscard]] pid_t pid() const;
  /// The postmaster and its children (from /proc); empty when not running.
  [[nodiscard]] std::vector<pid_t> process_ids() const;
  /// Always "127.0.0.1".
  [[nodiscard]] std::string host() const;
  /// The listening port; 0 before the first start.
  [[nodiscard]] int port() const;
  /// "postgresql://dlock@127.0.0.1:PORT/DATABASE".
  [[nodiscard]] std::string dsn(const std::string& database = "postgres") const;
  /// Always "dlock" (trusted, superuser).
  [[nodiscard]] std::string user() const;
  /// The directory (also the Unix socket's); empty before the first start.
  [[nodiscard]] const std::filesystem::path& dir() const;
  [[nodiscard]] std::filesystem::path data_dir() const;
  [[nodiscard]] std::filesystem::path log_file() const;
  /// The last `lines` lines of initdb's and the server's output, for failure messages.
  [[nodiscard]] std::string log_tail(std::size_t lines = 30) const;
  [[nodiscard]] const Options& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// For the directory of a server whose test program was killed (so nothing stopped it): removes
/// the System V shared-memory segment its data/postmaster.pid names, if that postmaster has
/// ended, then the directory. Never throws.
void remove_postgres_dir(const std::filesystem::path& dir) noexcept;

}  // namespace dlock::test
