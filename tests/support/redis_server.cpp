// RedisServer: one redis-server (or sentinel) process in a throw-away directory.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "process_support.hpp"
#include "redis_process.hpp"
#include "test_pki.hpp"

#ifndef DLOCK_REDIS_SERVER
#define DLOCK_REDIS_SERVER "redis-server"
#endif
#ifndef DLOCK_REDIS_SENTINEL
#define DLOCK_REDIS_SENTINEL ""
#endif
#ifndef DLOCK_REDIS_CLI
#define DLOCK_REDIS_CLI "redis-cli"
#endif
#ifndef DLOCK_CLOCK_STEP_LIBRARY
#define DLOCK_CLOCK_STEP_LIBRARY ""
#endif

namespace dlock::test {

using namespace detail;

namespace {

// A config-file string: Redis's parser understands double quotes with backslash escapes.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

constexpr const char* kHost = "127.0.0.1";

}  // namespace

std::string redis_server_program() { return DLOCK_REDIS_SERVER; }

std::string redis_sentinel_program() {
  const std::string sentinel = DLOCK_REDIS_SENTINEL;
  return sentinel.empty() ? redis_server_program() : sentinel;
}

std::string redis_cli_program() { return DLOCK_REDIS_CLI; }

std::vector<int> free_loopback_ports(std::size_t count) {
  std::vector<UniqueFd> sockets;
  std::vector<int> ports;
  for (std::size_t i = 0; i < count; ++i) {
    UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (sock.get() < 0) throw_errno("socket");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      throw_errno("bind 127.0.0.1:0");
    }
    socklen_t length = sizeof address;
    if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw_errno("getsockname");
    }
    ports.push_back(ntohs(address.sin_port));
    sockets.push_back(std::move(sock));
  }
  return ports;
}

int free_loopback_port() { return free_loopback_ports(1).front(); }

struct RedisServer::Impl {
  Options options;
  fs::path dir;
  int port = 0;
  int bus_port = 0;
  int tls_port = 0;
  bool port_owned = false;  // the server has run on `port`: restarts keep it
  pid_t pid = -1;
  bool paused = false;
  milliseconds clock_offset{0};
  std::int64_t* clock_map = nullptr;  // the offset file, mapped (Options::clock_step)

  [[nodiscard]] bool sentinel() const { return options.mode == Options::Mode::sentinel; }
  [[nodiscard]] fs::path config_file() const { return dir / "redis.conf"; }
  [[nodiscard]] fs::path log_file() const { return dir / "redis.log"; }
  [[nodiscard]] fs::path output_file() const { return dir / "output.log"; }
  [[nodiscard]] fs::path clock_file() const { return dir / "clock-offset"; }

  [[nodiscard]] std::string program() const {
    if (!options.program.empty()) return options.program;
    return sentinel() ? redis_sentinel_program() : redis_server_program();
  }

  void make_dir() {
    if (dir.empty()) dir = make_temp_dir(options.name.empty() ? "redis" : options.name);
  }

