#include "redis_process.hpp"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#ifndef DLOCK_REDIS_SERVER
#define DLOCK_REDIS_SERVER "redis-server"
#endif
#ifndef DLOCK_REDIS_SENTINEL
#define DLOCK_REDIS_SENTINEL ""
#endif
#ifndef DLOCK_REDIS_CLI
#define DLOCK_REDIS_CLI "redis-cli"
#endif

extern char** environ;

namespace dlock::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---------------------------------------------------------------------------------------------
// Process registry. Slots are lock-free atomics so that the fatal-signal handler can read them.
// Each slot packs the owner's pid (the process that spawned the child; a fork of the test
// program, e.g. a gtest death test, must not kill its parent's servers) and the child's pid.
// Invariant: a child is registered from fork until it is reaped, so a registered pid can
// never have been reused by an unrelated process.

constexpr std::size_t kMaxChildren = 1024;
std::array<std::atomic<std::uint64_t>, kMaxChildren> g_children{};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

constexpr std::uint64_t pack(pid_t owner, pid_t child) {
  return (std::uint64_t{static_cast<std::uint32_t>(owner)} << 32) |
         std::uint64_t{static_cast<std::uint32_t>(child)};
}
constexpr pid_t owner_of(std::uint64_t slot) { return static_cast<pid_t>(slot >> 32); }
constexpr pid_t child_of(std::uint64_t slot) { return static_cast<pid_t>(slot & 0xffffffffu); }

constexpr std::array<int, 9> kFatalSignals = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL,
                                              SIGTERM, SIGINT,  SIGHUP, SIGQUIT};
std::array<struct sigaction, kFatalSignals.size()> g_previous_actions{};

// Async-signal-safe: only atomics, getpid and kill.
void kill_registered_children() noexcept {
  const pid_t self = ::getpid();
  for (auto& slot : g_children) {
    const std::uint64_t value = slot.load();
    if (value != 0 && owner_of(value) == self) {
      ::kill(-child_of(value), SIGKILL);  // its process group: fork children of the server
      ::kill(child_of(value), SIGKILL);
    }
  }
}

std::optional<int> reap(pid_t pid, milliseconds timeout);

void unregister_child(pid_t child) noexcept {
  const std::uint64_t value = pack(::getpid(), child);
  for (auto& slot : g_children) {
    std::uint64_t expected = value;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

bool is_registered(pid_t child) noexcept {
  const std::uint64_t value = pack(::getpid(), child);
  for (auto& slot : g_children) {
    if (slot.load() == value) return true;
  }
  return false;
}

void kill_children_at_exit() {
  kill_registered_children();
  const pid_t self = ::getpid();
  for (auto& slot : g_children) {
    const std::uint64_t value = slot.load();
    if (value != 0 && owner_of(value) == self) {
      reap(child_of(value), std::chrono::seconds(2));
      unregister_child(child_of(value));
    }
  }
}

extern "C" void on_fatal_signal(int sig) {
  const int saved_errno = errno;
  kill_registered_children();
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals[i] == sig) ::sigaction(sig, &g_previous_actions[i], nullptr);
  }
  errno = saved_errno;
  // Delivered again once this handler returns, now to the previous disposition.
  ::raise(sig);
}

// Installs the exit and signal safety nets once per process. Also ignores SIGPIPE: hiredis
// writes with plain write(2), and a test that kills a server must not die when it next sends.
void install_process_safety_net() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit(kill_children_at_exit);
    for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
      struct sigaction previous {};
      ::sigaction(kFatalSignals[i], nullptr, &previous);
      // A signal the process ignores (SIGHUP under nohup) does not end it: leave it alone.
      if (previous.sa_handler == SIG_IGN) continue;
      g_previous_actions[i] = previous;
      struct sigaction action {};
      action.sa_handler = on_fatal_signal;
      sigemptyset(&action.sa_mask);
      ::sigaction(kFatalSignals[i], &action, nullptr);
    }
    struct sigaction pipe_action {};
    ::sigaction(SIGPIPE, nullptr, &pipe_action);
    if (pipe_action.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  });
}

