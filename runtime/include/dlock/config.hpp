// dlock configuration: the validated, immutable value the runtime runs on.
//
//   dlock::Config cfg = dlock::load_config("/etc/shop/dlock.yaml");
//   dlock::LockSettings s = cfg.resolve("shop::place_order", "reports", {});
//   // s.lease, s.wait, s.on_busy, s.min_hold, s.max_hold, s.backend
//
// The YAML schema is documented in docs/CONFIG.md. Loading is the only place that knows the
// YAML library; everything here is plain C++ with std::chrono durations.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock {

using Millis = std::chrono::milliseconds;

/// The shortest lease accepted: the watchdog renews a lease every lease/3, which must not
/// round down to 0 ms.
inline constexpr Millis kMinimumLease{3};

/// What a guard does when the lock is not acquired within `wait`.
enum class OnBusy { kThrow, kSkip };

/// Whether holders of one key exclude each other (a write) or only exclusive holders (a
/// read). Set in the guard attribute or the runtime API, never in YAML: it is part of what
/// the code means.
enum class LockMode { kExclusive, kShared };

/// "exclusive" or "shared".
[[nodiscard]] const char* to_string(LockMode mode) noexcept;

/// The most permits one key may have (`permits=N`).
inline constexpr int kMaxPermits = 1000000;

/// Which kind of lock server a backend talks to.
enum class Topology {
  kSingle,
  kSentinel,
  kCluster,
  kRedlock,
  kMemory,
  kPostgres,
  kZookeeper,
  kEtcd
};

/// The topology's name as the configuration spells it ("single", "sentinel", ...).
[[nodiscard]] const char* to_string(Topology topology) noexcept;

/// A host and port, as written in the configuration (`127.0.0.1:6379`, `[::1]:6379`).
struct Endpoint {
  std::string host;
  int port = 6379;

  friend bool operator==(const Endpoint& a, const Endpoint& b) {
    return a.host == b.host && a.port == b.port;
  }
};

/// How a Redis backend secures its connections: `rediss://` addresses and the `tls:` block.
/// Every connection of the backend (sentinels, cluster nodes, Redlock instances and the
/// servers they name) uses the same settings.
struct TlsConfig {
  bool enabled = false;     ///< the addresses are rediss://
  std::string ca_file;      ///< certificates to trust; empty: the system's trust store
  std::string cert_file;    ///< client certificate, for servers that require one
  std::string key_file;     ///< its private key (unencrypted PEM)
  std::string server_name;  ///< for SNI and verification; empty: the host connected to
  bool verify = true;       ///< false accepts any certificate (tests only; logged)
};

/// pool_size when it is not set. Calls that share a connection pipeline their commands on
/// it, and fewer connections carry larger batches (docs/BENCHMARKS.md, "Connections per
/// server"); a connection lent to one call at a time serves only that call.
inline constexpr int kSharedPoolSize = 4;
inline constexpr int kExclusivePoolSize = 8;
/// spin when it is not set: replies that come within it cost no sleep and no wake-up, and
/// the CPU does not go idle meanwhile (docs/BENCHMARKS.md, figure 18).
inline constexpr std::chrono::microseconds kDefaultSpin{20};
inline constexpr std::chrono::microseconds kMaxSpin{1000};

