// EtcdCluster: etcd members in a throw-away directory, optionally behind TcpProxies
// (etcd_cluster.hpp).
#include <signal.h>

#include <algorithm>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "etcd_cluster.hpp"
#include "etcd_member.hpp"
#include "process_support.hpp"
#include "redis_process.hpp"
#include "tcp_proxy.hpp"

#ifndef DLOCK_ETCD
#define DLOCK_ETCD ""
#endif

namespace dlock::test {

using namespace detail;

namespace {

bool serves(const std::string& role) { return role == "leader" || role == "follower"; }

std::string list(const std::vector<std::string>& roles) {
  std::string out;
  for (const auto& role : roles) out += (out.empty() ? "" : ", ") + role;
  return "[" + out + "]";
}

}  // namespace

std::string etcd_program() { return DLOCK_ETCD; }

struct EtcdCluster::Impl {
  using Member = EtcdMember;

  Options options;
  fs::path dir;
  std::vector<Member> members;
  bool ports_owned = false;  // the cluster has run on its ports: restarts keep them

  [[nodiscard]] int count() const { return static_cast<int>(members.size()); }
  [[nodiscard]] int majority() const { return count() / 2 + 1; }
  // A client URL: https:// with Options::tls.
  [[nodiscard]] std::string url(int port) const { return etcd_url(port, options.tls.enabled); }
  [[nodiscard]] std::string program() const {
    return options.program.empty() ? etcd_program() : options.program;
  }

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
    return fmt::format("{} cluster ({} members, {} on 127.0.0.1:{}, dir {})", options.name,
                       members.size(), program(), ports, dir.string());
  }

  [[nodiscard]] std::string describe(const Member& m) const { return m.describe(options.name); }

  [[nodiscard]] std::string log_tail(std::size_t lines) const {
    if (dir.empty()) return "(not started)";
    std::string out;
    for (const auto& m : members) out += m.log_tail(lines);
    return out;
  }

  void make_dirs() {
    if (!dir.empty()) return;
    if (program().empty()) {
      throw std::runtime_error(
          "EtcdCluster: etcd was not found at configure time (install etcd-server, e.g. with "
          "scripts/install-deps, and configure again; or set DLOCK_ETCD_EXECUTABLE)");
    }
    if (options.members < 1) {
      throw std::invalid_argument(
          fmt::format("EtcdCluster: members must be at least 1, not {}", options.members));
    }
    dir = make_temp_dir(options.name.empty() ? "etcd" : options.name);
    members.resize(static_cast<std::size_t>(options.members));
    for (int i = 0; i < count(); ++i) {
      Member& m = members[static_cast<std::size_t>(i)];
      m.index = i;
      m.dir = dir / fmt::format("member-{}", i);
      if (options.tls.enabled) m.tls = resolved_client_tls(options.tls);
      fs::create_directories(m.dir);
    }
  }

  // Fresh ports, and no data of an attempt before (bootstrapped with other peer URLs).
  void choose_ports() {
    const auto ports = free_loopback_ports(members.size() * 2);
    for (std::size_t i = 0; i < members.size(); ++i) {
      members[i].client_port = ports[2 * i];
      members[i].peer_port = ports[2 * i + 1];
      members[i].id = 0;
      std::error_code ignored;
      fs::remove_all(members[i].data_dir(), ignored);
    }
  }

  [[nodiscard]] std::vector<std::string> argv(const Member& m) const {
    std::string cluster;
    for (const auto& peer : members) {
      cluster +=
          fmt::format("{}m{}={}", cluster.empty() ? "" : ",", peer.index, etcd_url(peer.peer_port));
    }
    std::vector<std::string> args = {
        program(),
        "--name=m" + std::to_string(m.index),
        "--data-dir=" + m.data_dir().string(),
        "--listen-client-urls=" + url(m.client_port),
        "--advertise-client-urls=" + url(m.client_port),
        "--listen-peer-urls=" + etcd_url(m.peer_port),
        "--initial-advertise-peer-urls=" + etcd_url(m.peer_port),
        "--initial-cluster=" + cluster,
        "--initial-cluster-state=new",
        // Unique to the directory: members of two clusters never take each other as peers.
        "--initial-cluster-token=dlock-" + dir.filename().string(),
        fmt::format("--heartbeat-interval={}", options.heartbeat_interval.count()),
        fmt::format("--election-timeout={}", options.election_timeout.count()),
        "--logger=zap",
        "--log-outputs=" + m.log_file().string(),
    };
    const auto tls = etcd_tls_flags(options.tls);
    args.insert(args.end(), tls.begin(), tls.end());
    args.insert(args.end(), options.extra_flags.begin(), options.extra_flags.end());
    return args;
  }

