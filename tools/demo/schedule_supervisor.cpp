// The check behind scripts/demo's scheduled-task example: runs several instances of
// examples/scheduled_report against each other, with clocks that disagree, random start
// delays, and one instance killed in the middle of a run and started again; then compares
// what the instances journaled with the run records on the lock server.
//
//   DLOCK_CONFIG=dlock.yaml ./schedule_supervisor PATH/TO/scheduled_report [--instances 5]
//       [--slots 20] [--period-ms 1000] [--max-offset-ms 300] [--max-start-delay-ms 2000]
//       [--work-ms 100-300] [--no-restart]
//
// It prints one row per slot and exits 0 only if every slot of the window ran exactly once
// and the records agree.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <dlock/admin.hpp>
#include <dlock/dlock.hpp>
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

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// SIGTERM and SIGINT are blocked in every thread and taken by sleep_until, so that a stop
// still ends the instances and cleans up.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Sleeps until `until` or a stop request, whichever comes first. Returns false on a stop.
bool sleep_until(SteadyClock::time_point until) {
  static bool stopped = false;
  const sigset_t set = stop_signals();
  for (auto now = SteadyClock::now(); !stopped && now < until; now = SteadyClock::now()) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
    const timespec timeout{static_cast<time_t>(left / 1000000000),
                           static_cast<long>(left % 1000000000)};
    stopped = ::sigtimedwait(&set, nullptr, &timeout) > 0;
  }
  return !stopped;
}

