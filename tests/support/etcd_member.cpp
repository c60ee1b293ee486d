// EtcdMember: one etcd process of an EtcdCluster and what the harness asks it (etcd_member.hpp).
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "etcd_member.hpp"
#include "process_support.hpp"
#include "redis_process.hpp"
#include "test_pki.hpp"

namespace dlock::test::detail {

namespace {

// How long one Status may take; a paused or overloaded member counts as unreachable after it.
constexpr milliseconds kProbeTimeout{1000};

}  // namespace

std::string etcd_url(int port, bool tls) {
  return fmt::format("{}://127.0.0.1:{}", tls ? "https" : "http", port);
}

std::vector<std::string> etcd_tls_flags(const EtcdClusterTls& tls) {
  if (!tls.enabled) return {};
  const TestPki& pki = test_pki();
  std::vector<std::string> flags = {
      "--cert-file=" + (tls.cert_file.empty() ? pki.server_cert : tls.cert_file),
      "--key-file=" + (tls.key_file.empty() ? pki.server_key : tls.key_file),
  };
  if (tls.client_cert_auth) {
    flags.push_back("--client-cert-auth=true");
    flags.push_back("--trusted-ca-file=" +
                    (tls.trusted_ca_file.empty() ? pki.ca_file : tls.trusted_ca_file));
  }
  return flags;
}

EtcdClientTls resolved_client_tls(const EtcdClusterTls& tls) {
  EtcdClientTls client = tls.client;
  const TestPki& pki = test_pki();
  if (client.ca_file.empty()) client.ca_file = pki.ca_file;
  if (client.cert_file.empty() && client.key_file.empty()) {
    client.cert_file = pki.client_cert;
    client.key_file = pki.client_key;
  }
  return client;
}

bool port_accepts(int port, milliseconds timeout) {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (sock.get() < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    return true;
  }
  if (errno != EINPROGRESS) return false;
  pollfd poller{sock.get(), POLLOUT, 0};
  if (::poll(&poller, 1, static_cast<int>(timeout.count())) <= 0) return false;
  int error = 0;
  socklen_t length = sizeof error;
  return ::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
}

std::string EtcdMember::describe(const std::string& cluster) const {
  return fmt::format("{} member {} (pid {}, 127.0.0.1:{}, dir {})", cluster, index, pid,
                     client_port, dir.string());
}

std::string EtcdMember::log_tail(std::size_t lines) const {
  std::string output = read_file(output_file());
  const auto usage = output.find("Usage:\n");
  if (usage != std::string::npos) output = output.substr(0, usage) + "(usage left out)\n";
  std::string text = log_tails({log_file()}, lines);
  if (!output.empty()) {
    if (text == "(no log output)") text.clear();
    text += fmt::format("--- {} (last {} lines) ---\n{}", output_file().string(), lines,
                        tail_lines(output, lines));
  }
  if (text.back() != '\n') text += '\n';
  return fmt::format("=== member {} ===\n{}", index, text);
}

bool EtcdMember::bind_failed() const {
  const std::string fresh =
      read_file(log_file(), log_offset) + read_file(output_file(), output_offset);
  return fresh.find("address already in use") != std::string::npos;
}

void EtcdMember::spawn(const std::vector<std::string>& argv) {
  log_offset = file_size_or_zero(log_file());
  output_offset = file_size_or_zero(output_file());
  UniqueFd output(::open(output_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (output.get() < 0) throw_errno(fmt::format("open {}", output_file().string()));
  // etcd takes ETCD_* variables for flags: none of the test environment's may reach it.
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (text.rfind("ETCD_", 0) == 0) env.push_back(text.substr(0, text.find('=')) + "=");
  }
  pid = detail::spawn({argv, env, output.get(), output.get(), dir.string()});
  paused = false;
  probe = tls ? std::make_unique<EtcdClient>(etcd_url(client_port, true), *tls, kProbeTimeout)
              : std::make_unique<EtcdClient>(etcd_url(client_port), kProbeTimeout);
  const std::string serving = "\"msg\":\"serving peer traffic\"";
  wait_until(
      [&] {
        return !check_running() ||
               read_file(log_file(), log_offset).find(serving) != std::string::npos;
      },
      milliseconds(2000), milliseconds(5));
}

bool EtcdMember::check_running() {
  if (pid <= 0) return false;
  if (child_running(pid)) return true;
  ended();
  return false;
}

EtcdMember::Answer EtcdMember::ask() {
  if (!check_running()) return {"down"};
  if (paused) return {"paused"};
  try {
    const EtcdMemberStatus status = probe->status();
    id = status.member_id;
    if (status.leader == 0) return {"no leader"};
    return {status.leader == status.member_id ? "leader" : "follower", status.leader};
  } catch (const EtcdError&) {
    return {check_running() ? "unreachable" : "down"};
  }
}

void EtcdMember::kill() noexcept {
  if (pid <= 0) return;
  kill_child(pid);
  ended();
}

void EtcdMember::ended() noexcept {
  pid = -1;
  paused = false;
}

}  // namespace dlock::test::detail
