// ChildProcess: a helper program whose stdout a test reads line by line; run_command.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "process_support.hpp"
#include "redis_process.hpp"

namespace dlock::test {

using namespace detail;

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
                      options.merge_stderr ? write_end.get() : -1, std::move(options.cwd)});
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