void register_child(pid_t child) {
  const std::uint64_t value = pack(::getpid(), child);
  for (auto& slot : g_children) {
    std::uint64_t expected = 0;
    if (slot.compare_exchange_strong(expected, value)) return;
  }
  ::kill(child, SIGKILL);
  reap(child, std::chrono::seconds(2));
  throw std::runtime_error(fmt::format("more than {} live child processes", kMaxChildren));
}

// ---------------------------------------------------------------------------------------------
// Small POSIX helpers.

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  [[nodiscard]] int get() const { return fd_; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int error) { return std::string(::strerror(error)); }

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", what, errno_text(errno)));
}

// Raw wait status after the process exits, or nullopt if it is still running at `timeout`.
// A child reaped by someone else (SIGCHLD ignored) reports -1.
std::optional<int> reap(pid_t pid, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = milliseconds(1);
  for (;;) {
    int status = 0;
    const pid_t result = ::waitpid(pid, &status, WNOHANG);
    if (result == pid) return status;
    if (result < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(20));
  }
}

// Exit code, or 128 + signal number (the shell's convention).
int decode_status(int status) {
  if (status == -1) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = ::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    const std::string candidate = fmt::format("{}/{}", dir.empty() ? "." : dir, name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  throw std::runtime_error(fmt::format("program not found in PATH: {}", name));
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env_overrides;  // "NAME=value"
  int stdout_fd = -1;                      // required
  int stderr_fd = -1;                      // -1: inherited
};

// Closes every descriptor from 3 up, except `keep`. Async-signal-safe.
void close_descriptors_except(int keep, int fallback_limit) {
#ifdef SYS_close_range
  bool done = keep == 3 || ::syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u) == 0;
  done = done && ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u) == 0;
  if (done) return;
#endif
  for (int fd = 3; fd < fallback_limit; ++fd) {
    if (fd != keep) ::close(fd);
  }
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const char* program, char* const* argv, char* const* envp,
                             pid_t parent, int stdin_fd, int stdout_fd, int stderr_fd,
                             int error_fd, int fd_limit) {
  // The child dies with the thread that spawned it, even if that thread is SIGKILLed; the
  // getppid check closes the race with a parent that died before prctl.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
  ::setpgid(0, 0);  // own group: a group kill also catches the server's fork children
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 ||
      (stderr_fd >= 0 && ::dup2(stderr_fd, 2) < 0)) {
    const int error = errno;
    [[maybe_unused]] auto written = ::write(error_fd, &error, sizeof error);
    ::_exit(127);
  }
  // Test programs hold hiredis sockets without FD_CLOEXEC; a server must not inherit them.
  close_descriptors_except(error_fd, fd_limit);
  ::execve(program, argv, envp);
  const int error = errno;
  [[maybe_unused]] auto written = ::write(error_fd, &error, sizeof error);
  ::_exit(127);
}

// PR_SET_PDEATHSIG fires when the *thread* that forked exits, so children are forked by one
// harness thread that lives as long as the process: a server started from a short-lived test
// thread must not die with that thread. The spawner is never destroyed (it would be destroyed
// at exit with its thread still waiting on it).
class Spawner {
 public:
  static Spawner& instance() {
    static Spawner* spawner = new Spawner();
    return *spawner;
  }

  void run(const std::function<void()>& work) {
    Job job{&work, false, nullptr};
    std::unique_lock lock(mutex_);
    queue_.push_back(&job);
    wake_.notify_all();
    done_.wait(lock, [&] { return job.done; });
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  struct Job {
    const std::function<void()>* work;
    bool done;
    std::exception_ptr error;
  };

  Spawner() { std::thread([this] { serve(); }).detach(); }

  [[noreturn]] void serve() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return !queue_.empty(); });
      Job* job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      try {
        (*job->work)();
      } catch (...) {
        job->error = std::current_exception();
      }
      lock.lock();
      job->done = true;
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::deque<Job*> queue_;
};

pid_t spawn_now(const SpawnRequest& request);

pid_t spawn(const SpawnRequest& request) {
  install_process_safety_net();
  pid_t pid = -1;
  Spawner::instance().run([&] { pid = spawn_now(request); });
  return pid;
}

