// A job run on a thread of its own, one at a time: a caller that must not wait for slow
// work (a connect to a stopped server, a slot-map read) starts it here and goes on.
//
//   BackgroundJob opener{"dlock-connect"};         // declared after what the job uses
//   if (!opener.start([this] { open(); })) ...;    // still running, or no thread to be had
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace dlock::internal {

class BackgroundJob {
 public:
  /// `name` names the job's threads (at most 15 characters: `top -H`, `ps -L`).
  explicit BackgroundJob(const char* name) : name_(name) {}
  /// Waits for a running job: declare the member after everything its job touches.
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  /// What start() does while the previous job still runs: returns false at once, or waits
  /// for it to end (for a caller that knows it is finishing).
  enum class Previous { kSkip, kWait };
  /// Starts `job` on a new thread. False if the previous one still runs (kSkip), or if no
  /// thread could be started: the job is then not run.
  bool start(std::function<void()> job, Previous previous = Previous::kSkip);
  /// Whether a job runs.
  [[nodiscard]] bool running();

 private:
  const char* const name_;
  std::mutex mutex_;
  std::condition_variable ended_;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace dlock::internal