  // Every member's role, and the index of the leader all that answer agree on (-1 if none).
  struct Survey {
    std::vector<std::string> roles;
    int leader = -1;
  };

  Survey survey() {
    Survey result;
    std::vector<std::uint64_t> named;
    int leaders = 0;
    for (int i = 0; i < count(); ++i) {
      const Member::Answer answer = members[static_cast<std::size_t>(i)].ask();
      result.roles.push_back(answer.role);
      if (answer.leader_id != 0) named.push_back(answer.leader_id);
      if (answer.role == "leader") {
        ++leaders;
        result.leader = i;
      }
    }
    const bool agree = std::all_of(named.begin(), named.end(), [&](std::uint64_t id) {
      return result.leader >= 0 && id == members[static_cast<std::size_t>(result.leader)].id;
    });
    if (leaders != 1 || !agree) result.leader = -1;
    return result;
  }

  // A quorum serves: every running, unpaused member serves, they are a majority, they agree
  // on a leader among them and a linearizable read through it succeeds.
  [[nodiscard]] bool quorum_serves(const Survey& s) {
    int serving = 0;
    for (const auto& role : s.roles) {
      if (role == "down" || role == "paused") continue;
      if (!serves(role)) return false;
      ++serving;
    }
    if (serving < majority() || s.leader < 0) return false;
    try {
      member(s.leader).probe->get("dlock-harness-probe");
      return true;
    } catch (const EtcdError&) {
      return false;
    }
  }

  [[nodiscard]] int available() {
    int n = 0;
    for (auto& m : members) n += m.check_running() && !m.paused ? 1 : 0;
    return n;
  }

  // After a failed launch: kills every member; whether a port was taken.
  LaunchOutcome give_up() {
    const bool taken = std::any_of(members.begin(), members.end(),
                                   [](const Member& m) { return m.bind_failed(); });
    kill_all();
    return taken ? LaunchOutcome::port_taken : LaunchOutcome::failed;
  }

