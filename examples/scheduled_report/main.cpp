// Several instances of a service run a report every period; each slot's report must run
// exactly once across all of them, although their clocks disagree, they start at random
// moments, and one of them is killed in the middle of a run and started again.
//
//   DLOCK_CONFIG=dlock.yaml ./scheduled_report [--instances 5] [--slots 20] [--period-ms 1000]
//       [--max-offset-ms 300] [--max-start-delay-ms 2000] [--work-ms 100-300] [--no-restart]
//
// This process is the supervisor: it starts the instances (this program again, in
// `instance` mode), kills and restarts one, stops them all, and then checks the journal the
// instances wrote against the run records in Redis. It prints one row per slot and exits 0
// only if every slot of the window ran exactly once and the records agree.
//
// An instance fires on its own clock, shifted by its offset, at every period boundary, and
// names the slot from the lock server's clock (dlock::nearest_slot): 300 ms early or late, it
// still names the slot everyone else names.
#include <dlock/admin.hpp>
#include <dlock/dlock.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

// ---- instance mode -------------------------------------------------------------------

struct InstanceArgs {
  reports::Instance self;
  long long offset_ms = 0;
  long long start_delay_ms = 0;
  long long period_ms = 1000;
};

int run_instance(const InstanceArgs& args) {
  install_stop_handlers();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
  dlock::set_log_level(dlock::LogLevel::kWarn);
  if (!sleep_until(SteadyClock::now() + std::chrono::milliseconds(args.start_delay_ms))) return 0;
  dlock::init();
  const std::chrono::milliseconds period(args.period_ms);
  while (!stop_requested) {
    // This instance's idea of the time: the host clock plus its offset.
    const long long local_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count() +
        args.offset_ms;
    const long long next_boundary = (local_ms / args.period_ms + 1) * args.period_ms;
    if (!sleep_until(SteadyClock::now() + std::chrono::milliseconds(next_boundary - local_ms))) break;
    try {
      const dlock::Slot slot = dlock::nearest_slot(period);
      reports::produce_report(slot.index, args.self);
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}: {}\n", args.self.name, e.what());
    }
  }
  return 0;
}

// ---- supervisor mode -----------------------------------------------------------------

struct Options {
  int instances = 5;
  int slots = 20;
  long long period_ms = 1000;
  long long max_offset_ms = 300;
  long long max_start_delay_ms = 2000;
  int work_min_ms = 100;
  int work_max_ms = 300;
  bool restart = true;
};

struct Child {
  std::string name;
  long long offset_ms = 0;
  pid_t pid = -1;
  std::string log_path;
};

pid_t spawn(const Options& o, const Child& c, long long start_delay_ms) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const std::vector<std::string> args = {
      "scheduled_report", "instance", c.name, std::to_string(c.offset_ms), std::to_string(start_delay_ms),
      std::to_string(o.period_ms), c.log_path, std::to_string(o.work_min_ms), std::to_string(o.work_max_ms)};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::_Exit(127);
}

void stop_child(Child& c, int sig) {
  if (c.pid <= 0) return;
  ::kill(c.pid, sig);
  for (int i = 0; i < 500; ++i) {  // 5 s, then SIGKILL
    int status = 0;
    if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
      c.pid = -1;
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  ::kill(c.pid, SIGKILL);
  ::waitpid(c.pid, nullptr, 0);
  c.pid = -1;
}

struct Event {
  std::string what;
  std::int64_t slot = 0;
  std::string instance;
  std::uint64_t token = 0;
};

std::vector<Event> read_journal(const std::string& path) {
  std::vector<Event> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Event e;
    std::int64_t at = 0;
    if (fields >> e.what >> e.slot >> e.instance >> e.token >> at) out.push_back(e);
  }
  return out;
}

// True while the journal's last line is a "ran" (the instance is in the middle of a run).
std::optional<std::int64_t> running_slot(const std::string& path) {
  const std::vector<Event> events = read_journal(path);
  if (events.empty() || events.back().what != "ran") return std::nullopt;
  return events.back().slot;
}

std::string signed_ms(long long ms) { return ms > 0 ? fmt::format("+{} ms", ms) : fmt::format("{} ms", ms); }

