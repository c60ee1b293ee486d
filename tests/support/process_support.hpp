// What the harness's classes (redis_process.hpp) share: the registry of child processes
// (child_registry.cpp), starting and reaping them, and small POSIX and file helpers
// (process_spawn.cpp). For the harness only, not for tests.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
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

/// The registry (child_registry.cpp): a child is registered from fork until it is reaped.
void install_process_safety_net();
void register_child(pid_t child);
void unregister_child(pid_t child) noexcept;
[[nodiscard]] bool is_registered(pid_t child) noexcept;

[[nodiscard]] std::string join(const std::vector<std::string>& words);
[[nodiscard]] std::string read_file(const std::filesystem::path& path, std::uintmax_t from = 0);
[[nodiscard]] std::uintmax_t file_size_or_zero(const std::filesystem::path& path);
/// The last `lines` lines of `text`.
[[nodiscard]] std::string tail_lines(const std::string& text, std::size_t lines);

}  // namespace dlock::test::detail
