// BackgroundJob: one job at a time on a thread of its own, waited for on destruction.
#include "background_job.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace dlock::internal {
namespace {

using namespace std::chrono_literals;

// A latch the test opens to let a job finish.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [this] { return open; });
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      open = true;
    }
    cv.notify_all();
  }
};

TEST(BackgroundJob, ASecondJobIsRefusedWhileTheFirstRunsAndStartsOnceItEnded) {
  Gate gate;
  std::atomic<int> runs{0};
  BackgroundJob job{"dlock-test"};  // after what its jobs use: it waits for them first
  ASSERT_TRUE(job.start([&] {
    gate.wait();
    ++runs;
  }));
  EXPECT_TRUE(job.running());
  EXPECT_FALSE(job.start([&] { runs += 100; })) << "a second job started beside the first";
  gate.release();
  for (int i = 0; i < 500 && job.running(); ++i) std::this_thread::sleep_for(2ms);
  ASSERT_FALSE(job.running()) << "the first job never ended";
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(job.start([&] { ++runs; }));
}

// The pool's opener: a job that has done its work but not yet returned is waited for, not
// taken for a thread that could not be started.
TEST(BackgroundJob, WaitingForThePreviousJobStartsTheNextOnceItEnds) {
  std::atomic<int> runs{0};
  BackgroundJob job{"dlock-test"};
  ASSERT_TRUE(job.start([&] {
    std::this_thread::sleep_for(30ms);
    ++runs;
  }));
  EXPECT_TRUE(job.start([&] { ++runs; }, BackgroundJob::Previous::kWait));
  for (int i = 0; i < 500 && job.running(); ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(runs.load(), 2);
}

TEST(BackgroundJob, DestructionWaitsForTheRunningJob) {
  std::atomic<bool> finished{false};
  {
    BackgroundJob job{"dlock-test"};
    ASSERT_TRUE(job.start([&] {
      std::this_thread::sleep_for(50ms);
      finished = true;
    }));
  }
  EXPECT_TRUE(finished.load()) << "the job outlived its BackgroundJob";
}

TEST(BackgroundJob, AJobThatThrowsLeavesRoomForTheNext) {
  std::atomic<bool> ran{false};
  BackgroundJob job{"dlock-test"};
  ASSERT_TRUE(job.start([] { throw std::runtime_error("boom"); }));
  for (int i = 0; i < 500 && job.running(); ++i) std::this_thread::sleep_for(2ms);
  ASSERT_FALSE(job.running());
  ASSERT_TRUE(job.start([&] { ran = true; }));
  for (int i = 0; i < 500 && job.running(); ++i) std::this_thread::sleep_for(2ms);
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace dlock::internal