int supervise(const Options& o) {
  install_stop_handlers();
  dlock::init();
  dlock::set_log_level(dlock::LogLevel::kWarn);
  const std::chrono::milliseconds period(o.period_ms);
  const dlock::Slot now = dlock::current_slot(period);
  // Slot s starts at this steady time, by the server's clock.
  const auto start_of = [&](std::int64_t s) {
    return now.next_starts_at + std::chrono::milliseconds((s - now.index - 1) * o.period_ms);
  };
  // The window starts once every instance is up, whatever its start delay.
  const std::int64_t first = now.index + 2 + (o.max_start_delay_ms + o.period_ms - 1) / o.period_ms;
  const std::int64_t last = first + o.slots - 1;

  const auto dir = std::filesystem::temp_directory_path() / fmt::format("dlock-schedule-{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::mt19937 rng(std::random_device{}());
  std::vector<Child> children;
  for (int i = 0; i < o.instances; ++i) {
    Child c;
    c.name = fmt::format("i{}", i + 1);
    // Spread evenly over [-max, +max].
    c.offset_ms = o.instances == 1 ? 0 : -o.max_offset_ms + 2 * o.max_offset_ms * i / (o.instances - 1);
    c.log_path = (dir / (c.name + ".log")).string();
    const long long delay = o.max_start_delay_ms > 0 ? static_cast<long long>(rng() % (o.max_start_delay_ms + 1)) : 0;
    c.pid = spawn(o, c, delay);
    fmt::print("  started {} (pid {}): clock offset {}, start delay {} ms\n", c.name, c.pid, signed_ms(c.offset_ms),
               delay);
    children.push_back(c);
  }
  std::fflush(stdout);

  std::string restart_note;
  bool interrupted = false;
  if (o.restart && o.instances > 1) {
    // Kill the instance whose clock runs furthest ahead (it fires first, so it runs most
    // slots) during one of its runs, 40% into the window; start it again two periods later.
    Child& victim = children.back();
    interrupted = !sleep_until(start_of(first + o.slots * 2 / 5));
    const auto give_up = SteadyClock::now() + 4 * period;
    std::optional<std::int64_t> during;
    while (!interrupted && SteadyClock::now() < give_up && !(during = running_slot(victim.log_path))) {
      interrupted = !sleep_until(SteadyClock::now() + 2ms);
    }
    if (!interrupted) {
      const pid_t old = victim.pid;
      stop_child(victim, SIGKILL);
      restart_note = during ? fmt::format("killed {} (pid {}) during its run of slot {}", victim.name, old, *during)
                            : fmt::format("killed {} (pid {}) between runs", victim.name, old);
      fmt::print("  {}\n", restart_note);
      std::fflush(stdout);
      interrupted = !sleep_until(SteadyClock::now() + 2 * period);
      if (!interrupted) {
        victim.pid = spawn(o, victim, 0);
        fmt::print("  restarted {} (pid {})\n", victim.name, victim.pid);
        std::fflush(stdout);
      }
    }
  }
  // Past the window's last slot, and the longest run in it.
  if (!interrupted) interrupted = !sleep_until(start_of(last + 1) + std::chrono::milliseconds(o.work_max_ms) + period);
  for (auto& c : children) stop_child(c, SIGTERM);
  if (interrupted) {
    fmt::print("interrupted\n");
    std::filesystem::remove_all(dir);
    return 1;
  }

  // What the instances say they ran.
  std::map<std::int64_t, std::vector<std::string>> ran;
  std::set<std::pair<std::int64_t, std::string>> done;
  std::map<std::string, long long> offset_of;
  for (const auto& c : children) {
    offset_of[c.name] = c.offset_ms;
    for (const Event& e : read_journal(c.log_path)) {
      if (e.slot < first || e.slot > last) continue;
      if (e.what == "ran") ran[e.slot].push_back(e.instance);
      if (e.what == "done") done.insert({e.slot, e.instance});
    }
  }
  // What Redis recorded.
  std::map<std::int64_t, dlock::RunRecord> records;
  const dlock::Admin admin(dlock::client());
  for (auto& r : admin.runs("report:*")) {
    const std::int64_t slot = std::strtoll(r.key.c_str() + 7, nullptr, 10);
    if (slot >= first && slot <= last) records[slot] = std::move(r);
  }

  int once = 0, duplicates = 0, missed = 0, disagreements = 0;
  fmt::print("\n  {:<14} {:<8} {:<14} {}\n", "slot", "ran by", "clock offset", "run record");
  for (std::int64_t s = first; s <= last; ++s) {
    const auto it = ran.find(s);
    const std::size_t runs = it == ran.end() ? 0 : it->second.size();
    const auto rec = records.find(s);
    std::string by = "-", offset = "", note;
    if (runs == 0) {
      ++missed;
      note = "MISSED";
    } else {
      by = it->second.front();
      offset = signed_ms(offset_of[by]);
      if (runs == 1) ++once;
      if (runs > 1) {
        duplicates += static_cast<int>(runs) - 1;
        for (std::size_t k = 1; k < runs; ++k) by += "+" + it->second[k];
        note = "DUPLICATE ";
      }
    }
    if (rec == records.end()) {
      if (runs > 0) ++disagreements;
      note += runs > 0 ? "no record (DISAGREES)" : "no record";
    } else {
      const auto& r = rec->second;
      if (runs == 0 || r.label != it->second.front()) ++disagreements;
      if (r.finished_at_ms > 0) {
        note += fmt::format("{} by {}, token {}, took {} ms", r.outcome, r.label, r.token,
                            r.finished_at_ms - r.started_at_ms);
      } else {
        note += fmt::format("started by {}, token {}, never finished{}", r.label, r.token,
                            runs > 0 && !done.count({s, by}) ? ": killed during the run, not run again" : "");
      }
    }
    fmt::print("  {:<14} {:<8} {:<14} {}\n", s, by, offset, note);
  }
  fmt::print("\n");
  if (!restart_note.empty()) fmt::print("  {}; it was started again two periods later\n", restart_note);
  fmt::print("  run records in Redis that disagree with the instances' journals: {}\n", disagreements);
  fmt::print("slots: {}, ran exactly once: {}, duplicates: {}, missed: {}\n", o.slots, once, duplicates, missed);
  std::fflush(stdout);
  std::filesystem::remove_all(dir);
  return once == o.slots && duplicates == 0 && missed == 0 && disagreements == 0 ? 0 : 1;
}

long long number(const char* text, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0') {
    fmt::print(stderr, "scheduled_report: {} needs a number, got '{}'\n", what, text);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 9 && std::string(argv[1]) == "instance") {
      InstanceArgs a;
      a.self.name = argv[2];
      a.offset_ms = number(argv[3], "offset");
      a.start_delay_ms = number(argv[4], "start delay");
      a.period_ms = number(argv[5], "period");
      a.self.log_path = argv[6];
      a.self.work_min_ms = static_cast<int>(number(argv[7], "work min"));
      a.self.work_max_ms = static_cast<int>(number(argv[8], "work max"));
      return run_instance(a);
    }
    Options o;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto value = [&](const char* what) {
        if (i + 1 >= argc) {
          fmt::print(stderr, "scheduled_report: {} needs a value\n", what);
          std::exit(2);
        }
        return number(argv[++i], what);
      };
      if (arg == "--instances") o.instances = static_cast<int>(value("--instances"));
      else if (arg == "--slots") o.slots = static_cast<int>(value("--slots"));
      else if (arg == "--period-ms") o.period_ms = value("--period-ms");
      else if (arg == "--max-offset-ms") o.max_offset_ms = value("--max-offset-ms");
      else if (arg == "--max-start-delay-ms") o.max_start_delay_ms = value("--max-start-delay-ms");
      else if (arg == "--no-restart") o.restart = false;
      else if (arg == "--work-ms" && i + 1 < argc) {
        const std::string span = argv[++i];
        const auto dash = span.find('-');
        o.work_min_ms = static_cast<int>(number(span.substr(0, dash).c_str(), "--work-ms"));
        o.work_max_ms = dash == std::string::npos ? o.work_min_ms
                                                  : static_cast<int>(number(span.substr(dash + 1).c_str(), "--work-ms"));
      } else {
        fmt::print(stderr, "scheduled_report: unknown argument '{}' (see the top of examples/scheduled_report/main.cpp)\n",
                   arg);
        return 2;
      }
    }
    if (o.instances < 1 || o.slots < 1 || o.period_ms < 10 || o.max_offset_ms < 0 ||
        o.max_offset_ms * 2 >= o.period_ms || o.max_start_delay_ms < 0 || o.work_min_ms < 0 ||
        o.work_max_ms < o.work_min_ms) {
      fmt::print(stderr,
                 "scheduled_report: need instances >= 1, slots >= 1, period >= 10 ms, 0 <= offset < period/2, "
                 "0 <= work min <= work max\n");
      return 2;
    }
    fmt::print("{} instances, {} slots of {} ms, clock offsets up to ±{} ms, start delays up to {} ms\n",
               o.instances, o.slots, o.period_ms, o.max_offset_ms, o.max_start_delay_ms);
    std::fflush(stdout);  // or the children would print the buffered banner again
    return supervise(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "scheduled_report: {}\n", e.what());
    return 1;
  }
}
