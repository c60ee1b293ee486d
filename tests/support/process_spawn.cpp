// Starting and reaping the harness's child processes, and small POSIX and file helpers
// (process_support.hpp).
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "process_support.hpp"
#include "redis_process.hpp"

extern char** environ;

namespace dlock::test {
namespace detail {
namespace {

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
                             const char* cwd, pid_t parent, int stdin_fd, int stdout_fd,
                             int stderr_fd, int error_fd, int fd_limit) {
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
      (stderr_fd >= 0 && ::dup2(stderr_fd, 2) < 0) || (*cwd != '\0' && ::chdir(cwd) != 0)) {
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
    exec_child(program.c_str(), argv.data(), envp.data(), request.cwd.c_str(), parent,
               dev_null.get(), request.stdout_fd, request.stderr_fd, error_write.get(), fd_limit);
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

}  // namespace

std::string errno_text(int error) { return std::string(::strerror(error)); }

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", what, errno_text(errno)));
}

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

int decode_status(int status) {
  if (status == -1) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

pid_t spawn(const SpawnRequest& request) {
  install_process_safety_net();
  pid_t pid = -1;
  Spawner::instance().run([&] { pid = spawn_now(request); });
  return pid;
}

// /proc/PID/stat, or "" once the process is gone. Read with read(2): libstdc++'s filebuf
// throws when a read fails, as it does (ESRCH) for a process that exits between the open and
// the read.
static std::string proc_stat(pid_t pid) {
  const std::string path = fmt::format("/proc/{}/stat", pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string stat(4096, '\0');
  const ssize_t got = ::read(fd, stat.data(), stat.size());
  ::close(fd);
  stat.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return stat;
}

char process_state(pid_t pid) {
  const std::string stat = proc_stat(pid);
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return '?';
  return stat[paren + 2];
}

pid_t parent_pid(pid_t pid) {
  const std::string stat = proc_stat(pid);
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 4 >= stat.size()) return -1;
  return static_cast<pid_t>(std::strtol(stat.c_str() + paren + 4, nullptr, 10));  // ") S PPID"
}

std::vector<pid_t> child_pids_of(pid_t parent) {
  std::vector<pid_t> children;
  std::error_code error;
  fs::directory_iterator entry("/proc", error);
  for (; !error && entry != fs::directory_iterator(); entry.increment(error)) {
    const std::string name = entry->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10));
    if (parent_pid(pid) == parent) children.push_back(pid);
  }
  return children;
}

bool wait_for_stop_state(pid_t pid, bool stopped, milliseconds timeout) {
  return wait_until([&] { return (process_state(pid) == 'T') == stopped; }, timeout,
                    milliseconds(1));
}

bool child_running(pid_t pid) {
  if (!is_registered(pid)) return false;  // reaped by the exit safety net
  if (!reap(pid, milliseconds(0))) return true;
  unregister_child(pid);
  return false;
}

void kill_child(pid_t pid) noexcept {
  if (pid <= 0 || !is_registered(pid)) return;
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  reap(pid, std::chrono::seconds(5));
  unregister_child(pid);
}

std::vector<bool> terminate_children(const std::vector<pid_t>& pids,
                                     milliseconds timeout) noexcept {
  std::vector<bool> clean(pids.size(), false);
  for (const pid_t pid : pids) {
    if (pid > 0 && is_registered(pid)) {
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGCONT);
    }
  }
  const auto deadline = Clock::now() + timeout;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] <= 0 || !is_registered(pids[i])) continue;
    const auto left = std::max(milliseconds(0),
                               std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    if (const auto status = reap(pids[i], left)) {
      unregister_child(pids[i]);
      clean[i] = *status != -1 && WIFEXITED(*status);
    }
  }
  for (const pid_t pid : pids) kill_child(pid);
  return clean;
}

void set_stop_state(pid_t pid, bool stopped, const std::string& who) {
  ::kill(pid, stopped ? SIGSTOP : SIGCONT);
  if (!wait_for_stop_state(pid, stopped, std::chrono::seconds(2))) {
    throw std::runtime_error(
        fmt::format("{} did not {} within 2 s", who, stopped ? "stop" : "continue"));
  }
}

void launch_until_ready(const std::function<LaunchOutcome(std::string& failure)>& launch,
                        const std::function<bool()>& fixed_port,
                        const std::function<std::string()>& describe,
                        const std::function<std::string()>& log_tail) {
  constexpr int kAttempts = 8;
  std::string failure;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    switch (launch(failure)) {
      case LaunchOutcome::ready:
        return;
      case LaunchOutcome::port_taken:
        if (fixed_port()) std::this_thread::sleep_for(milliseconds(250));
        continue;
      case LaunchOutcome::failed:
        throw std::runtime_error(
            fmt::format("{} did not start: {}\n{}", describe(), failure, log_tail()));
    }
  }
  throw std::runtime_error(fmt::format("{} did not start: port taken on each of {} attempts\n{}",
                                       describe(), kAttempts, log_tail()));
}

fs::path temp_base() {
  const char* tmp = ::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? fs::path(tmp) : fs::path("/tmp");
}

fs::path make_temp_dir(const std::string& name, const fs::path& base) {
  std::string plain;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    plain += ok ? c : '_';
  }
  const fs::path parent = base.empty() ? temp_base() : base;
  std::string pattern = (parent / fmt::format("dlock-{}-XXXXXX", plain)).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw_errno(fmt::format("mkdtemp {}", pattern));
  return pattern;
}

void remove_temp_dir(const fs::path& dir, bool keep) noexcept {
  const char* flag = ::getenv("DLOCK_TEST_KEEP_DIRS");
  const bool keep_all = flag != nullptr && *flag != '\0' && std::string_view(flag) != "0";
  if (dir.empty() || keep || keep_all) return;
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

std::string read_file(const fs::path& path, std::uintmax_t from) {
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

std::string log_tails(const std::vector<fs::path>& files, std::size_t lines) {
  std::string out;
  for (const auto& file : files) {
    const std::string text = read_file(file);
    if (text.empty()) continue;
    out += fmt::format("--- {} (last {} lines) ---\n{}", file.string(), lines,
                       tail_lines(text, lines));
    if (out.back() != '\n') out += '\n';
  }
  return out.empty() ? "(no log output)" : out;
}

}  // namespace detail

using namespace detail;

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

}  // namespace dlock::test