  void write_config() const {
    std::string text = "# Written by dlock's test harness (tests/support/redis_server.cpp).\n";
    text += fmt::format("bind {}\nport {}\ndaemonize no\n", kHost, port);
    text += fmt::format("dir {}\nlogfile {}\nloglevel notice\n", quoted(dir.string()),
                        quoted(log_file().string()));
    if (!sentinel()) {
      text += "save \"\"\nappendonly no\nenable-debug-command local\n";
    }
    if (!options.password.empty()) {
      text += fmt::format("requirepass {}\n", quoted(options.password));
      if (sentinel()) text += fmt::format("sentinel sentinel-pass {}\n", quoted(options.password));
    }
    if (options.cluster) {
      text += fmt::format("cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-port {}\n",
                          bus_port);
    }
    if (options.tls.enabled) text += tls_config();
    for (const auto& line : options.extra_config) text += line + '\n';
    std::ofstream out(config_file(), std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", config_file().string()));
  }

  [[nodiscard]] std::string tls_config() const {
    const auto& tls = options.tls;
    const auto or_pki = [](const std::string& given, const std::string TestPki::*file) {
      return quoted(given.empty() ? test_pki().*file : given);
    };
    std::string text = fmt::format("tls-port {}\n", tls_port);
    text += fmt::format("tls-cert-file {}\n", or_pki(tls.cert_file, &TestPki::server_cert));
    text += fmt::format("tls-key-file {}\n", or_pki(tls.key_file, &TestPki::server_key));
    text += fmt::format("tls-ca-cert-file {}\n", or_pki(tls.ca_file, &TestPki::ca_file));
    text += fmt::format("tls-auth-clients {}\n", tls.auth_clients ? "yes" : "no");
    if (tls.replication) text += "tls-replication yes\n";
    if (tls.cluster) text += "tls-cluster yes\n";
    return text;
  }

  // Another free port, distinct from those already chosen.
  [[nodiscard]] int other_free_port() const {
    for (;;) {
      const int candidate = free_loopback_port();
      if (candidate != port && candidate != bus_port && candidate != tls_port) return candidate;
    }
  }

  void choose_ports() {
    port = options.port != 0 ? options.port : free_loopback_port();
    bus_port = 0;
    tls_port = 0;
    if (options.cluster) bus_port = other_free_port();
    if (options.tls.enabled) tls_port = other_free_port();
  }

  [[nodiscard]] std::string describe() const {
    const std::string tls = tls_port != 0 ? fmt::format(", TLS on {}", tls_port) : "";
    return fmt::format("{} ({} on {}:{}{}, dir {})", options.name, program(), kHost, port, tls,
                       dir.string());
  }

  [[nodiscard]] std::string log_tail(std::size_t lines) const {
    if (dir.empty()) return "(not started)";
    return log_tails({log_file(), output_file()}, lines);
  }

  // Reaps the process if it exited. True while it runs.
  bool check_running() {
    if (pid <= 0) return false;
    if (child_running(pid)) return true;
    pid = -1;
    paused = false;
    return false;
  }

  // The file the preload maps its offset from (clock_step_preload.c), holding the current
  // offset; made again when restart_empty() removed it.
  void prepare_clock_file() {
    if (!options.clock_step || (clock_map != nullptr && fs::exists(clock_file()))) return;
    unmap_clock();
    UniqueFd fd(::open(clock_file().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw_errno(fmt::format("open {}", clock_file().string()));
    if (::ftruncate(fd.get(), sizeof(std::int64_t)) != 0) throw_errno("ftruncate clock file");
    void* map =
        ::mmap(nullptr, sizeof(std::int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (map == MAP_FAILED) throw_errno("mmap clock file");
    clock_map = static_cast<std::int64_t*>(map);
    store_clock_offset();
  }

  void store_clock_offset() const {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_offset);
    std::atomic_ref<std::int64_t>(*clock_map).store(ns.count(), std::memory_order_release);
  }

  void unmap_clock() noexcept {
    if (clock_map != nullptr) ::munmap(clock_map, sizeof(std::int64_t));
    clock_map = nullptr;
  }

  [[nodiscard]] std::vector<std::string> clock_env() const {
    if (!options.clock_step) return {};
    const fs::path library = DLOCK_CLOCK_STEP_LIBRARY;
    if (library.empty() || !fs::exists(library)) {
      throw std::runtime_error(fmt::format("{}: the clock-step preload '{}' was not built",
                                           describe(), library.string()));
    }
    return {"LD_PRELOAD=" + library.string(), "DLOCK_CLOCK_STEP_FILE=" + clock_file().string()};
  }

  // Bounded: until a TIME read between two readings of the local wall clock lies between
  // them, both moved by the offset (the server reads the same kernel clock as this process).
  void await_clock() const {
    RedisAdmin admin(kHost, port, milliseconds(500));
    if (!options.password.empty()) admin.set_auth("", options.password);
    using std::chrono::system_clock;
    const auto slack = milliseconds(2);
    std::string last = "no answer";
    const bool shown = wait_until(
        [&] {
          const auto before = system_clock::now() + clock_offset - slack;
          std::vector<std::string> time;
          try {
            time = admin.array({"TIME"});
          } catch (const std::exception& error) {
            last = error.what();
            return false;
          }
          const auto after = system_clock::now() + clock_offset + slack;
          if (time.size() != 2) return false;
          const system_clock::time_point server{std::chrono::seconds(std::stoll(time[0])) +
                                                std::chrono::microseconds(std::stoll(time[1]))};
          last = fmt::format("TIME {}.{:0>6}", time[0], time[1]);
          return before <= server && server <= after;
        },
        std::chrono::seconds(2), milliseconds(10));
    if (!shown) {
      throw std::runtime_error(
          fmt::format("{}: the clock did not show a step to {} ms within 2 s ({})", describe(),
                      clock_offset.count(), last));
    }
  }

  LaunchOutcome launch(std::string& failure) {
    const auto log_offset = file_size_or_zero(log_file());
    const auto output_offset = file_size_or_zero(output_file());
    UniqueFd output(::open(output_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (output.get() < 0) throw_errno(fmt::format("open {}", output_file().string()));
    std::vector<std::string> argv = {program(), config_file().string()};
    if (sentinel() && program().find("redis-sentinel") == std::string::npos) {
      argv.emplace_back("--sentinel");
    }
    prepare_clock_file();
    pid = spawn({argv, clock_env(), output.get(), output.get()});
    output.reset();

    const auto deadline = Clock::now() + options.start_timeout;
    RedisAdmin admin(kHost, port, milliseconds(250));
    if (!options.password.empty()) admin.set_auth("", options.password);
    std::string last_error;
    for (;;) {
      if (!check_running()) {
        const std::string fresh =
            read_file(log_file(), log_offset) + read_file(output_file(), output_offset);
        failure = "exited during start-up";
        return fresh.find("Address already in use") != std::string::npos
                   ? LaunchOutcome::port_taken
                   : LaunchOutcome::failed;
      }
      // Another process may own the port (the bind race): only our own pid counts.
      try {
        if (admin.command({"PING"}) == "PONG" &&
            admin.info_field("server", "process_id") == std::to_string(pid)) {
          return LaunchOutcome::ready;
        }
      } catch (const RedisError& error) {
        last_error = error.what();
      } catch (const std::exception&) {
        admin.disconnect();
      }
      if (Clock::now() >= deadline) {
        failure = fmt::format("no PING answer within {} ms", options.start_timeout.count());
        if (last_error.find("NOAUTH") != std::string::npos ||
            last_error.find("WRONGPASS") != std::string::npos) {
          failure += fmt::format(" ({}; set Options::password rather than a requirepass line)",
                                 last_error);
        }
        kill_now();
        return LaunchOutcome::failed;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  void start() {
    if (check_running()) throw std::logic_error(describe() + " is already running");
    make_dir();
    launch_until_ready(
        [&](std::string& failure) {
          if (!port_owned) {
            choose_ports();
            write_config();
          } else if (!fs::exists(config_file())) {
            write_config();
          }
          return launch(failure);
        },
        [&] { return port_owned || options.port != 0; }, [&] { return describe(); },
        [&] { return log_tail(30); });
    port_owned = true;
    paused = false;
  }

  void kill_now() noexcept {
    if (pid <= 0) return;
    kill_child(pid);
    pid = -1;
    paused = false;
  }

  void stop() noexcept {
    if (pid <= 0) return;
    if (is_registered(pid)) {
      ::kill(pid, SIGTERM);
      ::kill(pid, SIGCONT);  // a stopped process would keep SIGTERM pending forever
      if (reap(pid, options.stop_timeout)) {
        unregister_child(pid);
        pid = -1;
      }
    }
    kill_now();
  }

  void wait_for_state(bool stopped) const {
    if (!wait_for_stop_state(pid, stopped, std::chrono::seconds(2))) {
      throw std::runtime_error(fmt::format("{} did not {} within 2 s", describe(),
                                           stopped ? "stop" : "continue"));
    }
  }

  void require_running(const char* what) {
    if (!check_running()) {
      throw std::logic_error(fmt::format("{}: {} is not running", what, describe()));
    }
  }

  ~Impl() {
    stop();
    unmap_clock();
    remove_temp_dir(dir, options.keep_dir);
  }
};

RedisServer::RedisServer(Options options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}
RedisServer::~RedisServer() = default;
RedisServer::RedisServer(RedisServer&&) noexcept = default;
RedisServer& RedisServer::operator=(RedisServer&&) noexcept = default;

void RedisServer::start() { impl_->start(); }
void RedisServer::stop() noexcept { impl_->stop(); }
void RedisServer::kill() noexcept { impl_->kill_now(); }

void RedisServer::pause() {
  impl_->require_running("pause");
  ::kill(impl_->pid, SIGSTOP);
  impl_->wait_for_state(true);
  impl_->paused = true;
}

void RedisServer::resume() {
  impl_->require_running("resume");
  ::kill(impl_->pid, SIGCONT);
  impl_->wait_for_state(false);
  impl_->paused = false;
}

void RedisServer::restart_empty() {
  impl_->kill_now();
  if (!impl_->dir.empty()) {
    for (const auto& entry : fs::directory_iterator(impl_->dir)) fs::remove_all(entry.path());
    impl_->write_config();
  }
  impl_->start();
}

void RedisServer::step_clock(std::chrono::milliseconds by) {
  if (!impl_->options.clock_step) {
    throw std::logic_error(impl_->describe() + ": step_clock needs Options::clock_step");
  }
  impl_->require_running("step_clock");
  if (impl_->paused) throw std::logic_error(impl_->describe() + ": step_clock while paused");
  impl_->clock_offset += by;
  impl_->store_clock_offset();
  impl_->await_clock();
}

std::chrono::milliseconds RedisServer::clock_offset() const { return impl_->clock_offset; }

bool RedisServer::running() { return impl_->check_running(); }
bool RedisServer::paused() const { return impl_->paused; }
int RedisServer::port() const { return impl_->port; }
int RedisServer::bus_port() const { return impl_->bus_port; }
int RedisServer::tls_port() const { return impl_->tls_port; }
std::string RedisServer::tls_endpoint() const {
  return fmt::format("{}:{}", kHost, impl_->tls_port);
}
std::string RedisServer::tls_address() const {
  return fmt::format("rediss://{}:{}", kHost, impl_->tls_port);
}
pid_t RedisServer::pid() const { return impl_->pid; }
std::string RedisServer::host() const { return kHost; }
std::string RedisServer::endpoint() const { return fmt::format("{}:{}", kHost, impl_->port); }
std::string RedisServer::address() const { return fmt::format("redis://{}:{}", kHost, impl_->port); }
const std::filesystem::path& RedisServer::dir() const { return impl_->dir; }
std::filesystem::path RedisServer::config_file() const { return impl_->config_file(); }
std::filesystem::path RedisServer::log_file() const { return impl_->log_file(); }
std::string RedisServer::log_tail(std::size_t lines) const { return impl_->log_tail(lines); }
const RedisServer::Options& RedisServer::options() const { return impl_->options; }

}  // namespace dlock::test
