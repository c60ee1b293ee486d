// A job run on a thread of its own, one at a time: a caller that must not wait for slow
// work (a connect to a stopped server, a slot-map read) starts it here and goes on.
//
//   BackgroundJob opener;                          // declared after what the job uses
//   if (!opener.start([this] { open(); })) ...;    // still running, or no thread to be had
#pragma once

#include <functional>
#include <mutex>
#include <thread>

namespace dlock::internal {

class BackgroundJob {
 public:
  BackgroundJob() = default;
  /// Waits for a running job: declare the member after everything its job touches.
  ~BackgroundJob();
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  /// Starts `job` unless the previous one still runs. False if it runs, or if no thread
  /// could be started (the job is then not run).
  bool start(std::function<void()> job);
  /// Whether a job runs.
  [[nodiscard]] bool running();

 private:
  std::mutex mutex_;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace dlock::internal
