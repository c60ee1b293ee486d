// PostgresServer: initdb and postgres in a throw-away directory (postgres_server.hpp).
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "postgres_server.hpp"
#include "process_support.hpp"
#include "redis_process.hpp"

#ifndef DLOCK_PG_INITDB
#define DLOCK_PG_INITDB ""
#endif
#ifndef DLOCK_PG_POSTGRES
#define DLOCK_PG_POSTGRES ""
#endif

namespace dlock::test {

using namespace detail;

namespace {

constexpr const char* kHost = "127.0.0.1";
constexpr const char* kUser = "dlock";
constexpr const char* kHarnessApplication = "dlock-test-harness";
// sockaddr_un::sun_path holds 107 characters; the socket is DIR/.s.PGSQL.<port>.
constexpr std::size_t kSocketPathLimit = 107;

// Who runs initdb and postgres: the test's own user, or (as root, which both refuse) another.
struct RunAs {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};

RunAs run_as() {
  if (::geteuid() != 0) return {};
  for (const char* name : {"postgres", "nobody"}) {
    passwd entry{};
    passwd* found = nullptr;
    std::vector<char> buffer(16384);
    if (::getpwnam_r(name, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
      return {true, entry.pw_uid, entry.pw_gid, name};
    }
  }
  throw std::runtime_error(
      "PostgresServer: running as root, and there is neither a postgres nor a nobody user to run "
      "initdb and postgres as");
}

// Whether `who` can pass through every directory from / down to `dir`.
bool reachable_by(const fs::path& dir, const RunAs& who) {
  fs::path current;
  for (const auto& part : fs::absolute(dir)) {
    current /= part;
    struct stat info {};
    if (::stat(current.c_str(), &info) != 0) return false;
    const bool through = (info.st_mode & S_IXOTH) != 0 ||
                         (info.st_uid == who.uid && (info.st_mode & S_IXUSR) != 0) ||
                         (info.st_gid == who.gid && (info.st_mode & S_IXGRP) != 0);
    if (!through) return false;
  }
  return true;
}

// setpriv sets the parent-death signal after the change of user, which clears the one the
// harness set before exec.
std::vector<std::string> as_user(const RunAs& who, std::vector<std::string> argv) {
  if (!who.drop) return argv;
  std::vector<std::string> full = {"setpriv",        fmt::format("--reuid={}", who.uid),
                                   fmt::format("--regid={}", who.gid), "--clear-groups",
                                   "--pdeathsig",    "SIGKILL",
                                   "--"};
  full.insert(full.end(), std::make_move_iterator(argv.begin()),
              std::make_move_iterator(argv.end()));
  return full;
}

std::string quote_literal(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string quote_identifier(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The lines of data/postmaster.pid: pid, data directory, start time, port, socket directory,
// listen address, "shmem-key shmem-id", status ("starting", "ready", ...).
std::vector<std::string> pid_file_lines(const fs::path& data_dir) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(data_dir / "postmaster.pid"));
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

bool gone_or_zombie(pid_t pid) {
  const char state = process_state(pid);
  return state == '?' || state == 'Z' || state == 'X';
}

// Removes the System V segment postmaster.pid names, which a killed postmaster leaves (the
// POSIX segments live in data/pg_dynshmem, dynamic_shared_memory_type being mmap), once that
// postmaster has ended: `owner` > 0 is the one just killed, else the file's own pid must be
// gone. A dying child may still be attached: the segment then goes with its last detach.
void remove_shared_memory(const fs::path& data_dir, pid_t owner) noexcept {
  try {
    const auto lines = pid_file_lines(data_dir);
    if (lines.size() < 7 || lines[0].empty()) return;
    const bool ended = owner > 0 ? lines[0] == std::to_string(owner)
                                 : gone_or_zombie(static_cast<pid_t>(std::stol(lines[0])));
    key_t key = 0;
    int id = -1;
    if (!ended || !(std::istringstream(lines[6]) >> key >> id)) return;
    shmid_ds info{};
    if (::shmctl(id, IPC_STAT, &info) == 0 && info.shm_perm.__key == key) {
      ::shmctl(id, IPC_RMID, nullptr);
    }
  } catch (const std::exception&) {
  }
}

}  // namespace

std::string postgres_initdb_program() { return DLOCK_PG_INITDB; }
std::string postgres_server_program() { return DLOCK_PG_POSTGRES; }

struct PostgresServer::Impl {
  Options options;
  RunAs user;
  fs::path dir;
  int port = 0;
  bool port_owned = false;  // the server has run on `port`: restarts keep it
  pid_t pid = -1;
  bool paused = false;
  std::vector<pid_t> stopped_children;  // registered while paused
  std::optional<ChildProcess> watchdog;  // while paused

  [[nodiscard]] fs::path data_dir() const { return dir / "data"; }
  [[nodiscard]] fs::path log_file() const { return dir / "postgres.log"; }
  [[nodiscard]] fs::path initdb_log() const { return dir / "initdb.log"; }

  [[nodiscard]] std::string describe() const {
    const std::string as = user.drop ? fmt::format(", as {}", user.name) : "";
    return fmt::format("{} ({} on {}:{}, dir {}{})", options.name, postgres_server_program(),
                       kHost, port, dir.string(), as);
  }

  [[nodiscard]] std::string log_tail(std::size_t lines) const {
    if (dir.empty()) return "(not started)";
    return log_tails({initdb_log(), log_file()}, lines);
  }

  [[nodiscard]] std::string dsn(const std::string& database) const {
    return fmt::format("postgresql://{}@{}:{}/{}", kUser, kHost, port, database);
  }

  PostgresRows exec(const std::string& sql, const std::string& database, milliseconds timeout) {
    return PostgresClient(dsn(database), kHarnessApplication, timeout).exec(sql);
  }

  void make_dir() {
    if (!dir.empty()) return;
    if (postgres_initdb_program().empty() || postgres_server_program().empty()) {
      throw std::runtime_error(
          "PostgresServer: initdb or postgres was not found at configure time (install "
          "postgresql, e.g. with scripts/install-deps, and configure again)");
    }
    user = run_as();
    fs::path base = temp_base();
    if (user.drop && !reachable_by(base, user)) base = "/tmp";
    dir = make_temp_dir(options.name.empty() ? "postgres" : options.name, base);
    if (user.drop && ::chown(dir.c_str(), user.uid, user.gid) != 0) {
      throw_errno(fmt::format("chown {} to {}", dir.string(), user.name));
    }
  }

  void initdb() {
    if (fs::exists(data_dir() / "PG_VERSION")) return;
    const std::vector<std::string> argv = {
        postgres_initdb_program(), "-D", data_dir().string(), "-A", "trust", "-U", kUser,
        "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"};
    CommandResult result;
    try {
      result = run_command(as_user(user, argv), options.initdb_timeout,
                           {.env = {"LC_ALL=C"}, .merge_stderr = true, .cwd = dir.string()});
    } catch (const std::runtime_error& error) {
      throw std::runtime_error(fmt::format("{}: initdb failed: {}", describe(), error.what()));
    }
    std::ofstream(initdb_log(), std::ios::trunc) << result.output;
    if (result.status != 0) {
      throw std::runtime_error(fmt::format("{}: initdb exited with {}\n{}", describe(),
                                           result.status, log_tail(30)));
    }
  }

  [[nodiscard]] std::vector<std::string> server_argv() const {
    const std::string socket_dir =
        dir.string().size() + 16 <= kSocketPathLimit ? quote_identifier(dir.string()) : "";
    std::vector<std::string> settings = {
        "listen_addresses=127.0.0.1",  fmt::format("port={}", port),
        "unix_socket_directories=" + socket_dir,
        "fsync=off",                   "synchronous_commit=off",
        "full_page_writes=off",        "max_connections=200",
        "dynamic_shared_memory_type=mmap", "logging_collector=off"};
    settings.insert(settings.end(), options.extra_config.begin(), options.extra_config.end());
    std::vector<std::string> argv = {postgres_server_program(), "-D", data_dir().string()};
    for (auto& setting : settings) {
      argv.emplace_back("-c");
      argv.push_back(std::move(setting));
    }
    return as_user(user, argv);
  }

  // Reaps the postmaster if it exited (and cleans up after it). True while it runs.
  bool check_running() {
    if (pid <= 0) return false;
    if (child_running(pid)) return true;
    kill_now();
    return false;
  }

  [[nodiscard]] bool says_ready() const {
    const auto lines = pid_file_lines(data_dir());
    return lines.size() >= 8 && lines[0] == std::to_string(pid) && lines[7] == "ready";
  }

  LaunchOutcome await_ready(std::uintmax_t log_offset, std::string& failure) {
    const auto deadline = Clock::now() + options.start_timeout;
    std::string last_error = "no answer";
    for (;;) {
      if (!check_running()) {
        failure = "exited during start-up";
        return read_file(log_file(), log_offset).find("Address already in use") !=
                       std::string::npos
                   ? LaunchOutcome::port_taken
                   : LaunchOutcome::failed;
      }
      if (says_ready()) {
        try {
          if (exec("SELECT 1", "postgres", std::chrono::seconds(2)) == PostgresRows{{"1"}}) {
            return LaunchOutcome::ready;
          }
        } catch (const std::exception& error) {
          last_error = error.what();
        }
      }
      if (Clock::now() >= deadline) {
        failure = fmt::format("not ready within {} ms ({})", options.start_timeout.count(),
                              last_error);
        kill_now();
        return LaunchOutcome::failed;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  LaunchOutcome launch(std::string& failure) {
    const auto log_offset = file_size_or_zero(log_file());
    UniqueFd log(::open(log_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (log.get() < 0) throw_errno(fmt::format("open {}", log_file().string()));
    pid = spawn({server_argv(), {"LC_ALL=C"}, log.get(), log.get(), dir.string()});
    log.reset();
    return await_ready(log_offset, failure);
  }

  void start() {
    if (check_running()) throw std::logic_error(describe() + " is already running");
    make_dir();
    initdb();
    launch_until_ready(
        [&](std::string& failure) {
          if (!port_owned) port = options.port != 0 ? options.port : free_loopback_port();
          return launch(failure);
        },
        [&] { return port_owned || options.port != 0; }, [&] { return describe(); },
        [&] { return log_tail(30); });
    port_owned = true;
  }

  // Kills the postmaster, its children and the watchdog; reaps; cleans what a killed server
  // leaves (shared memory, lock files).
  void kill_now() noexcept {
    if (pid <= 0) return;
    if (is_registered(pid)) {
      ::kill(pid, SIGSTOP);  // no new children from here on
      wait_until([&] { return process_state(pid) == 'T' || gone_or_zombie(pid); },
                 std::chrono::seconds(1), milliseconds(1));
    }
    // Paused ones too if the postmaster died on its own: stopped, they could not notice.
    std::vector<pid_t> children = child_pids_of(pid);
    for (const pid_t child : stopped_children) {
      if (std::find(children.begin(), children.end(), child) == children.end()) {
        children.push_back(child);
      }
    }
    for (const pid_t child : children) {
      ::kill(-child, SIGKILL);  // each is a session leader (setsid), with its own group
      ::kill(child, SIGKILL);
    }
    kill_child(pid);
    wait_until([&] { return std::all_of(children.begin(), children.end(), gone_or_zombie); },
               std::chrono::seconds(5));
    release_stopped_children();
    watchdog.reset();
    remove_shared_memory(data_dir(), pid);
    std::error_code ignored;
    fs::remove(data_dir() / "postmaster.pid", ignored);
    fs::remove(dir / fmt::format(".s.PGSQL.{}.lock", port), ignored);
    pid = -1;
    paused = false;
  }

  void release_stopped_children() noexcept {
    for (const pid_t child : stopped_children) unregister_child(child);
    stopped_children.clear();
  }

  void require_running(const char* what) {
    if (!check_running()) {
      throw std::logic_error(fmt::format("{}: {} is not running", what, describe()));
    }
  }

  void pause() {
    require_running("pause");
    if (paused) return;
    ::kill(pid, SIGSTOP);  // first, so that it forks no child the list would miss
    paused = true;
    if (!wait_for_stop_state(pid, true, std::chrono::seconds(2))) {
      throw std::runtime_error(describe() + ": the postmaster did not stop within 2 s");
    }
    for (const pid_t child : child_pids_of(pid)) {
      if (gone_or_zombie(child)) continue;
      register_child(child);  // for the exit and signal safety nets, until resume or stop
      stopped_children.push_back(child);
      ::kill(child, SIGSTOP);
    }
    for (const pid_t child : stopped_children) {
      if (!wait_until([&] { return process_state(child) == 'T' || gone_or_zombie(child); },
                      std::chrono::seconds(2), milliseconds(1))) {
        throw std::runtime_error(fmt::format("{}: process {} did not stop within 2 s",
                                             describe(), child));
      }
    }
    arm_watchdog();
  }

  // A process that outlives a test program killed by SIGKILL (its parent-death signal is
  // SIGTERM, which it traps) and then kills the stopped processes, which could not notice.
  // Neither it nor its sleep keeps the test program's stdout or stderr open: a sleep left
  // behind once (its shell gone without it) held CTest's pipe until the test timed out.
  void arm_watchdog() {
    std::string pids = std::to_string(pid);
    for (const pid_t child : stopped_children) pids += fmt::format(" {}", child);
    const std::string script = fmt::format(
        "exec 2>/dev/null; trap 'kill -KILL {}; kill $!; exit 0' TERM; "
        "sleep 86400 </dev/null >/dev/null & echo armed; exec >/dev/null; wait",
        pids);
    watchdog.emplace(std::vector<std::string>{"setpriv", "--pdeathsig", "SIGTERM", "--", "sh",
                                              "-c", script});
    if (watchdog->read_line(std::chrono::seconds(5)) != "armed") {
      watchdog.reset();
      throw std::runtime_error(describe() + ": the pause watchdog did not start");
    }
  }

  void resume() {
    require_running("resume");
    if (!paused) return;
    for (const pid_t child : stopped_children) ::kill(child, SIGCONT);
    release_stopped_children();
    ::kill(pid, SIGCONT);
    watchdog.reset();
    if (!wait_for_stop_state(pid, false, std::chrono::seconds(2))) {
      throw std::runtime_error(describe() + ": the postmaster did not continue within 2 s");
    }
    paused = false;
  }

  int terminate_backends(const std::string& condition) {
    // Materialized, so that the planner cannot call pg_terminate_backend before the filter.
    const std::string sql = fmt::format(
        "WITH victims AS MATERIALIZED (SELECT pid FROM pg_stat_activity "
        "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND {}) "
        "SELECT count(*) FROM victims WHERE pg_terminate_backend(pid, 5000)",
        condition);
    return std::stoi(exec(sql, "postgres", std::chrono::seconds(60)).at(0).at(0));
  }

  ~Impl() {
    kill_now();
    remove_temp_dir(dir, options.keep_dir);
  }
};

PostgresServer::PostgresServer(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
PostgresServer::~PostgresServer() = default;
PostgresServer::PostgresServer(PostgresServer&&) noexcept = default;
PostgresServer& PostgresServer::operator=(PostgresServer&&) noexcept = default;

void PostgresServer::start() { impl_->start(); }
void PostgresServer::stop() noexcept { impl_->kill_now(); }
void PostgresServer::restart() {
  impl_->kill_now();
  impl_->start();
}
void PostgresServer::pause() { impl_->pause(); }
void PostgresServer::resume() { impl_->resume(); }

PostgresRows PostgresServer::exec(const std::string& sql, const std::string& database,
                                  std::chrono::milliseconds timeout) {
  return impl_->exec(sql, database, timeout);
}

void PostgresServer::create_database(const std::string& name) {
  impl_->exec("CREATE DATABASE " + quote_identifier(name), "postgres", std::chrono::seconds(30));
}

int PostgresServer::kill_backends_of(const std::string& application_name) {
  return impl_->terminate_backends("application_name = " + quote_literal(application_name));
}

int PostgresServer::kill_all_backends() { return impl_->terminate_backends("true"); }

bool PostgresServer::running() { return impl_->check_running(); }
bool PostgresServer::paused() const { return impl_->paused; }
pid_t PostgresServer::pid() const { return impl_->pid; }

std::vector<pid_t> PostgresServer::process_ids() const {
  if (impl_->pid <= 0) return {};
  std::vector<pid_t> pids = child_pids_of(impl_->pid);
  pids.insert(pids.begin(), impl_->pid);
  return pids;
}

std::string PostgresServer::host() const { return kHost; }
int PostgresServer::port() const { return impl_->port; }
std::string PostgresServer::dsn(const std::string& database) const { return impl_->dsn(database); }
std::string PostgresServer::user() const { return kUser; }
const std::filesystem::path& PostgresServer::dir() const { return impl_->dir; }
std::filesystem::path PostgresServer::data_dir() const { return impl_->data_dir(); }
std::filesystem::path PostgresServer::log_file() const { return impl_->log_file(); }
std::string PostgresServer::log_tail(std::size_t lines) const { return impl_->log_tail(lines); }
const PostgresServer::Options& PostgresServer::options() const { return impl_->options; }

void remove_postgres_dir(const std::filesystem::path& dir) noexcept {
  if (dir.empty()) return;
  remove_shared_memory(dir / "data", -1);
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace dlock::test
