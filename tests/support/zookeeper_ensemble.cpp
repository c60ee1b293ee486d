// ZookeeperEnsemble: ZooKeeper servers (java ... QuorumPeerMain) in a throw-away directory
// (zookeeper_ensemble.hpp).
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "process_support.hpp"
#include "redis_process.hpp"
#include "zookeeper_ensemble.hpp"

#ifndef DLOCK_JAVA
#define DLOCK_JAVA ""
#endif
#ifndef DLOCK_ZOOKEEPER_CLASSPATH
#define DLOCK_ZOOKEEPER_CLASSPATH ""
#endif
#ifndef DLOCK_ZOOKEEPER_CDS_DIR
#define DLOCK_ZOOKEEPER_CDS_DIR ""
#endif

namespace dlock::test {

using namespace detail;

namespace {

constexpr const char* kHost = "127.0.0.1";
constexpr const char* kMainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
// How long one `srvr` may take; a paused or overloaded member counts as unreachable after it.
constexpr milliseconds kProbeTimeout{1000};

// A value in a Java properties file (zoo.cfg, log4j.properties): backslash escapes.
std::string property_value(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string xml_text(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
}

// The value of the "Mode: " line of a `srvr` answer, or "not serving" without one.
std::string mode_of(const std::string& answer) {
  const std::string key = "Mode: ";
  const auto at = answer.find(key);
  if (at == std::string::npos) return "not serving";
  const auto end = answer.find('\n', at);
  std::string mode = answer.substr(
      at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
  while (!mode.empty() && (mode.back() == '\r' || mode.back() == ' ')) mode.pop_back();
  return mode;
}

bool serves(const std::string& mode) {
  return mode == "leader" || mode == "follower" || mode == "standalone";
}

// The class-data-sharing archive of the server's classes (Options::class_data_sharing) in
// DLOCK_ZOOKEEPER_CDS_DIR (the build tree), named after what it depends on: the java program
// (resolved, with its time, which an upgrade changes), the classpath's files and their
// directories (whose times change when a package upgrade replaces a jar there, such as those
// zookeeper.jar's manifest names), with their times. A JVM finding an archive that does not fit
// uses none and says so in its output.log. Empty when there is no directory. Never destroyed:
// an ensemble that is a static of a test program stops (and asks for it) at exit.
fs::path class_archive() {
  static const fs::path& archive = *new fs::path([] {
    const fs::path dir = DLOCK_ZOOKEEPER_CDS_DIR;
    if (dir.empty() || zookeeper_java_program().empty()) return fs::path();
    std::error_code ignored;
    std::string key;
    const auto add_file = [&](const fs::path& file) {
      const fs::path real = fs::canonical(file, ignored);
      const auto time = fs::last_write_time(real, ignored);
      key += fmt::format("{}@{};", real.string(), time.time_since_epoch().count());
      const auto dir_time = fs::last_write_time(real.parent_path(), ignored);
      key += fmt::format("@{};", dir_time.time_since_epoch().count());
    };
    add_file(zookeeper_java_program());
    std::string_view classpath = DLOCK_ZOOKEEPER_CLASSPATH;
    for (std::size_t start = 0; start <= classpath.size();) {
      const auto colon = std::min(classpath.find(':', start), classpath.size());
      add_file(std::string(classpath.substr(start, colon - start)));
      start = colon + 1;
    }
    return dir / fmt::format("zookeeper-classes-{:016x}.jsa", std::hash<std::string>{}(key));
  }());
  return archive;
}

}  // namespace

std::string zookeeper_java_program() { return DLOCK_JAVA; }
std::string zookeeper_classpath() { return DLOCK_ZOOKEEPER_CLASSPATH; }

std::optional<std::string> zookeeper_four_letter_word(int port, const std::string& word,
                                                      milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const auto left_ms = [&] {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    return static_cast<int>(std::clamp<long long>(left.count(), 0, 60'000));
  };
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (sock.get() < 0) return std::nullopt;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    if (errno != EINPROGRESS) return std::nullopt;
    pollfd poller{sock.get(), POLLOUT, 0};
    if (::poll(&poller, 1, left_ms()) <= 0) return std::nullopt;
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      return std::nullopt;
    }
  }
  if (::send(sock.get(), word.data(), word.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(word.size())) {
    return std::nullopt;
  }
  std::string answer;
  for (;;) {
    pollfd poller{sock.get(), POLLIN, 0};
    const int ready = ::poll(&poller, 1, left_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    const ssize_t got = ::recv(sock.get(), chunk, sizeof chunk, 0);
    if (got > 0) {
      answer.append(chunk, static_cast<std::size_t>(got));
    } else if (got == 0) {
      return answer;
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      // A reset after the whole answer (the server closes with unread input) still counts.
      return answer.empty() ? std::nullopt : std::optional<std::string>(answer);
    }
  }
}

struct ZookeeperEnsemble::Impl {
  struct Member {
    int id = 0;  // ZooKeeper's id: index + 1
    fs::path dir;
    int client_port = 0;
    int quorum_port = 0;
    int election_port = 0;
    pid_t pid = -1;
    bool paused = false;
    std::uintmax_t log_offset = 0;  // of zookeeper.log and output.log at the last launch
    std::uintmax_t output_offset = 0;
    bool dumps_classes = false;  // runs with -XX:ArchiveClassesAtExit (class_archive())

    [[nodiscard]] fs::path config_file() const { return dir / "zoo.cfg"; }
    [[nodiscard]] fs::path data_dir() const { return dir / "data"; }
    [[nodiscard]] fs::path log_file() const { return dir / "zookeeper.log"; }
    [[nodiscard]] fs::path output_file() const { return dir / "output.log"; }
    [[nodiscard]] fs::path class_dump() const { return dir / "classes.jsa"; }
  };

  Options options;
  fs::path dir;
  std::vector<Member> members;
  bool ports_owned = false;  // the ensemble has run on its ports: restarts keep them

  [[nodiscard]] int count() const { return static_cast<int>(members.size()); }
  [[nodiscard]] int majority() const { return count() / 2 + 1; }

  Member& member(int i) {
    if (i < 0 || i >= count()) {
      throw std::out_of_range(
          fmt::format("{}: no member {} (members are 0..{})", options.name, i, count() - 1));
    }
    return members[static_cast<std::size_t>(i)];
  }

  [[nodiscard]] std::string describe() const {
    std::string ports;
    for (const auto& m : members)
      ports += fmt::format("{}{}", ports.empty() ? "" : ",", m.client_port);
    return fmt::format("{} ensemble ({} members, {} on {}:{}, dir {})", options.name,
                       members.size(), zookeeper_java_program(), kHost, ports, dir.string());
  }

  [[nodiscard]] std::string describe(const Member& m) const {
    return fmt::format("{} member {} (id {}, pid {}, {}:{}, dir {})", options.name, m.id - 1, m.id,
                       m.pid, kHost, m.client_port, m.dir.string());
  }

  [[nodiscard]] std::string log_tail(const Member& m, std::size_t lines) const {
    std::string text = log_tails({m.log_file(), m.output_file()}, lines);
    if (text.back() != '\n') text += '\n';
    return fmt::format("=== member {} (id {}) ===\n{}", m.id - 1, m.id, text);
  }

  [[nodiscard]] std::string log_tail(std::size_t lines) const {
    if (dir.empty()) return "(not started)";
    std::string out;
    for (const auto& m : members) out += log_tail(m, lines);
    return out;
  }

  void make_dirs() {
    if (!dir.empty()) return;
    if (zookeeper_java_program().empty() || zookeeper_classpath().empty()) {
      throw std::runtime_error(fmt::format(
          "ZookeeperEnsemble: {} was not found at configure time (install zookeeper and a "
          "java runtime, e.g. with scripts/install-deps, and configure again; or set "
          "DLOCK_JAVA / DLOCK_ZOOKEEPER_CLASSPATH)",
          zookeeper_java_program().empty() ? "java" : "ZooKeeper's zookeeper.jar"));
    }
    if (options.members < 1) {
      throw std::invalid_argument(
          fmt::format("ZookeeperEnsemble: members must be at least 1, not {}", options.members));
    }
    dir = make_temp_dir(options.name.empty() ? "zookeeper" : options.name);
    members.resize(static_cast<std::size_t>(options.members));
    for (int i = 0; i < count(); ++i) {
      Member& m = members[static_cast<std::size_t>(i)];
      m.id = i + 1;
      m.dir = dir / fmt::format("member-{}", i);
      fs::create_directories(m.data_dir());
    }
  }

  void choose_ports() {
    const auto ports = free_loopback_ports(members.size() * 3);
    for (std::size_t i = 0; i < members.size(); ++i) {
      members[i].client_port = ports[3 * i];
      members[i].quorum_port = ports[3 * i + 1];
      members[i].election_port = ports[3 * i + 2];
    }
  }

  [[nodiscard]] std::string config_text(const Member& m) const {
    const long long tick = std::max<long long>(options.tick.count(), 1);
    std::string text =
        "# Written by dlock's test harness (tests/support/zookeeper_ensemble.cpp).\n";
    text += fmt::format("tickTime={}\ninitLimit=10\nsyncLimit=5\n", tick);
    text += fmt::format("dataDir={}\n", property_value(m.data_dir().string()));
    text += fmt::format("clientPort={}\nclientPortAddress={}\n", m.client_port, kHost);
    text += "admin.enableServer=false\n4lw.commands.whitelist=srvr,mntr,ruok,stat\n";
    text += fmt::format("minSessionTimeout={}\nmaxSessionTimeout=60000\n", 2 * tick);
    text += "maxClientCnxns=0\npreAllocSize=64\nsnapCount=1000\nforceSync=no\n";
    if (count() > 1) text += "standaloneEnabled=false\n";
    for (const auto& peer : members) {
      text +=
          fmt::format("server.{}={}:{}:{}\n", peer.id, kHost, peer.quorum_port, peer.election_port);
    }
    for (const auto& line : options.extra_config) text += line + '\n';
    return text;
  }

  // zoo.cfg and myid, and both logging configurations: log4j 1.2 (Debian's ZooKeeper, bound
  // through slf4j-log4j12) and logback (upstream's), whichever the classpath brings.
  void write_files(const Member& m) const {
    fs::create_directories(m.data_dir());
    write_text(m.config_file(), config_text(m));
    write_text(m.data_dir() / "myid", fmt::format("{}\n", m.id));
    const std::string log = m.log_file().string();
    write_text(m.dir / "log4j.properties",
               fmt::format("log4j.rootLogger=INFO, FILE\n"
                           "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
                           "log4j.appender.FILE.File={}\n"
                           "log4j.appender.FILE.Append=true\n"
                           "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
                           "log4j.appender.FILE.layout.ConversionPattern="
                           "%d{{ISO8601}} %-5p [%t:%C{{1}}@%L] - %m%n\n",
                           property_value(log)));
    write_text(m.dir / "logback.xml",
               fmt::format("<configuration>\n"
                           "  <appender name=\"FILE\" class=\"ch.qos.logback.core.FileAppender\">\n"
                           "    <file>{}</file>\n"
                           "    <append>true</append>\n"
                           "    <encoder><pattern>%d{{ISO8601}} %-5p [%t:%C{{1}}@%L] - %m%n"
                           "</pattern></encoder>\n"
                           "  </appender>\n"
                           "  <root level=\"INFO\"><appender-ref ref=\"FILE\"/></root>\n"
                           "</configuration>\n",
                           xml_text(log)));
  }

  // A small heap, the serial collector, C1 only and the classes mapped from an archive: three
  // JVMs start in well under their default time and fit a small CI machine. Without an archive
  // yet, one member of the ensemble writes its classes at exit (a clean exit: stop() or
  // stop_all()), for the archive of later starts. No perf-data file (a killed JVM would leave
  // it in /tmp/hsperfdata_USER), crash files in the member's directory.
  [[nodiscard]] std::vector<std::string> argv(Member& m) const {
    const std::string d = m.dir.string();
    m.dumps_classes = false;
    std::vector<std::string> sharing;
    const fs::path archive = options.class_data_sharing ? class_archive() : fs::path();
    if (!archive.empty() && fs::exists(archive)) {
      sharing.push_back("-XX:SharedArchiveFile=" + archive.string());
    } else if (!archive.empty() &&
               std::none_of(members.begin(), members.end(),
                            [](const Member& o) { return o.dumps_classes && o.pid > 0; })) {
      std::error_code ignored;
      fs::remove(m.class_dump(), ignored);
      sharing.push_back("-XX:ArchiveClassesAtExit=" + m.class_dump().string());
      m.dumps_classes = true;
    }
    std::vector<std::string> args = {
        zookeeper_java_program(),
        "-Xmx128m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-XX:+ExitOnOutOfMemoryError",
        "-XX:ErrorFile=" + d + "/hs_err_pid%p.log",
        "-Djava.awt.headless=true",
        "-Djava.net.preferIPv4Stack=true",
        "-Djava.io.tmpdir=" + d,
        "-Dzookeeper.log.dir=" + d,
        "-Dzookeeper.log.file=zookeeper.log",
        "-Dlog4j.configuration=file:" + d + "/log4j.properties",
        "-Dlogback.configurationFile=" + d + "/logback.xml",
        // A member killed before its first snapshot comes back from its transaction log.
        "-Dzookeeper.snapshot.trust.empty=true",
        // An electing member whose peers are down asks again within 2 s, not 60.
        "-Dzookeeper.fastleader.maxNotificationInterval=2000",
    };
    args.insert(args.end(), sharing.begin(), sharing.end());
    args.insert(args.end(), options.jvm_options.begin(), options.jvm_options.end());
    args.insert(args.end(), {"-cp", zookeeper_classpath(), kMainClass, m.config_file().string()});
    return args;
  }

  void spawn_member(Member& m) {
    m.log_offset = file_size_or_zero(m.log_file());
    m.output_offset = file_size_or_zero(m.output_file());
    UniqueFd output(
        ::open(m.output_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (output.get() < 0) throw_errno(fmt::format("open {}", m.output_file().string()));
    m.pid = spawn({argv(m), {}, output.get(), output.get(), m.dir.string()});
    m.paused = false;
  }

  // Whether the output since the last launch says a port was taken.
  [[nodiscard]] static bool bind_failed(const Member& m) {
    const std::string fresh =
        read_file(m.log_file(), m.log_offset) + read_file(m.output_file(), m.output_offset);
    return fresh.find("Address already in use") != std::string::npos ||
           fresh.find("BindException") != std::string::npos;
  }

  // Reaps the member if it exited. True while it runs.
  bool check_running(Member& m) {
    if (m.pid <= 0) return false;
    if (child_running(m.pid)) return true;
    ended(m, false);
    return false;
  }

  // After the member was reaped: a class dump written by a clean exit becomes the archive
  // (copied next to it, then renamed, so that a JVM never maps a partial one).
  static void ended(Member& m, bool clean_exit) noexcept {
    m.pid = -1;
    m.paused = false;
    if (!m.dumps_classes) return;
    m.dumps_classes = false;
    std::error_code error;
    const fs::path archive = class_archive();
    if (clean_exit && !archive.empty() && fs::file_size(m.class_dump(), error) > 0 && !error) {
      static std::atomic<int> copies{0};
      const fs::path partial =
          archive.string() + fmt::format(".{}-{}.partial", ::getpid(), ++copies);
      if (fs::copy_file(m.class_dump(), partial, fs::copy_options::overwrite_existing, error)) {
        fs::rename(partial, archive, error);
      }
      if (error) fs::remove(partial, error);
    }
    fs::remove(m.class_dump(), error);
  }

  std::string mode(Member& m) {
    if (!check_running(m)) return "down";
    if (m.paused) return "paused";
    const auto answer = zookeeper_four_letter_word(m.client_port, "srvr", kProbeTimeout);
    if (!answer) return check_running(m) ? "unreachable" : "down";
    return mode_of(*answer);
  }

  // Every member's mode, and the index of the one leader (-1 when none or several).
  struct Survey {
    std::vector<std::string> modes;
    int leader = -1;
    int leaders = 0;
  };

  Survey survey() {
    Survey result;
    for (int i = 0; i < count(); ++i) {
      result.modes.push_back(mode(members[static_cast<std::size_t>(i)]));
      const std::string& mode = result.modes.back();
      if (mode == "leader" || mode == "standalone") {
        ++result.leaders;
        result.leader = i;
      }
    }
    if (result.leaders != 1) result.leader = -1;
    return result;
  }

  [[nodiscard]] static std::string list(const std::vector<std::string>& modes) {
    std::string out;
    for (const auto& mode : modes) out += (out.empty() ? "" : ", ") + mode;
    return "[" + out + "]";
  }

  // A quorum serves: every running, unpaused member serves, they are a majority, one leads.
  [[nodiscard]] bool quorum_serves(const Survey& s) const {
    int serving = 0;
    for (const auto& mode : s.modes) {
      if (mode == "down" || mode == "paused") continue;
      if (!serves(mode)) return false;
      ++serving;
    }
    return serving >= majority() && s.leader >= 0;
  }

  [[nodiscard]] int available() {
    int n = 0;
    for (auto& m : members) n += check_running(m) && !m.paused ? 1 : 0;
    return n;
  }

  LaunchOutcome launch_all(std::string& failure) {
    try {
      for (auto& m : members) spawn_member(m);
    } catch (...) {
      kill_all();
      throw;
    }
    const auto deadline = Clock::now() + options.start_timeout;
    for (;;) {
      for (auto& m : members) {
        if (check_running(m)) continue;
        failure = fmt::format("member {} (id {}) exited during start-up", m.id - 1, m.id);
        const bool taken = bind_failed(m);
        kill_all();
        return taken ? LaunchOutcome::port_taken : LaunchOutcome::failed;
      }
      const Survey s = survey();
      if (quorum_serves(s) && std::all_of(s.modes.begin(), s.modes.end(), serves)) {
        return LaunchOutcome::ready;
      }
      if (Clock::now() >= deadline) {
        failure = fmt::format("no quorum within {} ms (modes {})", options.start_timeout.count(),
                              list(s.modes));
        const bool taken = std::any_of(members.begin(), members.end(), bind_failed);
        kill_all();
        return taken ? LaunchOutcome::port_taken : LaunchOutcome::failed;
      }
      std::this_thread::sleep_for(milliseconds(25));
    }
  }

  void start() {
    for (auto& m : members) {
      if (check_running(m)) throw std::logic_error(describe(m) + " is already running");
    }
    make_dirs();
    launch_until_ready(
        [&](std::string& failure) {
          if (!ports_owned) {
            choose_ports();
            for (const auto& m : members) {
              std::error_code ignored;
              fs::remove_all(m.data_dir() / "version-2", ignored);  // of an attempt before
              write_files(m);
            }
          }
          return launch_all(failure);
        },
        [&] { return ports_owned; }, [&] { return describe(); }, [&] { return log_tail(20); });
    ports_owned = true;
  }

  LaunchOutcome launch_member(Member& m, std::string& failure) {
    spawn_member(m);
    const auto deadline = Clock::now() + options.start_timeout;
    const auto fail = [&](std::string why) {
      failure = std::move(why);
      const bool taken = bind_failed(m);
      kill_member(m);
      return taken ? LaunchOutcome::port_taken : LaunchOutcome::failed;
    };
    // Up: it answers srvr (its client port opens before the election).
    while (!zookeeper_four_letter_word(m.client_port, "srvr", kProbeTimeout)) {
      if (!check_running(m)) return fail("exited during start-up");
      if (Clock::now() >= deadline) {
        return fail(fmt::format("no answer to srvr within {} ms", options.start_timeout.count()));
      }
      std::this_thread::sleep_for(milliseconds(25));
    }
    if (available() < majority()) return LaunchOutcome::ready;
    std::string last;
    for (;;) {
      last = mode(m);
      if (serves(last)) return LaunchOutcome::ready;
      if (last == "down") return fail("exited during start-up");
      if (Clock::now() >= deadline) {
        return fail(
            fmt::format("not serving within {} ms (mode {})", options.start_timeout.count(), last));
      }
      std::this_thread::sleep_for(milliseconds(25));
    }
  }

  void start_member(int i) {
    Member& m = member(i);
    if (!ports_owned) {
      throw std::logic_error(fmt::format("{}: start_member({}) before start()", options.name, i));
    }
    if (check_running(m)) throw std::logic_error(describe(m) + " is already running");
    launch_until_ready([&](std::string& failure) { return launch_member(m, failure); },
                       [] { return true; }, [&] { return describe(m); },
                       [&] { return log_tail(m, 30); });
  }

  int wait_serving(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (available() < majority()) {
        throw std::logic_error(
            fmt::format("{}: only {} of {} members run unpaused, no quorum can serve (modes {})",
                        describe(), available(), count(), list(survey().modes)));
      }
      const Survey s = survey();
      if (quorum_serves(s)) return s.leader;
      if (Clock::now() >= deadline) {
        throw std::runtime_error(fmt::format("{}: no quorum served within {} ms (modes {})\n{}",
                                             describe(), timeout.count(), list(s.modes),
                                             log_tail(20)));
      }
      std::this_thread::sleep_for(milliseconds(25));
    }
  }

  void kill_member(Member& m) noexcept {
    if (m.pid <= 0) return;
    kill_child(m.pid);
    ended(m, false);
  }

  void kill_all() noexcept {
    for (auto& m : members) kill_member(m);
  }

  // SIGTERM to each, one bounded wait for all, then SIGKILL to those left.
  void stop_members(const std::vector<Member*>& targets) noexcept {
    std::vector<pid_t> pids;
    for (const Member* m : targets) pids.push_back(m->pid);
    const std::vector<bool> clean = terminate_children(pids, options.stop_timeout);
    for (std::size_t k = 0; k < targets.size(); ++k) {
      if (targets[k]->pid > 0) ended(*targets[k], clean[k]);
    }
  }

  void stop_all() noexcept {
    std::vector<Member*> all;
    for (auto& m : members) all.push_back(&m);
    stop_members(all);
  }

  void require_running(Member& m, const char* what) {
    if (!check_running(m)) {
      throw std::logic_error(fmt::format("{}: {} is not running", what, describe(m)));
    }
  }

  void set_stopped(Member& m, bool stopped) {
    require_running(m, stopped ? "pause" : "resume");
    set_stop_state(m.pid, stopped, describe(m));
    m.paused = stopped;
  }

  ~Impl() {
    stop_all();
    remove_temp_dir(dir, options.keep_dir);
  }
};

ZookeeperEnsemble::ZookeeperEnsemble(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
ZookeeperEnsemble::~ZookeeperEnsemble() = default;
ZookeeperEnsemble::ZookeeperEnsemble(ZookeeperEnsemble&&) noexcept = default;
ZookeeperEnsemble& ZookeeperEnsemble::operator=(ZookeeperEnsemble&&) noexcept = default;

void ZookeeperEnsemble::start() { impl_->start(); }
void ZookeeperEnsemble::stop_all() noexcept { impl_->stop_all(); }
void ZookeeperEnsemble::start_member(int i) { impl_->start_member(i); }

void ZookeeperEnsemble::stop(int i) noexcept {
  if (i < 0 || i >= impl_->count()) return;
  impl_->stop_members({&impl_->member(i)});
}

void ZookeeperEnsemble::kill(int i) noexcept {
  if (i < 0 || i >= impl_->count()) return;
  impl_->kill_member(impl_->member(i));
}

void ZookeeperEnsemble::pause(int i) { impl_->set_stopped(impl_->member(i), true); }
void ZookeeperEnsemble::resume(int i) { impl_->set_stopped(impl_->member(i), false); }

int ZookeeperEnsemble::wait_serving(std::chrono::milliseconds timeout) {
  if (!impl_->ports_owned)
    throw std::logic_error(impl_->options.name + ": wait_serving before start()");
  return impl_->wait_serving(timeout);
}

int ZookeeperEnsemble::leader() const { return impl_->survey().leader; }
std::string ZookeeperEnsemble::mode(int i) const { return impl_->mode(impl_->member(i)); }
std::string ZookeeperEnsemble::modes() const { return Impl::list(impl_->survey().modes); }

std::string ZookeeperEnsemble::connect_string() const {
  if (!impl_->ports_owned) return {};
  std::string out;
  for (int i = 0; i < impl_->count(); ++i) out += (i == 0 ? "" : ",") + endpoint(i);
  return out;
}

int ZookeeperEnsemble::client_port(int i) const {
  return impl_->members.empty() ? 0 : impl_->member(i).client_port;
}

std::string ZookeeperEnsemble::endpoint(int i) const {
  return fmt::format("{}:{}", kHost, client_port(i));
}

int ZookeeperEnsemble::members() const { return impl_->options.members; }
bool ZookeeperEnsemble::running(int i) {
  return !impl_->members.empty() && impl_->check_running(impl_->member(i));
}
bool ZookeeperEnsemble::paused(int i) const {
  return !impl_->members.empty() && impl_->member(i).paused;
}
pid_t ZookeeperEnsemble::pid(int i) const {
  return impl_->members.empty() ? -1 : impl_->member(i).pid;
}
const std::filesystem::path& ZookeeperEnsemble::dir() const { return impl_->dir; }
std::filesystem::path ZookeeperEnsemble::member_dir(int i) const {
  return impl_->members.empty() ? std::filesystem::path() : impl_->member(i).dir;
}
std::filesystem::path ZookeeperEnsemble::log_file(int i) const {
  return impl_->members.empty() ? std::filesystem::path() : impl_->member(i).log_file();
}
std::string ZookeeperEnsemble::log_tail(std::size_t lines) const { return impl_->log_tail(lines); }
const ZookeeperEnsemble::Options& ZookeeperEnsemble::options() const { return impl_->options; }

}  // namespace dlock::test
