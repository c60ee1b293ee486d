// Several processes increment one counter in a file, read-sleep-write, under a dlock lock.
// Without the lock, updates are lost; with it, the total is exact.
//
//   DLOCK_CONFIG=config/samples/single.yaml ./counter_demo [PROCESSES] [INCREMENTS]
#include <dlock/dlock.hpp>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace std::chrono_literals;

namespace {

int increment(const std::string& path, int increments) {
  dlock::init();
  dlock::LockSettings settings = dlock::client().config().resolve("counter_demo", "", {});
  settings.lease = 5s;
  settings.wait = 30s;
  for (int i = 0; i < increments; ++i) {
    dlock::Lease lease = dlock::client().acquire("demo:counter", settings, "counter_demo");
    if (!lease) {
      fmt::print(stderr, "pid {}: {}\n", ::getpid(), lease.error());
      return 1;
    }
    long value = 0;
    std::ifstream(path) >> value;
    std::this_thread::sleep_for(200us);
    std::ofstream(path, std::ios::trunc) << value + 1 << '\n';
  }
  const auto m = dlock::client().metrics();
  fmt::print("  pid {}: {} increments; found the lock busy {} times and waited; {} release "
             "notifications woke it\n",
             ::getpid(), increments, m.waits, m.wakeups);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int processes = argc > 1 ? std::atoi(argv[1]) : 4;
  const int increments = argc > 2 ? std::atoi(argv[2]) : 100;
  const auto path = std::filesystem::temp_directory_path() / fmt::format("dlock-counter-{}", ::getpid());
  std::ofstream(path) << 0 << '\n';

  fmt::print("{} processes x {} locked increments of one counter\n", processes, increments);
  const auto start = std::chrono::steady_clock::now();
  std::fflush(stdout);  // or every child would print the buffered banner again
  for (int p = 0; p < processes; ++p) {
    if (::fork() == 0) {
      const int status = increment(path.string(), increments);
      std::fflush(stdout);  // _Exit skips stdio's flush
      std::_Exit(status);
    }
  }
  bool all_ok = true;
  for (int p = 0; p < processes; ++p) {
    int status = 0;
    ::wait(&status);
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  long total = 0;
  std::ifstream(path) >> total;
  std::filesystem::remove(path);
  const long expected = long(processes) * increments;
  fmt::print("counter: {} (expected {}), lost updates: {}, {} ms\n", total, expected, expected - total,
             took.count());
  return all_ok && total == expected ? 0 : 1;
}
