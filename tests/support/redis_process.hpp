// Test harness: real redis-server / redis-sentinel processes and helper programs, started on
// free loopback ports in throw-away directories and stopped by process id.
//
//   dlock::test::RedisServer server;           // nothing runs yet
//   server.start();                            // 127.0.0.1:<free port>, empty, no persistence
//   dlock::test::RedisAdmin admin(server);
//   EXPECT_TRUE(admin.ok({"SET", "k", "v"}));
//   server.pause();                            // SIGSTOP: the server stops answering
//   server.resume();
//   server.restart_empty();                    // same port, empty dataset
//   // With Options::clock_step: the server's wall clock (TIME, key expiry) steps; its
//   // monotonic clock does not, as with an ntp step.
//   server.step_clock(std::chrono::seconds(3));  // returns once TIME shows it
//
//   dlock::test::ChildProcess worker({"/path/to/worker", "--id", "1"});
//   auto line = worker.read_line(std::chrono::seconds(5));   // std::nullopt on timeout
//
// Every process spawned here is recorded in a process-wide registry. Destructors stop them;
// an atexit handler and a handler for SIGABRT/SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGTERM/SIGINT/
// SIGHUP/SIGQUIT kill whatever is left; and each child carries PR_SET_PDEATHSIG=SIGKILL, so
// even a test program killed with SIGKILL leaves no server behind. (Children are forked by one
// harness thread that lives as long as the process, so starting a server from a short-lived
// test thread is fine.) Each child runs in its own process group.
//
// One file per class: redis_server.cpp, redis_admin.cpp, child_process.cpp; the registry and
// its safety nets in child_registry.cpp; spawning in process_spawn.cpp (process_support.hpp).
//
// With Options::tls the server also listens for TLS on tls_port(), with test_pki()'s
// certificates unless others are given (test_pki.hpp).
//
// Groups (sentinel, cluster, Redlock) build on RedisServer: extra config lines
// (`replicaof`, `sentinel monitor ...`), Mode::sentinel, and `cluster` for a node with its own
// cluster bus port.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;

namespace dlock::test {

/// Path of the redis-server program found at configure time (DLOCK_REDIS_SERVER).
[[nodiscard]] std::string redis_server_program();
/// Path of redis-sentinel, or redis-server when no redis-sentinel was found (it then runs with
/// `--sentinel`).
[[nodiscard]] std::string redis_sentinel_program();
/// Path of redis-cli (DLOCK_REDIS_CLI), or "redis-cli" to be looked up in PATH.
[[nodiscard]] std::string redis_cli_program();

/// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
/// Another process may take it before the caller binds it: callers retry on a bind failure,
/// as RedisServer::start does.
[[nodiscard]] int free_loopback_port();
/// `count` distinct ports on 127.0.0.1 that were free a moment ago (all bound at once, then
/// released), for a group of servers that must know each other's ports before they start.
[[nodiscard]] std::vector<int> free_loopback_ports(std::size_t count);

/// Calls `condition` every `interval` until it returns true or `timeout` has passed; returns
/// its last result. A bounded replacement for sleep-and-hope in tests.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval = std::chrono::milliseconds(20));

/// Process ids spawned by this process (RedisServer, ChildProcess) that have not been reaped.
[[nodiscard]] std::vector<pid_t> live_child_pids();

/// How to run one Redis process.
struct RedisServerOptions {
  enum class Mode { server, sentinel };

  /// server: redis-server with `save ""` and `appendonly no`; sentinel: redis-sentinel (its
  /// config file is rewritten by the sentinel, so it lives in the server's directory).
  Mode mode = Mode::server;
  /// Raw config lines appended to the generated file, e.g. "replicaof 127.0.0.1 6380",
  /// "sentinel monitor mymaster 127.0.0.1 6380 2", "requirepass secret". A line given here
  /// overrides a generated one with the same directive (Redis keeps the last).
  std::vector<std::string> extra_config;
  /// Port to listen on; 0 picks a free one (and picks another if it is taken before the
  /// server binds it). Once started, the server keeps its port across restarts.
  int port = 0;
  /// Cluster node: adds `cluster-enabled yes`, `cluster-config-file nodes.conf` and a
  /// `cluster-port` on a second free port (see RedisServer::bus_port).
  bool cluster = false;
  /// Password of the default user (`requirepass`; for a sentinel also `sentinel
  /// sentinel-pass`). The harness authenticates with it while waiting for the start; use this
  /// rather than a raw requirepass line in extra_config.
  std::string password;
  /// Keep the temporary directory after destruction (also when DLOCK_TEST_KEEP_DIRS=1).
  bool keep_dir = false;
  /// Label used in the directory name and in error messages.
  std::string name = "redis";
  /// Program to run instead of the one found at configure time.
  std::string program;
  /// Run under the clock-step preload (clock_step_preload.c), so that step_clock() can move
  /// the server's wall clock: TIME, redis.call('TIME') and key expiry follow it, the
  /// monotonic clock does not.
  bool clock_step = false;
  /// TLS beside the plaintext port, which stays (RedisAdmin and the start-up PING use it):
  /// `tls-port` on a second free port, kept across restarts like `port` (RedisServer::tls_port).
  struct Tls {
    bool enabled = false;
    /// Empty: test_pki()'s server certificate and key, and its CA (test_pki.hpp).
    std::string cert_file, key_file, ca_file;
    /// `tls-auth-clients yes`: a TLS client must present a certificate the CA signed.
    bool auth_clients = false;
    /// `tls-replication yes`: a replica (and a sentinel) talks TLS to the master's tls-port;
    /// a replica then announces its own tls-port to the master.
    bool replication = false;
    /// `tls-cluster yes`: the cluster bus speaks TLS, and nodes announce their tls-port.
    bool cluster = false;
  } tls;
  /// Bound on the wait until PING answers after a start.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(5);
  /// Bound on the graceful shutdown after SIGTERM; SIGKILL follows.
  std::chrono::milliseconds stop_timeout = std::chrono::seconds(5);
};

/// One redis-server (or redis-sentinel) process on 127.0.0.1 with its own temporary directory
/// (mkdtemp under $TMPDIR or /tmp) holding redis.conf, redis.log and output.log.
/// The constructor starts nothing; the destructor stops the process and removes the directory.
/// Not thread-safe; movable, not copyable.
class RedisServer {
 public:
  using Options = RedisServerOptions;

