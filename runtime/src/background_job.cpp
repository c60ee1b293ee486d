#include "background_job.hpp"

#include <pthread.h>

#include <system_error>

#include "log.hpp"

namespace dlock::internal {

BackgroundJob::~BackgroundJob() {
  std::thread thread;
  {
    std::lock_guard lock(mutex_);
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
}

bool BackgroundJob::start(std::function<void()> job, Previous previous) {
  std::thread finished;
  bool started = false;
  {
    std::unique_lock lock(mutex_);
    if (running_ && previous == Previous::kSkip) return false;
    ended_.wait(lock, [this] { return !running_; });
    finished = std::move(thread_);  // done with its job: joined at once below
    running_ = true;
    try {
      thread_ = std::thread([this, job = std::move(job)] {
        ::pthread_setname_np(::pthread_self(), name_);
        try {
          job();
        } catch (...) {
          log(LogLevel::kError, "a background job ({}) failed", name_);
        }
        {
          std::lock_guard done(mutex_);
          running_ = false;
        }
        ended_.notify_all();
      });
      started = true;
    } catch (const std::system_error& e) {
      running_ = false;
      log(LogLevel::kError, "cannot start a background thread ({}): {}", name_, e.what());
    }
  }
  if (finished.joinable()) finished.join();
  return started;
}

bool BackgroundJob::running() {
  std::lock_guard lock(mutex_);
  return running_;
}

}  // namespace dlock::internal