pid_t spawn_now(const SpawnRequest& request) {
  if (request.argv.empty()) throw std::invalid_argument("spawn: empty argv");
  const std::string program = resolve_program(request.argv.front());

  // Everything the child needs is prepared here: after fork it may not allocate.
  std::vector<char*> argv;
  for (const auto& arg : request.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view current(*entry);
    const auto name = current.substr(0, current.find('='));
    const bool overridden =
        std::any_of(request.env_overrides.begin(), request.env_overrides.end(),
                    [&](const std::string& o) { return o.substr(0, o.find('=')) == name; });
    if (!overridden) env_storage.emplace_back(current);
  }
  env_storage.insert(env_storage.end(), request.env_overrides.begin(),
                     request.env_overrides.end());
  std::vector<char*> envp;
  for (auto& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);

  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (dev_null.get() < 0) throw_errno("open /dev/null");
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) throw_errno("pipe2");
  UniqueFd error_read(error_pipe[0]);
  UniqueFd error_write(error_pipe[1]);
  const long open_max = ::sysconf(_SC_OPEN_MAX);
  const int fd_limit = static_cast<int>(std::clamp(open_max, 256L, 65536L));

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    exec_child(program.c_str(), argv.data(), envp.data(), parent, dev_null.get(),
               request.stdout_fd, request.stderr_fd, error_write.get(), fd_limit);
  }
  if (pid < 0) throw_errno("fork");
  register_child(pid);
  ::setpgid(pid, pid);  // also from this side, so a group kill works from the first moment
  error_write.reset();

  int child_errno = 0;
  ssize_t got = 0;
  do {
    got = ::read(error_read.get(), &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof child_errno)) {
    reap(pid, std::chrono::seconds(5));
    unregister_child(pid);
    throw std::runtime_error(
        fmt::format("cannot execute {}: {}", program, errno_text(child_errno)));
  }
  return pid;
}

// State letter from /proc/PID/stat ('T' when stopped), or '?' if unreadable.
char process_state(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return '?';
  return stat[paren + 2];
}

std::string read_file(const fs::path& path, std::uintmax_t from = 0) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(from));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::uintmax_t file_size_or_zero(const fs::path& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : size;
}

std::string tail_lines(const std::string& text, std::size_t lines) {
  std::size_t start = text.size();
  std::size_t seen = 0;
  if (start > 0 && text[start - 1] == '\n') --start;
  while (start > 0) {
    if (text[start - 1] == '\n' && ++seen == lines) break;
    --start;
  }
  return text.substr(start);
}

// A config-file string: Redis's parser understands double quotes with backslash escapes.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

std::string sanitized(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_';
    out += plain ? c : '_';
  }
  return out.empty() ? std::string("redis") : out;
}

bool env_flag(const char* name) {
  const char* value = ::getenv(name);
  return value != nullptr && *value != '\0' && std::string_view(value) != "0";
}

constexpr const char* kHost = "127.0.0.1";
constexpr int kStartAttempts = 8;

}  // namespace

// -------------------------------------------------------------------------------------------
// Free functions.

std::string redis_server_program() { return DLOCK_REDIS_SERVER; }

std::string redis_sentinel_program() {
  const std::string sentinel = DLOCK_REDIS_SENTINEL;
  return sentinel.empty() ? redis_server_program() : sentinel;
}

std::string redis_cli_program() { return DLOCK_REDIS_CLI; }

int free_loopback_port() {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) throw_errno("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    throw_errno("bind 127.0.0.1:0");
  }
  socklen_t length = sizeof address;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw_errno("getsockname");
  }
  return ntohs(address.sin_port);
}

bool wait_until(const std::function<bool()>& condition, milliseconds timeout,
                milliseconds interval) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(interval, deadline - now));
  }
}

std::vector<pid_t> live_child_pids() {
  std::vector<pid_t> pids;
  const pid_t self = ::getpid();
  for (auto& slot : g_children) {
    const std::uint64_t value = slot.load();
    if (value != 0 && owner_of(value) == self) pids.push_back(child_of(value));
  }
  return pids;
}

// -------------------------------------------------------------------------------------------
// RedisServer.

struct RedisServer::Impl {
  Options options;
  fs::path dir;
  int port = 0;
  int bus_port = 0;
  bool port_owned = false;  // the server has run on `port`: restarts keep it
  pid_t pid = -1;
  bool paused = false;