/// One entry of `backends:`.
struct BackendConfig {
  std::string name;
  Topology topology = Topology::kSingle;
  /// single: one endpoint; sentinel: the sentinels; cluster: seed nodes; redlock: instances;
  /// zookeeper: the ensemble's servers (`hosts`); etcd: the cluster's members (`endpoints`,
  /// https:// ones with `tls.enabled`); postgres: none (the hosts are in `dsn`).
  std::vector<Endpoint> endpoints;
  std::string master_name;              ///< sentinel only
  int wait_replicas = 0;                ///< sentinel only
  double clock_drift_factor = 0.01;     ///< redlock only
  std::string username;                 ///< Redis ACL user; empty for none
  std::string password;                 ///< never logged; `${ENV}` already expanded
  std::string sentinel_username;        ///< credentials for the sentinels themselves
  std::string sentinel_password;
  int database = 0;
  Millis connect_timeout{1000};
  Millis command_timeout{1000};
  /// Connections per server. 0, the default (or any value below 1 set in code), means
  /// kSharedPoolSize where calls share connections (single, sentinel, cluster) and
  /// kExclusivePoolSize where each serves one call at a time (redlock, a backend with
  /// wait_replicas, postgres). A configuration file takes 1..1024 only.
  int pool_size = 0;
  /// Longest pause between two tries while waiting, when no release notification arrives.
  Millis poll_interval{250};
  /// single, sentinel, cluster: how long a thread waiting for a reply that another thread
  /// reads spins (giving its CPU to any thread that can run) before it sleeps; 0 never spins.
  /// A configuration file takes 0..1000 (`spin_us`).
  std::chrono::microseconds spin{kDefaultSpin};
  TlsConfig tls;
  /// postgres only: a libpq connection string (`postgresql://user@host:5432/db?...` or
  /// `host=... dbname=...`), `${ENV}` already expanded; never logged whole.
  std::string dsn;
  /// postgres only: the lock table, `name` or `schema.name`, created if missing; run
  /// records and the audit list live in `<table>_runs` and `<table>_audit`.
  std::string table = "dlock_locks";
  /// zookeeper only: the session timeout asked of the ensemble (it may grant another within
  /// its min/max; the shorter of the two bounds a lease). A held lock outlives a holder that
  /// stopped talking to the ensemble by at most this.
  Millis session_timeout{10000};
  /// zookeeper: an absolute znode path; the znodes of a service live under
  /// `<root>/<service>/`, created as needed. etcd: the prefix of every key of the backend
  /// (a service's keys start with `<root>/<service>/`).
  std::string root = "/dlock";
};

/// Lock settings at one level of precedence; unset fields fall through to the level below.
struct LockOverrides {
  std::optional<Millis> lease;
  std::optional<Millis> wait;
  std::optional<OnBusy> on_busy;
  std::optional<Millis> min_hold;
  std::optional<Millis> max_hold;
  std::optional<std::string> backend;
  /// The attribute and the runtime API only; YAML refuses it.
  std::optional<LockMode> mode;
  std::optional<bool> fair;
  std::optional<int> permits;
};

/// Fully resolved settings for one lock.
struct LockSettings {
  Millis lease{30000};
  /// Longest wait for a busy lock; 0 tries once.
  Millis wait{10000};
  OnBusy on_busy = OnBusy::kThrow;
  Millis min_hold{0};
  /// No renewal past this; nullopt means no limit.
  std::optional<Millis> max_hold;
  std::string backend = "default";
  LockMode mode = LockMode::kExclusive;
  /// Waiters are granted in the order their requests reached the server.
  bool fair = false;
  /// > 0: a semaphore of this many permits, each an exclusive lease of its own; 0: a lock.
  int permits = 0;
};

/// The whole configuration file.
struct Config {
  /// Key namespace: every key lives under it.
  std::string service = "default";
  std::map<std::string, BackendConfig> backends;
  LockOverrides defaults;
  std::map<std::string, LockOverrides> policies;
  /// Overrides by guard name, applied last.
  std::map<std::string, LockOverrides> locks;
  /// Where this configuration came from (a path, or "<built-in>"), for messages.
  std::string source = "<built-in>";

  /// The built-in configuration: one Redis node at 127.0.0.1:6379.
  static Config builtin();

  /// Applies, lowest first: built-in, `defaults`, `policies[policy]`, `attribute`,
  /// `locks[guard_name]`. An empty `policy` means none. Throws ConfigError for an unknown
  /// policy, a backend name that is not configured, a min_hold above max_hold once the
  /// levels are combined, or permits outside 1..kMaxPermits or combined with mode=shared.
  [[nodiscard]] LockSettings resolve(const std::string& guard_name, const std::string& policy,
                                     const LockOverrides& attribute) const;
};

/// A configuration that cannot be used. `what()` reads `file:line:col: error: key: message`.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Reads and validates a YAML file. Throws ConfigError naming file, line, column and key.
[[nodiscard]] Config load_config(const std::string& path);

/// The same for YAML text; `source_name` stands for the file in messages.
[[nodiscard]] Config parse_config(const std::string& yaml_text, const std::string& source_name);

/// Parses `250ms`, `30s`, `10m`, `1h` (an integer and a unit). Returns nullopt otherwise.
[[nodiscard]] std::optional<Millis> parse_duration(std::string_view text);

/// Parses `redis://[user[:password]@]host[:port][/db]` or `host:port`; IPv6 hosts in brackets.
/// `rediss://` is the same with TLS.
struct ParsedAddress {
  Endpoint endpoint;
  bool tls = false;  ///< rediss://
  std::string username;
  std::string password;
  std::optional<int> database;
};
[[nodiscard]] std::optional<ParsedAddress> parse_address(std::string_view text);

}  // namespace dlock
