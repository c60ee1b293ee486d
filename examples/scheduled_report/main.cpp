// One instance of a service that sends a report every period. Run as many instances as you
// like, on as many hosts: each slot's report runs exactly once across all of them, even
// though their clocks disagree (report.cpp shows how).
//
//   DLOCK_CONFIG=dlock.yaml ./scheduled_report i1 [--period-ms 1000] [--journal runs.log]
//       [--work-ms 100-300] [--clock-offset-ms 0]
//
// The instance fires on its own clock at every period boundary and names the slot from the
// lock server's clock (dlock::nearest_slot): 300 ms early or late, it still names the slot
// everyone else names. --clock-offset-ms shifts its clock, to try that out on one host.
// SIGTERM or SIGINT stops it between reports. (tools/demo/schedule_supervisor runs several
// instances against each other and checks the outcome; scripts/demo runs it.)
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <string>
#include <thread>

#include "report.hpp"

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

std::atomic<bool> stop_requested{false};

extern "C" void on_stop_signal(int) { stop_requested = true; }

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

// Sleeps until `until` or a stop request, whichever comes first. Returns false on a stop.
bool sleep_until(SteadyClock::time_point until) {
  while (!stop_requested) {
    const auto now = SteadyClock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(until - now, 20ms));
  }
  return false;
}

struct Options {
  reports::Instance self;
  long long period_ms = 1000;
  long long clock_offset_ms = 0;
};

// Fires at every period boundary of this instance's clock until stopped.
void run(const Options& o) {
  const std::chrono::milliseconds period(o.period_ms);
  while (!stop_requested) {
    // This instance's idea of the time: the host clock plus its offset.
    const long long local_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count() +
                               o.clock_offset_ms;
    const long long next_boundary = (local_ms / o.period_ms + 1) * o.period_ms;
    if (!sleep_until(SteadyClock::now() + std::chrono::milliseconds(next_boundary - local_ms)))
      break;
    try {
      const dlock::Slot slot = dlock::nearest_slot(period);
      reports::produce_report(slot.index, o.self);
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}: {}\n", o.self.name, e.what());
    }
  }
}

[[noreturn]] void usage(const std::string& problem) {
  fmt::print(stderr,
             "scheduled_report: {}\n"
             "usage: scheduled_report NAME [--period-ms MS] [--journal FILE] [--work-ms MIN-MAX]"
             " [--clock-offset-ms MS]\n",
             problem);
  std::exit(2);
}

long long number(const std::string& text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) {
    usage(fmt::format("{} needs a number, got '{}'", what, text));
  }
  return v;
}

Options parse(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') usage("the instance's name comes first");
  Options o;
  o.self.name = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage(fmt::format("{} needs a value", arg));
    const std::string value = argv[++i];
    if (arg == "--period-ms") {
      o.period_ms = number(value, arg);
    } else if (arg == "--journal") {
      o.self.log_path = value;
    } else if (arg == "--clock-offset-ms") {
      o.clock_offset_ms = number(value, arg);
    } else if (arg == "--work-ms") {
      const auto dash = value.find('-');
      o.self.work_min_ms = static_cast<int>(number(value.substr(0, dash), arg));
      o.self.work_max_ms = dash == std::string::npos
                               ? o.self.work_min_ms
                               : static_cast<int>(number(value.substr(dash + 1), arg));
    } else {
      usage(fmt::format("unknown argument '{}'", arg));
    }
  }
  if (o.period_ms < 10 || o.self.work_min_ms < 0 || o.self.work_max_ms < o.self.work_min_ms) {
    usage("need period >= 10 ms and 0 <= work min <= work max");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  install_stop_handlers();
  // Every instance but one skips each slot, which dlock logs at info level: warnings only.
  dlock::set_log_level(dlock::LogLevel::kWarn);
  try {
    dlock::init();  // DLOCK_CONFIG
    run(options);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "scheduled_report: {}\n", e.what());
    return 1;
  }
}
