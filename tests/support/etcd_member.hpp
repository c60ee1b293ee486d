// One member of an EtcdCluster (etcd_cluster.hpp): its directory and ports, its etcd process,
// the harness's own client of it and the proxy in front of it. For the harness only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd_cluster.hpp"
#include "tcp_proxy.hpp"

namespace dlock::test::detail {

/// "http://127.0.0.1:PORT", or "https://127.0.0.1:PORT" with `tls`.
[[nodiscard]] std::string etcd_url(int port, bool tls = false);
/// The flags that put TLS on a member's client URLs (none when `tls` is off).
[[nodiscard]] std::vector<std::string> etcd_tls_flags(const EtcdClusterTls& tls);
/// `tls.client` with test_pki()'s files where it names none.
[[nodiscard]] EtcdClientTls resolved_client_tls(const EtcdClusterTls& tls);
/// Whether something accepts a TCP connection on 127.0.0.1:`port` within `timeout`.
[[nodiscard]] bool port_accepts(int port, std::chrono::milliseconds timeout);

struct EtcdMember {
  /// What the member says of itself: "leader", "follower", "no leader", "unreachable",
  /// "paused" or "down" (EtcdCluster::role), and the id of the leader it names (0 for none).
  struct Answer {
    std::string role;
    std::uint64_t leader_id = 0;
  };

  int index = 0;
  std::filesystem::path dir;
  int client_port = 0;
  int peer_port = 0;
  pid_t pid = -1;
  bool paused = false;
  std::uint64_t id = 0;               ///< from its Status, once heard
  std::uintmax_t log_offset = 0;      ///< of etcd.log at the last launch
  std::uintmax_t output_offset = 0;   ///< of output.log at the last launch
  std::unique_ptr<EtcdClient> probe;  ///< the harness's own client, straight to the member
  std::optional<EtcdClientTls> tls;   ///< how the probe speaks TLS; nothing: plain http
  std::unique_ptr<TcpProxy> proxy;

  [[nodiscard]] std::filesystem::path data_dir() const { return dir / "data"; }
  [[nodiscard]] std::filesystem::path log_file() const { return dir / "etcd.log"; }
  [[nodiscard]] std::filesystem::path output_file() const { return dir / "output.log"; }

  /// "<cluster> member I (pid, 127.0.0.1:PORT, dir)".
  [[nodiscard]] std::string describe(const std::string& cluster) const;
  /// etcd.log's tail and output.log's (without the usage text etcd prints after a flag error).
  [[nodiscard]] std::string log_tail(std::size_t lines) const;
  /// Whether the output since the last launch says a port was taken.
  [[nodiscard]] bool bind_failed() const;

  /// Runs `argv` with stdout and stderr appended to output.log and no ETCD_* variable of the
  /// test's environment, then waits (up to 2 s) until it serves its peer port: a new member
  /// asks its peers whether it has been bootstrapped before it serves its own, giving each a
  /// second, so members started together keep each other waiting (start() took 0.3-2.5 s so).
  void spawn(const std::vector<std::string>& argv);
  /// Reaps the member if it exited. True while it runs.
  bool check_running();
  /// Asks the member for its Status (1 s at most) unless it is down or paused.
  Answer ask();
  /// SIGKILL; reaps it. No-op when down.
  void kill() noexcept;
  /// Forgets the process after it has been reaped.
  void ended() noexcept;
};

}  // namespace dlock::test::detail