  enum class Outcome { ready, port_taken, failed };

  [[nodiscard]] bool sentinel() const { return options.mode == Options::Mode::sentinel; }
  [[nodiscard]] fs::path config_file() const { return dir / "redis.conf"; }
  [[nodiscard]] fs::path log_file() const { return dir / "redis.log"; }
  [[nodiscard]] fs::path output_file() const { return dir / "output.log"; }

  [[nodiscard]] std::string program() const {
    if (!options.program.empty()) return options.program;
    return sentinel() ? redis_sentinel_program() : redis_server_program();
  }

  void make_dir() {
    if (!dir.empty()) return;
    const char* tmp = ::getenv("TMPDIR");
    const fs::path base = tmp != nullptr && *tmp != '\0' ? fs::path(tmp) : fs::path("/tmp");
    std::string pattern = (base / fmt::format("dlock-{}-XXXXXX", sanitized(options.name))).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw_errno(fmt::format("mkdtemp {}", pattern));
    dir = pattern;
  }

  void write_config() const {
    std::string text = "# Written by dlock's test harness (tests/support/redis_process.cpp).\n";
    text += fmt::format("bind {}\nport {}\ndaemonize no\n", kHost, port);
    text += fmt::format("dir {}\nlogfile {}\nloglevel notice\n", quoted(dir.string()),
                        quoted(log_file().string()));
    if (!sentinel()) {
      text += "save \"\"\nappendonly no\nenable-debug-command local\n";
    }
    if (!options.password.empty()) {
      text += fmt::format("requirepass {}\n", quoted(options.password));
      if (sentinel()) text += fmt::format("sentinel sentinel-pass {}\n", quoted(options.password));
    }
    if (options.cluster) {
      text += fmt::format("cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-port {}\n",
                          bus_port);
    }
    for (const auto& line : options.extra_config) text += line + '\n';
    std::ofstream out(config_file(), std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", config_file().string()));
  }

  void choose_ports() {
    port = options.port != 0 ? options.port : free_loopback_port();
    if (options.cluster) {
      do {
        bus_port = free_loopback_port();
      } while (bus_port == port);
    }
  }

  [[nodiscard]] std::string describe() const {
    return fmt::format("{} ({} on {}:{}, dir {})", options.name, program(), kHost, port,
                       dir.string());
  }

  [[nodiscard]] std::string log_tail(std::size_t lines) const {
    if (dir.empty()) return "(not started)";
    std::string out;
    for (const auto& file : {log_file(), output_file()}) {
      const std::string text = read_file(file);
      if (text.empty()) continue;
      out += fmt::format("--- {} (last {} lines) ---\n{}", file.string(), lines,
                         tail_lines(text, lines));
      if (out.back() != '\n') out += '\n';
    }
    return out.empty() ? "(no log output)" : out;
  }

  // Reaps the process if it exited. True while it runs.
  bool check_running() {
    if (pid <= 0) return false;
    if (!is_registered(pid)) {  // reaped by the exit safety net
      pid = -1;
      return false;
    }
    if (!reap(pid, milliseconds(0))) return true;
    unregister_child(pid);
    pid = -1;
    paused = false;
    return false;
  }

  Outcome launch(std::string& failure) {
    const auto log_offset = file_size_or_zero(log_file());
    const auto output_offset = file_size_or_zero(output_file());
    UniqueFd output(::open(output_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (output.get() < 0) throw_errno(fmt::format("open {}", output_file().string()));
    std::vector<std::string> argv = {program(), config_file().string()};
    if (sentinel() && program().find("redis-sentinel") == std::string::npos) {
      argv.emplace_back("--sentinel");
    }
    pid = spawn({argv, {}, output.get(), output.get()});
    output.reset();

    const auto deadline = Clock::now() + options.start_timeout;
    RedisAdmin admin(kHost, port, milliseconds(250));
    if (!options.password.empty()) admin.set_auth("", options.password);
    std::string last_error;
    for (;;) {
      if (!check_running()) {
        const std::string fresh =
            read_file(log_file(), log_offset) + read_file(output_file(), output_offset);
        failure = "exited during start-up";
        return fresh.find("Address already in use") != std::string::npos ? Outcome::port_taken
                                                                          : Outcome::failed;
      }
      // Another process may own the port (the bind race): only our own pid counts.
      try {
        if (admin.command({"PING"}) == "PONG" &&
            admin.info_field("server", "process_id") == std::to_string(pid)) {
          return Outcome::ready;
        }
      } catch (const RedisError& error) {
        last_error = error.what();
      } catch (const std::exception&) {
        admin.disconnect();
      }
      if (Clock::now() >= deadline) {
        failure = fmt::format("no PING answer within {} ms", options.start_timeout.count());
        if (last_error.find("NOAUTH") != std::string::npos ||
            last_error.find("WRONGPASS") != std::string::npos) {
          failure += fmt::format(" ({}; set Options::password rather than a requirepass line)",
                                 last_error);
        }
        kill_now();
        return Outcome::failed;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  void start() {
    if (check_running()) throw std::logic_error(describe() + " is already running");
    make_dir();
    std::string failure;
    for (int attempt = 1; attempt <= kStartAttempts; ++attempt) {
      if (!port_owned) {
        choose_ports();
        write_config();
      } else if (!fs::exists(config_file())) {
        write_config();
      }
      switch (launch(failure)) {
        case Outcome::ready:
          port_owned = true;
          paused = false;
          return;
        case Outcome::port_taken:
          // A port we picked ourselves is simply replaced; a fixed one may be freed soon.
          if (port_owned || options.port != 0) std::this_thread::sleep_for(milliseconds(250));
          continue;
        case Outcome::failed:
          throw std::runtime_error(
              fmt::format("{} did not start: {}\n{}", describe(), failure, log_tail(30)));
      }
    }
    throw std::runtime_error(fmt::format("{} did not start: port taken on each of {} attempts\n{}",
                                         describe(), kStartAttempts, log_tail(30)));
  }

  void kill_now() noexcept {
    if (pid <= 0) return;
    if (is_registered(pid)) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      reap(pid, std::chrono::seconds(5));
      unregister_child(pid);
    }
    pid = -1;
    paused = false;
  }

  void stop() noexcept {
    if (pid <= 0) return;
    if (is_registered(pid)) {
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGCONT);  // a stopped process would keep SIGTERM pending forever
      if (reap(pid, options.stop_timeout)) {
        unregister_child(pid);
        pid = -1;
      }
    }
    kill_now();
  }

  void wait_for_state(bool stopped) const {
    const bool reached = wait_until(
        [&] { return (process_state(pid) == 'T') == stopped; }, std::chrono::seconds(2),
        milliseconds(1));
    if (!reached) {
      throw std::runtime_error(fmt::format("{} did not {} within 2 s", describe(),
                                           stopped ? "stop" : "continue"));
    }
  }

  void require_running(const char* what) {
    if (!check_running()) {
      throw std::logic_error(fmt::format("{}: {} is not running", what, describe()));
    }
  }

  ~Impl() {
    stop();
    if (!dir.empty() && !options.keep_dir && !env_flag("DLOCK_TEST_KEEP_DIRS")) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  }
};

RedisServer::RedisServer(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
RedisServer::~RedisServer() = default;
RedisServer::RedisServer(RedisServer&&) noexcept = default;
RedisServer& RedisServer::operator=(RedisServer&&) noexcept = default;

void RedisServer::start() { impl_->start(); }
void RedisServer::stop() noexcept { impl_->stop(); }
void RedisServer::kill() noexcept { impl_->kill_now(); }

void RedisServer::pause() {
  impl_->require_running("pause");
  ::kill(impl_->pid, SIGSTOP);
  impl_->wait_for_state(true);
  impl_->paused = true;
}

void RedisServer::resume() {
  impl_->require_running("resume");
  ::kill(impl_->pid, SIGCONT);
  impl_->wait_for_state(false);
  impl_->paused = false;
}

void RedisServer::restart_empty() {
  impl_->kill_now();
  if (!impl_->dir.empty()) {
    for (const auto& entry : fs::directory_iterator(impl_->dir)) fs::remove_all(entry.path());
    impl_->write_config();
  }
  impl_->start();
}

bool RedisServer::running() { return impl_->check_running(); }
bool RedisServer::paused() const { return impl_->paused; }
int RedisServer::port() const { return impl_->port; }
int RedisServer::bus_port() const { return impl_->bus_port; }
pid_t RedisServer::pid() const { return impl_->pid; }
std::string RedisServer::host() const { return kHost; }
std::string RedisServer::endpoint() const { return fmt::format("{}:{}", kHost, impl_->port); }
std::string RedisServer::address() const { return fmt::format("redis://{}:{}", kHost, impl_->port); }
const std::filesystem::path& RedisServer::dir() const { return impl_->dir; }
std::filesystem::path RedisServer::config_file() const { return impl_->config_file(); }
std::filesystem::path RedisServer::log_file() const { return impl_->log_file(); }
std::string RedisServer::log_tail(std::size_t lines) const { return impl_->log_tail(lines); }
const RedisServer::Options& RedisServer::options() const { return impl_->options; }

// -------------------------------------------------------------------------------------------
// RedisAdmin.

namespace {

void flatten(const redisReply* reply, std::string& out) {
  switch (reply->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      out.append(reply->str, reply->len);
      break;
    case REDIS_REPLY_INTEGER:
      out += std::to_string(reply->integer);
      break;
    case REDIS_REPLY_NIL:
      out += "(nil)";
      break;
    case REDIS_REPLY_ARRAY:
      for (std::size_t i = 0; i < reply->elements; ++i) {
        if (i > 0) out += '\n';
        flatten(reply->element[i], out);
      }
      break;
    default:
      out += "(unknown reply type)";
  }
}

void collect(const redisReply* reply, std::vector<std::string>& out) {
  switch (reply->type) {
    case REDIS_REPLY_ARRAY:
      for (std::size_t i = 0; i < reply->elements; ++i) collect(reply->element[i], out);
      break;
    case REDIS_REPLY_NIL:
      out.emplace_back();
      break;
    default: {
      std::string text;
      flatten(reply, text);
      out.push_back(std::move(text));
    }
  }
}

const char* type_name(int type) {
  switch (type) {
    case REDIS_REPLY_STRING: return "string";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_ERROR: return "error";
    default: return "unknown";
  }
}

[[noreturn]] void wrong_type(const std::vector<std::string>& argv, const char* expected,
                             const redisReply* reply) {
  std::string text;
  flatten(reply, text);
  throw std::runtime_error(fmt::format("{}: expected a{} {} reply, got {} '{}'", join(argv),
                                       expected[0] == 'a' || expected[0] == 'i' ? "n" : "",
                                       expected, type_name(reply->type), text));
}

timeval to_timeval(milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  return tv;
}

}  // namespace

void RedisAdmin::ReplyDeleter::operator()(void* reply) const noexcept {
  if (reply != nullptr) freeReplyObject(reply);
}

RedisAdmin::RedisAdmin(std::string host, int port, milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {
  install_process_safety_net();
}

RedisAdmin::RedisAdmin(const RedisServer& server, milliseconds timeout)
    : RedisAdmin(server.host(), server.port(), timeout) {}

RedisAdmin::~RedisAdmin() { disconnect(); }

RedisAdmin::RedisAdmin(RedisAdmin&& other) noexcept
    : host_(std::move(other.host_)),
      port_(other.port_),
      timeout_(other.timeout_),
      username_(std::move(other.username_)),
      password_(std::move(other.password_)),
      context_(std::exchange(other.context_, nullptr)) {}

RedisAdmin& RedisAdmin::operator=(RedisAdmin&& other) noexcept {
  if (this != &other) {
    disconnect();
    host_ = std::move(other.host_);
    port_ = other.port_;
    timeout_ = other.timeout_;
    username_ = std::move(other.username_);
    password_ = std::move(other.password_);
    context_ = std::exchange(other.context_, nullptr);
  }
  return *this;
}

void RedisAdmin::set_auth(std::string username, std::string password) {
  username_ = std::move(username);
  password_ = std::move(password);
  disconnect();
}

void RedisAdmin::disconnect() noexcept {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
}

void RedisAdmin::connect() {
  redisContext* context = redisConnectWithTimeout(host_.c_str(), port_, to_timeval(timeout_));
  if (context == nullptr) {
    throw RedisIoError(fmt::format("cannot connect to {}:{}: out of memory", host_, port_));
  }
  if (context->err != 0) {
    const std::string reason = context->errstr;
    redisFree(context);
    throw RedisIoError(fmt::format("cannot connect to {}:{}: {}", host_, port_, reason));
  }
  redisSetTimeout(context, to_timeval(timeout_));
  context_ = context;
  if (!password_.empty()) {
    try {
      if (username_.empty()) {
        execute({"AUTH", password_});
      } else {
        execute({"AUTH", username_, password_});
      }
    } catch (...) {
      disconnect();
      throw;
    }
  }
}

void RedisAdmin::fail_io(const std::string& what) {
  const int saved_errno = errno;
  std::string reason = context_ != nullptr ? context_->errstr : "no connection";
  if (context_ != nullptr && context_->err == REDIS_ERR_IO &&
      (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
       reason.find("temporarily unavailable") != std::string::npos)) {
    reason = fmt::format("no reply within {} ms", timeout_.count());
  }
  disconnect();  // a broken or timed-out connection is never reused
  throw RedisIoError(fmt::format("{}:{}: {}: {}", host_, port_, what, reason));
}

RedisAdmin::ReplyPtr RedisAdmin::execute(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("RedisAdmin: empty command");
  const bool fresh = context_ == nullptr;
  if (fresh) connect();
  std::vector<const char*> pointers;
  std::vector<std::size_t> lengths;
  pointers.reserve(argv.size());
  lengths.reserve(argv.size());
  for (const auto& arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  errno = 0;
  void* raw = redisCommandArgv(context_, static_cast<int>(argv.size()), pointers.data(),
                               lengths.data());
  if (raw == nullptr && !fresh) {
    // A connection kept from before a server restart fails on first use without the command
    // having reached any server: reconnect once. Timeouts are not retried.
    const int error = errno;
    const bool stale = context_->err == REDIS_ERR_EOF ||
                       (context_->err == REDIS_ERR_IO && (error == EPIPE || error == ECONNRESET));
    if (stale) {
      disconnect();
      connect();
      errno = 0;
      raw = redisCommandArgv(context_, static_cast<int>(argv.size()), pointers.data(),
                             lengths.data());
    }
  }
  if (raw == nullptr) fail_io(argv.front());
  ReplyPtr reply(raw);
  const auto* typed = static_cast<const redisReply*>(raw);
  if (typed->type == REDIS_REPLY_ERROR) throw RedisError(std::string(typed->str, typed->len));
  return reply;
}

std::string RedisAdmin::command(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  std::string out;
  flatten(static_cast<const redisReply*>(reply.get()), out);
  return out;
}

long long RedisAdmin::integer(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  if (typed->type != REDIS_REPLY_INTEGER) wrong_type(argv, "integer", typed);
  return typed->integer;
}

std::optional<std::string> RedisAdmin::string(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  if (typed->type == REDIS_REPLY_NIL) return std::nullopt;
  if (typed->type != REDIS_REPLY_STRING && typed->type != REDIS_REPLY_STATUS) {
    wrong_type(argv, "string", typed);
  }
  return std::string(typed->str, typed->len);
}

std::vector<std::string> RedisAdmin::array(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  if (typed->type != REDIS_REPLY_ARRAY) wrong_type(argv, "array", typed);
  std::vector<std::string> out;
  collect(typed, out);
  return out;
}

bool RedisAdmin::ok(const std::vector<std::string>& argv) {
  const ReplyPtr reply = execute(argv);
  const auto* typed = static_cast<const redisReply*>(reply.get());
  return typed->type == REDIS_REPLY_STATUS && std::string_view(typed->str, typed->len) == "OK";
}

bool RedisAdmin::ping() noexcept {
  try {
    return command({"PING"}) == "PONG";
  } catch (...) {
    return false;
  }
}

std::optional<std::string> RedisAdmin::info_field(const std::string& section,
                                                  std::string_view field) {
  const auto text = string({"INFO", section});
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
        line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
  }
  return std::nullopt;
}

// -------------------------------------------------------------------------------------------
// ChildProcess.

struct ChildProcess::Impl {
  std::vector<std::string> argv;
  pid_t pid = -1;
  bool reaped = false;
  int status = -1;
  UniqueFd output;  // read end, non-blocking
  bool eof = false;
  std::string buffer;

  // Reads whatever is available, waiting at most `timeout` for the first byte.
  void fill(milliseconds timeout) {
    if (eof) return;
    pollfd poller{output.get(), POLLIN, 0};
    const int ready =
        ::poll(&poller, 1, static_cast<int>(std::clamp<long long>(timeout.count(), 0, 60'000)));
    if (ready <= 0) return;
    char chunk[4096];
    for (;;) {
      const ssize_t got = ::read(output.get(), chunk, sizeof chunk);
      if (got > 0) {
        buffer.append(chunk, static_cast<std::size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      eof = true;  // 0: every writer has closed the pipe
      return;
    }
  }

  std::optional<std::string> pop_line() {
    const auto newline = buffer.find('\n');
    if (newline == std::string::npos) return std::nullopt;
    std::string line = buffer.substr(0, newline);
    buffer.erase(0, newline + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }

  bool exited() {
    if (reaped) return true;
    if (!is_registered(pid)) {  // reaped by the exit safety net
      reaped = true;
      return true;
    }
    const auto raw = reap(pid, milliseconds(0));
    if (!raw) return false;
    status = *raw;
    reaped = true;
    unregister_child(pid);
    return true;
  }

  void kill_now() noexcept {
    if (reaped || pid <= 0) return;
    if (is_registered(pid)) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      if (const auto raw = reap(pid, std::chrono::seconds(5))) status = *raw;
      unregister_child(pid);
    }
    reaped = true;
  }
};

ChildProcess::ChildProcess(std::vector<std::string> argv, ChildOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->argv = std::move(argv);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw_errno("pipe2");
  impl_->output = UniqueFd(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  ::fcntl(impl_->output.get(), F_SETFL, ::fcntl(impl_->output.get(), F_GETFL) | O_NONBLOCK);
  impl_->pid = spawn({impl_->argv, std::move(options.env), write_end.get(),
                      options.merge_stderr ? write_end.get() : -1});
}

ChildProcess::~ChildProcess() {
  if (impl_) impl_->kill_now();
}
ChildProcess::ChildProcess(ChildProcess&&) noexcept = default;
ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->kill_now();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

std::optional<std::string> ChildProcess::read_line(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (bool polled = false;; polled = true) {
    if (auto line = impl_->pop_line()) return line;
    if (impl_->eof) {
      if (impl_->buffer.empty()) return std::nullopt;
      return std::exchange(impl_->buffer, std::string());
    }
    const auto remaining = std::chrono::ceil<milliseconds>(deadline - Clock::now());
    if (remaining.count() <= 0 && polled) return std::nullopt;
    impl_->fill(std::max(remaining, milliseconds(0)));
  }
}

std::string ChildProcess::take_output() {
  impl_->fill(milliseconds(0));
  return std::exchange(impl_->buffer, std::string());
}

void ChildProcess::signal(int sig) {
  if (!impl_->reaped && is_registered(impl_->pid)) ::kill(impl_->pid, sig);
}

pid_t ChildProcess::pid() const { return impl_->pid; }

bool ChildProcess::running() { return !impl_->exited(); }

std::optional<int> ChildProcess::wait(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (impl_->exited()) {
      impl_->fill(milliseconds(0));  // what it wrote just before exiting
      return decode_status(impl_->status);
    }
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    const auto slice = std::min(std::chrono::ceil<milliseconds>(deadline - now), milliseconds(10));
    if (impl_->eof) {
      std::this_thread::sleep_for(slice);
    } else {
      impl_->fill(slice);
    }
  }
}

void ChildProcess::kill() noexcept { impl_->kill_now(); }

CommandResult run_command(const std::vector<std::string>& argv, milliseconds timeout,
                          ChildOptions options) {
  ChildProcess child(argv, std::move(options));
  const auto status = child.wait(timeout);
  if (!status) {
    child.kill();
    throw std::runtime_error(fmt::format("'{}' did not finish within {} ms; output so far:\n{}",
                                         join(argv), timeout.count(), child.take_output()));
  }
  return {*status, child.take_output()};
}

}  // namespace dlock::test