struct Options {
  std::string program;  // the scheduled_report example
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

// Starts `c` after `start_delay_ms`. The child dies with the supervisor.
pid_t spawn(const Options& o, const Child& c, long long start_delay_ms) {
  const std::vector<std::string> args = {
      o.program,           c.name,
      "--period-ms",       std::to_string(o.period_ms),
      "--journal",         c.log_path,
      "--clock-offset-ms", std::to_string(c.offset_ms),
      "--work-ms",         fmt::format("{}-{}", o.work_min_ms, o.work_max_ms)};
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const timespec delay{static_cast<time_t>(start_delay_ms / 1000),
                       static_cast<long>(start_delay_ms % 1000 * 1000000)};
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Between fork and exec: async-signal-safe calls only.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::nanosleep(&delay, nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
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

std::string signed_ms(long long ms) {
  return ms > 0 ? fmt::format("+{} ms", ms) : fmt::format("{} ms", ms);
}

// The slots checked, named from the server's clock.
struct Window {
  dlock::Slot now;
  std::int64_t first = 0;
  std::int64_t last = 0;
  long long period_ms = 0;

  // Slot s starts at this steady time, by the server's clock.
  [[nodiscard]] SteadyClock::time_point start_of(std::int64_t s) const {
    return now.next_starts_at + std::chrono::milliseconds((s - now.index - 1) * period_ms);
  }
};

Window window_of(const Options& o) {
  Window w;
  w.period_ms = o.period_ms;
  w.now = dlock::current_slot(std::chrono::milliseconds(o.period_ms));
  // The window starts once every instance is up, whatever its start delay.
  w.first = w.now.index + 2 + (o.max_start_delay_ms + o.period_ms - 1) / o.period_ms;
  w.last = w.first + o.slots - 1;
  return w;
}

// Starts the instances, their clock offsets spread evenly over [-max, +max].
std::vector<Child> start_instances(const Options& o, const std::filesystem::path& dir) {
  std::mt19937 rng(std::random_device{}());
  std::vector<Child> children;
  for (int i = 0; i < o.instances; ++i) {
    Child c;
    c.name = fmt::format("i{}", i + 1);
    c.offset_ms =
        o.instances == 1 ? 0 : -o.max_offset_ms + 2 * o.max_offset_ms * i / (o.instances - 1);
    c.log_path = (dir / (c.name + ".log")).string();
    const long long delay =
        o.max_start_delay_ms > 0 ? static_cast<long long>(rng() % (o.max_start_delay_ms + 1)) : 0;
    c.pid = spawn(o, c, delay);
    fmt::print("  started {} (pid {}): clock offset {}, start delay {} ms\n", c.name, c.pid,
               signed_ms(c.offset_ms), delay);
    children.push_back(c);
  }
  std::fflush(stdout);
  return children;
}

// Kills the instance whose clock runs furthest ahead (it fires first, so it runs most slots)
// during one of its runs, 40% into the window, and starts it again two periods later.
// Returns false when interrupted; `note` says what happened.
bool kill_and_restart(const Options& o, const Window& w, Child& victim, std::string& note) {
  const auto period = std::chrono::milliseconds(o.period_ms);
  if (!sleep_until(w.start_of(w.first + o.slots * 2 / 5))) return false;
  const auto give_up = SteadyClock::now() + 4 * period;
  std::optional<std::int64_t> during;
  while (SteadyClock::now() < give_up && !(during = running_slot(victim.log_path))) {
    if (!sleep_until(SteadyClock::now() + 2ms)) return false;
  }
  const pid_t old = victim.pid;
  stop_child(victim, SIGKILL);
  note = during ? fmt::format("killed {} (pid {}) during its run of slot {}", victim.name, old,
                              *during)
                : fmt::format("killed {} (pid {}) between runs", victim.name, old);
  fmt::print("  {}\n", note);
  std::fflush(stdout);
  if (!sleep_until(SteadyClock::now() + 2 * period)) return false;
  victim.pid = spawn(o, victim, 0);
  fmt::print("  restarted {} (pid {})\n", victim.name, victim.pid);
  std::fflush(stdout);
  return true;
}

// What the instances journaled and what the lock server recorded, for the window's slots.
struct Outcome {
  std::map<std::int64_t, std::vector<std::string>> ran;  // slot -> instances that ran it
  std::set<std::pair<std::int64_t, std::string>> done;   // (slot, instance) that finished
  std::map<std::string, long long> offset_of;
  std::map<std::int64_t, dlock::RunRecord> records;
};

Outcome collect(const std::vector<Child>& children, const Window& w) {
  Outcome out;
  for (const auto& c : children) {
    out.offset_of[c.name] = c.offset_ms;
    for (const Event& e : read_journal(c.log_path)) {
      if (e.slot < w.first || e.slot > w.last) continue;
      if (e.what == "ran") out.ran[e.slot].push_back(e.instance);
      if (e.what == "done") out.done.insert({e.slot, e.instance});
    }
  }
  const dlock::Admin admin(dlock::client());
  for (auto& r : admin.runs("report:*")) {
    const std::int64_t slot = std::strtoll(r.key.c_str() + 7, nullptr, 10);
    if (slot >= w.first && slot <= w.last) out.records[slot] = std::move(r);
  }
  return out;
}

struct Counts {
  int once = 0, duplicates = 0, missed = 0, disagreements = 0;
};

// Prints the row of slot `s` and counts it.
void report_slot(const Outcome& out, std::int64_t s, Counts& n) {
  const auto it = out.ran.find(s);
  const std::size_t runs = it == out.ran.end() ? 0 : it->second.size();
  const auto rec = out.records.find(s);
  std::string by = "-", offset, note;
  if (runs == 0) {
    ++n.missed;
    note = "MISSED";
  } else {
    by = it->second.front();
    offset = signed_ms(out.offset_of.at(by));
    if (runs == 1) ++n.once;
    if (runs > 1) {
      n.duplicates += static_cast<int>(runs) - 1;
      for (std::size_t k = 1; k < runs; ++k) by += "+" + it->second[k];
      note = "DUPLICATE ";
    }
  }
  if (rec == out.records.end()) {
    if (runs > 0) ++n.disagreements;
    note += runs > 0 ? "no record (DISAGREES)" : "no record";
  } else {
    const auto& r = rec->second;
    if (runs == 0 || r.label != it->second.front()) ++n.disagreements;
    if (r.finished_at_ms > 0) {
      note += fmt::format("{} by {}, token {}, took {} ms", r.outcome, r.label, r.token,
                          r.finished_at_ms - r.started_at_ms);
    } else {
      const bool killed = runs > 0 && !out.done.count({s, by});
      note += fmt::format("started by {}, token {}, never finished{}", r.label, r.token,
                          killed ? ": killed during the run, not run again" : "");
    }
  }
  fmt::print("  {:<14} {:<8} {:<14} {}\n", s, by, offset, note);
}

int supervise(const Options& o) {
  const sigset_t stop = stop_signals();
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before dlock::init() starts threads
  dlock::set_log_level(dlock::LogLevel::kWarn);
  dlock::init();
  const Window w = window_of(o);
  const auto dir =
      std::filesystem::temp_directory_path() / fmt::format("dlock-schedule-{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::vector<Child> children = start_instances(o, dir);
  std::string restart_note;
  bool interrupted = false;
  if (o.restart && o.instances > 1) {
    interrupted = !kill_and_restart(o, w, children.back(), restart_note);
  }
  // Past the window's last slot, and the longest run in it.
  const auto end = w.start_of(w.last + 1) + std::chrono::milliseconds(o.work_max_ms + o.period_ms);
  if (!interrupted) interrupted = !sleep_until(end);
  for (auto& c : children) stop_child(c, SIGTERM);
  if (interrupted) {
    fmt::print("interrupted\n");
    std::filesystem::remove_all(dir);
    return 1;
  }
  const Outcome out = collect(children, w);
  Counts n;
  fmt::print("\n  {:<14} {:<8} {:<14} {}\n", "slot", "ran by", "clock offset", "run record");
  for (std::int64_t s = w.first; s <= w.last; ++s) report_slot(out, s, n);
  fmt::print("\n");
  if (!restart_note.empty()) {
    fmt::print("  {}; it was started again two periods later\n", restart_note);
  }
  fmt::print("  run records in Redis that disagree with the instances' journals: {}\n",
             n.disagreements);
  fmt::print("slots: {}, ran exactly once: {}, duplicates: {}, missed: {}\n", o.slots, n.once,
             n.duplicates, n.missed);
  std::fflush(stdout);
  std::filesystem::remove_all(dir);
  return n.once == o.slots && n.duplicates == 0 && n.missed == 0 && n.disagreements == 0 ? 0 : 1;
}

[[noreturn]] void usage(const std::string& problem) {
  fmt::print(stderr,
             "schedule_supervisor: {} (see the top of tools/demo/schedule_supervisor.cpp)\n",
             problem);
  std::exit(2);
}

long long number(const std::string& text, const std::string& what) {
  long long v = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (error == std::errc() && end == text.data() + text.size()) return v;
  usage(fmt::format("{} needs a number, got '{}'", what, text));
}

// Sets the option `arg` from `value`.
void set_option(Options& o, const std::string& arg, const std::string& value) {
  if (arg == "--instances")
    o.instances = static_cast<int>(number(value, arg));
  else if (arg == "--slots")
    o.slots = static_cast<int>(number(value, arg));
  else if (arg == "--period-ms")
    o.period_ms = number(value, arg);
  else if (arg == "--max-offset-ms")
    o.max_offset_ms = number(value, arg);
  else if (arg == "--max-start-delay-ms")
    o.max_start_delay_ms = number(value, arg);
  else if (arg == "--work-ms") {
    const auto dash = value.find('-');
    o.work_min_ms = static_cast<int>(number(value.substr(0, dash), arg));
    o.work_max_ms = dash == std::string::npos
                        ? o.work_min_ms
                        : static_cast<int>(number(value.substr(dash + 1), arg));
  } else {
    usage(fmt::format("unknown argument '{}'", arg));
  }
}

Options parse(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') usage("the scheduled_report program comes first");
  Options o;
  o.program = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-restart") {
      o.restart = false;
      continue;
    }
    if (i + 1 >= argc) usage(fmt::format("{} needs a value", arg));
    set_option(o, arg, argv[++i]);
  }
  if (o.instances < 1 || o.slots < 1 || o.period_ms < 10 || o.max_offset_ms < 0 ||
      o.max_offset_ms * 2 >= o.period_ms || o.max_start_delay_ms < 0 || o.work_min_ms < 0 ||
      o.work_max_ms < o.work_min_ms) {
    usage(
        "need instances >= 1, slots >= 1, period >= 10 ms, 0 <= offset < period/2, "
        "0 <= work min <= work max");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    fmt::print(
        "{} instances, {} slots of {} ms, clock offsets up to ±{} ms, start delays up to {} ms\n",
        o.instances, o.slots, o.period_ms, o.max_offset_ms, o.max_start_delay_ms);
    std::fflush(stdout);  // or the children would print the buffered banner again
    return supervise(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "schedule_supervisor: {}\n", e.what());
    return 1;
  }
}
