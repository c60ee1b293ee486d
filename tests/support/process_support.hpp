// What the harness's classes (redis_process.hpp) share: the registry of child processes
// (child_registry.cpp), starting and reaping them, and small POSIX and file helpers
// (process_spawn.cpp). For the harness only, not for tests.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock::test::detail {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

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

[[nodiscard]] std::string errno_text(int error);
/// Throws std::runtime_error "<what>: <strerror(errno)>".
[[noreturn]] void throw_errno(const std::string& what);

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env_overrides;  // "NAME=value"
  int stdout_fd = -1;                      // required
  int stderr_fd = -1;                      // -1: inherited
  std::string cwd = {};                    // working directory; empty: inherited
};

/// Forks and executes `request` from the harness's spawner thread, with stdin on /dev/null,
/// in a process group of its own, registered until it is reaped. Throws when the program
/// cannot be executed.
pid_t spawn(const SpawnRequest& request);
/// Raw wait status after the process exits, or nullopt if it is still running at `timeout`.
/// A child reaped by someone else (SIGCHLD ignored) reports -1.
std::optional<int> reap(pid_t pid, std::chrono::milliseconds timeout);
/// Exit code, or 128 + signal number (the shell's convention).
[[nodiscard]] int decode_status(int status);
/// State letter from /proc/PID/stat ('T' when stopped), or '?' if unreadable.
[[nodiscard]] char process_state(pid_t pid);
/// The parent's id from /proc/PID/stat, or -1 if unreadable (the process is gone).
[[nodiscard]] pid_t parent_pid(pid_t pid);
/// The processes whose parent is `parent`, from /proc (any user's). Never throws but for memory.
[[nodiscard]] std::vector<pid_t> child_pids_of(pid_t parent);
/// Waits (bounded by `timeout`) until `pid` is stopped ('T'), or running again when `stopped`
/// is false. False on timeout.
bool wait_for_stop_state(pid_t pid, bool stopped, std::chrono::milliseconds timeout);
/// True while the registered child `pid` runs; once it has exited (or the exit safety net
/// reaped it), reaps and unregisters it and returns false.
bool child_running(pid_t pid);
/// SIGKILL to the registered child `pid` and its process group; reaps and unregisters it.
void kill_child(pid_t pid) noexcept;
/// Stops several registered children by pid: SIGTERM (and SIGCONT, without which a stopped
/// process keeps SIGTERM pending) to each, one wait bounded by `timeout` for them all, then
/// SIGKILL to those left; each is reaped and unregistered. Element i is true when pids[i]
/// exited by itself (WIFEXITED) within the wait. Pids <= 0 and unregistered ones are skipped.
std::vector<bool> terminate_children(const std::vector<pid_t>& pids,
                                     std::chrono::milliseconds timeout) noexcept;
/// SIGSTOP (`stopped`) or SIGCONT to `pid`, then a wait of up to 2 s until the kernel reports
/// it stopped or running again. Throws std::runtime_error "<who> did not stop|continue ...".
void set_stop_state(pid_t pid, bool stopped, const std::string& who);

/// The registry (child_registry.cpp): a child is registered from fork until it is reaped.
void install_process_safety_net();
void register_child(pid_t child);
void unregister_child(pid_t child) noexcept;
[[nodiscard]] bool is_registered(pid_t child) noexcept;

/// How one attempt to start a server on its port ended.
enum class LaunchOutcome { ready, port_taken, failed };
/// Calls `launch` until the server is ready, at most 8 times while its port is taken: `launch`
/// picks another port unless the port is fixed (given, or kept across restarts), and before
/// retrying a fixed port this waits 250 ms, as it may be freed soon. Throws std::runtime_error
/// "<describe()> did not start: <failure>" followed by log_tail().
void launch_until_ready(const std::function<LaunchOutcome(std::string& failure)>& launch,
                        const std::function<bool()>& fixed_port,
                        const std::function<std::string()>& describe,
                        const std::function<std::string()>& log_tail);

/// A fresh directory "dlock-<name>-XXXXXX" (mkdtemp) under `base`, or under $TMPDIR (else
/// /tmp) when `base` is empty.
[[nodiscard]] fs::path make_temp_dir(const std::string& name, const fs::path& base = {});
/// $TMPDIR, or /tmp when unset or empty.
[[nodiscard]] fs::path temp_base();
/// Removes a harness directory unless `keep` or DLOCK_TEST_KEEP_DIRS=1. Never throws.
void remove_temp_dir(const fs::path& dir, bool keep) noexcept;

[[nodiscard]] std::string join(const std::vector<std::string>& words);
[[nodiscard]] std::string read_file(const std::filesystem::path& path, std::uintmax_t from = 0);
[[nodiscard]] std::uintmax_t file_size_or_zero(const std::filesystem::path& path);
/// The last `lines` lines of `text`.
[[nodiscard]] std::string tail_lines(const std::string& text, std::size_t lines);
/// The last `lines` lines of each non-empty file, each under a "--- FILE ---" header; "(no log
/// output)" when all are empty or missing.
[[nodiscard]] std::string log_tails(const std::vector<fs::path>& files, std::size_t lines);

}  // namespace dlock::test::detail