  explicit RedisServer(Options options = {});
  ~RedisServer();
  RedisServer(RedisServer&&) noexcept;
  RedisServer& operator=(RedisServer&&) noexcept;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  /// Starts the process and waits (bounded by start_timeout) until it answers PING and reports
  /// its own process id. The first start writes the config file; a later start (after stop or
  /// kill) reuses directory, config and port, so state kept on disk (nodes.conf, a sentinel's
  /// rewritten config) survives. Throws std::runtime_error with the log tail on failure and
  /// std::logic_error if already running.
  void start();
  /// SIGTERM (and SIGCONT, in case it is paused), bounded wait, then SIGKILL; reaps the
  /// process. No-op when not running.
  void stop() noexcept;
  /// SIGKILL to the process and its process group (fork children such as an RDB save);
  /// reaps it. No-op when not running.
  void kill() noexcept;
  /// SIGSTOP: the process keeps its port but answers nothing until resume(). Returns once the
  /// kernel reports it stopped.
  void pause();
  /// SIGCONT after pause().
  void resume();
  /// kill(), delete everything in the directory, write a fresh config, start on the same port.
  void restart_empty();

  /// Options::clock_step: steps the server's wall clock by `by` (negative: back) and waits,
  /// bounded by 2 s, until TIME reports the real time plus the sum of the steps so far.
  /// The offset is kept across restarts, as a machine's clock would be. Throws
  /// std::logic_error without Options::clock_step or when not running, std::runtime_error
  /// when TIME does not show the step.
  void step_clock(std::chrono::milliseconds by);
  /// The sum of the steps so far (0 without Options::clock_step).
  [[nodiscard]] std::chrono::milliseconds clock_offset() const;

  /// Whether the process is alive (reaps it and returns false if it has exited).
  [[nodiscard]] bool running();
  [[nodiscard]] bool paused() const;

  /// The listening port; 0 before the first start.
  [[nodiscard]] int port() const;
  /// The cluster bus port (Options::cluster), else 0.
  [[nodiscard]] int bus_port() const;
  /// The TLS port (Options::tls), else 0; 0 before the first start.
  [[nodiscard]] int tls_port() const;
  /// "127.0.0.1:TLSPORT" (port 0 without Options::tls).
  [[nodiscard]] std::string tls_endpoint() const;
  /// "rediss://127.0.0.1:TLSPORT".
  [[nodiscard]] std::string tls_address() const;
  /// The process id, or -1 when not running.
  [[nodiscard]] pid_t pid() const;
  /// Always "127.0.0.1".
  [[nodiscard]] std::string host() const;
  /// "127.0.0.1:PORT", the form used in sentinel and cluster node lists.
  [[nodiscard]] std::string endpoint() const;
  /// "redis://127.0.0.1:PORT", the form used in dlock's YAML `address`.
  [[nodiscard]] std::string address() const;
  /// The temporary directory; empty before the first start.
  [[nodiscard]] const std::filesystem::path& dir() const;
  [[nodiscard]] std::filesystem::path config_file() const;
  [[nodiscard]] std::filesystem::path log_file() const;
  /// The last `lines` lines of the Redis log and of the process's own stdout/stderr, for
  /// failure messages.
  [[nodiscard]] std::string log_tail(std::size_t lines = 30) const;
  [[nodiscard]] const Options& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The server answered with an error reply (text as Redis sent it, e.g. "WRONGTYPE ...").
class RedisError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Connecting failed, the connection broke, or no reply came within the timeout.
class RedisIoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A small synchronous Redis client (hiredis, RESP2) for setting up and checking tests.
/// Connects on first use. After an I/O error or a timeout the connection is dropped and the
/// next command connects again; a kept connection found closed (the server restarted since)
/// is replaced and the command sent once more. Not thread-safe.
class RedisAdmin {
 public:
  /// `timeout` bounds the connect and each command.
  RedisAdmin(std::string host, int port,
             std::chrono::milliseconds timeout = std::chrono::seconds(2));
  explicit RedisAdmin(const RedisServer& server,
                      std::chrono::milliseconds timeout = std::chrono::seconds(2));
  ~RedisAdmin();
  RedisAdmin(RedisAdmin&&) noexcept;
  RedisAdmin& operator=(RedisAdmin&&) noexcept;
  RedisAdmin(const RedisAdmin&) = delete;
  RedisAdmin& operator=(const RedisAdmin&) = delete;