  LaunchOutcome launch_all(std::string& failure) {
    try {
      for (auto& m : members) m.spawn(argv(m));
    } catch (...) {
      kill_all();
      throw;
    }
    const auto deadline = Clock::now() + options.start_timeout;
    for (;;) {
      for (auto& m : members) {
        if (m.check_running()) continue;
        failure = fmt::format("member {} exited during start-up", m.index);
        return give_up();
      }
      const Survey s = survey();
      if (std::all_of(s.roles.begin(), s.roles.end(), serves) && quorum_serves(s)) {
        return LaunchOutcome::ready;
      }
      if (Clock::now() >= deadline) {
        failure = fmt::format("no quorum within {} ms (roles {})", options.start_timeout.count(),
                              list(s.roles));
        return give_up();
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  void start() {
    for (auto& m : members) {
      if (m.check_running()) throw std::logic_error(describe(m) + " is already running");
    }
    make_dirs();
    launch_until_ready(
        [&](std::string& failure) {
          if (!ports_owned) choose_ports();
          return launch_all(failure);
        },
        [&] { return ports_owned; }, [&] { return describe(); }, [&] { return log_tail(20); });
    ports_owned = true;
    if (options.proxies && members.front().proxy == nullptr) {
      for (auto& m : members) m.proxy = std::make_unique<TcpProxy>("127.0.0.1", m.client_port);
    }
  }

  LaunchOutcome launch_member(Member& m, std::string& failure) {
    m.spawn(argv(m));
    const auto deadline = Clock::now() + options.start_timeout;
    const auto fail = [&](std::string why) {
      failure = std::move(why);
      const bool taken = m.bind_failed();
      m.kill();
      return taken ? LaunchOutcome::port_taken : LaunchOutcome::failed;
    };
    // Up: its client port accepts (etcd answers on it only once it has rejoined).
    while (!port_accepts(m.client_port, milliseconds(200))) {
      if (!m.check_running()) return fail("exited during start-up");
      if (Clock::now() >= deadline) {
        return fail(fmt::format("no client port within {} ms", options.start_timeout.count()));
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    if (available() < majority()) return LaunchOutcome::ready;
    for (;;) {
      const std::string role = m.ask().role;
      if (serves(role)) return LaunchOutcome::ready;
      if (role == "down") return fail("exited during start-up");
      if (Clock::now() >= deadline) {
        return fail(
            fmt::format("not serving within {} ms (role {})", options.start_timeout.count(), role));
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  void start_member(int i) {
    Member& m = member(i);
    if (!ports_owned) {
      throw std::logic_error(fmt::format("{}: start_member({}) before start()", options.name, i));
    }
    if (m.check_running()) throw std::logic_error(describe(m) + " is already running");
    launch_until_ready([&](std::string& failure) { return launch_member(m, failure); },
                       [] { return true; }, [&] { return describe(m); },
                       [&] { return m.log_tail(30); });
  }

  int wait_serving(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (available() < majority()) {
        throw std::logic_error(
            fmt::format("{}: only {} of {} members run unpaused, no quorum can serve (roles {})",
                        describe(), available(), count(), list(survey().roles)));
      }
      const Survey s = survey();
      if (quorum_serves(s)) return s.leader;
      if (Clock::now() >= deadline) {
        throw std::runtime_error(fmt::format("{}: no quorum served within {} ms (roles {})\n{}",
                                             describe(), timeout.count(), list(s.roles),
                                             log_tail(20)));
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  }

  void kill_all() noexcept {
    for (auto& m : members) m.kill();
  }

  // One after the other, within one stop_timeout for all: a leader stopped by SIGTERM hands
  // its leadership to the peer it has heard from longest and waits for it (up to 7 s with the
  // default timings), so members stopped together keep it waiting on a member that is going.
  // Stopped in turn, it hands over to a running member at once, and the last knows no peer
  // to hand over to. A paused member is woken first: it may be the one taking over.
  void stop_members(const std::vector<Member*>& targets) noexcept {
    for (const Member* m : targets) {
      if (m->pid > 0 && is_registered(m->pid)) ::kill(m->pid, SIGCONT);
    }
    const auto deadline = Clock::now() + options.stop_timeout;
    for (Member* m : targets) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      terminate_children({m->pid}, std::max(left, milliseconds(0)));
      m->ended();
    }
  }

  void stop_all() noexcept {
    std::vector<Member*> all;
    for (auto& m : members) all.push_back(&m);
    stop_members(all);
  }

  void set_stopped(Member& m, bool stopped) {
    if (!m.check_running()) {
      throw std::logic_error(
          fmt::format("{}: {} is not running", stopped ? "pause" : "resume", describe(m)));
    }
    set_stop_state(m.pid, stopped, describe(m));
    m.paused = stopped;
  }

  [[nodiscard]] std::vector<std::string> urls(bool through_proxies) const {
    std::vector<std::string> out;
    if (!ports_owned) return out;
    for (const auto& m : members) {
      out.push_back(through_proxies && m.proxy ? url(m.proxy->port()) : url(m.client_port));
    }
    return out;
  }

  ~Impl() {
    stop_all();
    for (auto& m : members) m.proxy.reset();
    remove_temp_dir(dir, options.keep_dir);
  }
};

EtcdCluster::EtcdCluster(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
EtcdCluster::~EtcdCluster() = default;
EtcdCluster::EtcdCluster(EtcdCluster&&) noexcept = default;
EtcdCluster& EtcdCluster::operator=(EtcdCluster&&) noexcept = default;

void EtcdCluster::start() { impl_->start(); }
void EtcdCluster::stop_all() noexcept { impl_->stop_all(); }
void EtcdCluster::start_member(int i) { impl_->start_member(i); }

void EtcdCluster::stop(int i) noexcept {
  if (i < 0 || i >= impl_->count()) return;
  impl_->stop_members({&impl_->member(i)});
}

void EtcdCluster::kill(int i) noexcept {
  if (i < 0 || i >= impl_->count()) return;
  impl_->member(i).kill();
}

void EtcdCluster::pause(int i) { impl_->set_stopped(impl_->member(i), true); }
void EtcdCluster::resume(int i) { impl_->set_stopped(impl_->member(i), false); }

int EtcdCluster::wait_serving(std::chrono::milliseconds timeout) {
  if (!impl_->ports_owned) {
    throw std::logic_error(impl_->options.name + ": wait_serving before start()");
  }
  return impl_->wait_serving(timeout);
}

int EtcdCluster::leader() const { return impl_->survey().leader; }
std::string EtcdCluster::role(int i) const { return impl_->member(i).ask().role; }
std::string EtcdCluster::roles() const { return list(impl_->survey().roles); }

std::vector<std::string> EtcdCluster::endpoints() const { return impl_->urls(true); }
std::vector<std::string> EtcdCluster::direct_endpoints() const { return impl_->urls(false); }

std::string EtcdCluster::endpoint(int i) const {
  if (!impl_->ports_owned) return {};
  const Impl::Member& m = impl_->member(i);
  return impl_->url(m.proxy ? m.proxy->port() : m.client_port);
}

std::string EtcdCluster::direct_endpoint(int i) const {
  return impl_->ports_owned ? impl_->url(client_port(i)) : std::string();
}

int EtcdCluster::client_port(int i) const {
  return impl_->members.empty() ? 0 : impl_->member(i).client_port;
}
int EtcdCluster::peer_port(int i) const {
  return impl_->members.empty() ? 0 : impl_->member(i).peer_port;
}
std::uint64_t EtcdCluster::member_id(int i) const {
  return impl_->members.empty() ? 0 : impl_->member(i).id;
}

TcpProxy& EtcdCluster::proxy(int i) {
  if (!impl_->options.proxies || impl_->members.empty() || !impl_->member(i).proxy) {
    throw std::logic_error(
        fmt::format("{}: proxy({}) needs Options::proxies and a start()", impl_->options.name, i));
  }
  return *impl_->member(i).proxy;
}

void EtcdCluster::pass_all() {
  for (auto& m : impl_->members) {
    if (m.proxy) m.proxy->pass();
  }
}

int EtcdCluster::members() const { return impl_->options.members; }
bool EtcdCluster::running(int i) {
  return !impl_->members.empty() && impl_->member(i).check_running();
}
bool EtcdCluster::paused(int i) const { return !impl_->members.empty() && impl_->member(i).paused; }
pid_t EtcdCluster::pid(int i) const { return impl_->members.empty() ? -1 : impl_->member(i).pid; }
const std::filesystem::path& EtcdCluster::dir() const { return impl_->dir; }
std::filesystem::path EtcdCluster::member_dir(int i) const {
  return impl_->members.empty() ? std::filesystem::path() : impl_->member(i).dir;
}
std::filesystem::path EtcdCluster::log_file(int i) const {
  return impl_->members.empty() ? std::filesystem::path() : impl_->member(i).log_file();
}
std::string EtcdCluster::log_tail(std::size_t lines) const { return impl_->log_tail(lines); }
const EtcdCluster::Options& EtcdCluster::options() const { return impl_->options; }

std::optional<EtcdClientTls> EtcdCluster::client_tls() const {
  if (!impl_->options.tls.enabled) return std::nullopt;
  return resolved_client_tls(impl_->options.tls);
}

EtcdClient EtcdCluster::client(int i, std::chrono::milliseconds timeout) const {
  const auto tls = client_tls();
  return tls ? EtcdClient(endpoint(i), *tls, timeout) : EtcdClient(endpoint(i), timeout);
}

}  // namespace dlock::test