  /// Credentials sent with AUTH on every (re)connect; an empty username means the legacy
  /// single-password form.
  void set_auth(std::string username, std::string password);

  /// Runs one command (arguments are binary safe) and returns its reply as text: a string or
  /// status as is, an integer in decimal, nil as "(nil)", an array as its flattened elements
  /// joined by '\n'. Throws RedisError for an error reply, RedisIoError for I/O problems.
  std::string command(const std::vector<std::string>& argv);
  /// The reply must be an integer.
  long long integer(const std::vector<std::string>& argv);
  /// The reply must be a string or status; nil gives std::nullopt.
  std::optional<std::string> string(const std::vector<std::string>& argv);
  /// The reply must be an array; nested arrays are flattened in order, nil elements become
  /// "", integers their decimal form.
  std::vector<std::string> array(const std::vector<std::string>& argv);
  /// True when the reply is the status "OK"; false for any other non-error reply (e.g. the
  /// nil of a SET NX that did not set).
  bool ok(const std::vector<std::string>& argv);
  /// True when PING answers PONG within the timeout. Never throws.
  bool ping() noexcept;
  /// One `field:value` line of `INFO section`, e.g. info_field("replication", "role").
  std::optional<std::string> info_field(const std::string& section, std::string_view field);
  /// Drops the connection; the next command reconnects.
  void disconnect() noexcept;

  [[nodiscard]] const std::string& host() const { return host_; }
  [[nodiscard]] int port() const { return port_; }

 private:
  struct ReplyDeleter {
    void operator()(void* reply) const noexcept;
  };
  using ReplyPtr = std::unique_ptr<void, ReplyDeleter>;

  ReplyPtr execute(const std::vector<std::string>& argv);
  void connect();
  [[noreturn]] void fail_io(const std::string& what);

  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  std::string username_;
  std::string password_;
  redisContext* context_ = nullptr;
};

/// How ChildProcess runs its program.
struct ChildOptions {
  /// "NAME=value" entries added to (or replacing entries of) the inherited environment.
  std::vector<std::string> env;
  /// Send stderr into the same pipe as stdout (default: stderr is inherited, so it shows in
  /// the test log).
  bool merge_stderr = false;
  /// Working directory; empty: the test's.
  std::string cwd = {};
};

/// A program run as a child: stdin is /dev/null, stdout is piped back to the test.
/// The constructor spawns it and throws std::runtime_error if it cannot be executed; the
/// destructor kills and reaps it if it is still running. Movable, not copyable.
class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> argv, ChildOptions options = {});
  ~ChildProcess();
  ChildProcess(ChildProcess&&) noexcept;
  ChildProcess& operator=(ChildProcess&&) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The next line of output without its line ending; std::nullopt if none is complete within
  /// `timeout`, or at end of output (an unterminated last line is returned once first).
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  /// Everything read but not yet returned by read_line, and clears it.
  std::string take_output();
  /// Sends `sig` to the child (not its group). No-op once it has been reaped.
  void signal(int sig);
  /// The process id (kept after it exits).
  [[nodiscard]] pid_t pid() const;
  /// Whether it is still running (reaps it and returns false if it has exited).
  [[nodiscard]] bool running();
  /// Waits up to `timeout` for the exit, reading its output meanwhile so it cannot block on
  /// a full pipe. Returns the exit code, or 128 + signal number if a signal ended it;
  /// std::nullopt if it is still running.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  /// SIGKILL to the child and its process group; reaps it. No-op once reaped.
  void kill() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The result of run_command.
struct CommandResult {
  int status = 0;      ///< exit code, or 128 + signal number
  std::string output;  ///< everything the program wrote to stdout (and stderr if merged)
};

/// Runs a program to completion (e.g. `redis-cli --cluster create ... --cluster-yes`).
/// Throws std::runtime_error, after killing it, if it runs longer than `timeout`.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          ChildOptions options = {.env = {}, .merge_stderr = true});

}  // namespace dlock::test
