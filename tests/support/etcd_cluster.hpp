// Test harness: a real etcd cluster (3 members by default) on free loopback ports, in a
// throw-away directory, each member an `etcd` process stopped by process id; optionally a
// TcpProxy in front of each member's client port; and a small synchronous gRPC client.
//
//   dlock::test::EtcdClusterOptions options;
//   options.proxies = true;                    // clients go through one TcpProxy a member
//   dlock::test::EtcdCluster etcd(options);    // nothing runs yet
//   etcd.start();                              // 3 members; returns once all serve, one leads
//   auto urls = etcd.endpoints();              // {"http://127.0.0.1:P1", ...} (the proxies')
//   int leader = etcd.leader();                // index (0-based) of the member that leads
//   etcd.kill(leader);                         // SIGKILL; etcd.stop(i) is SIGTERM, then SIGKILL
//   etcd.wait_serving();                       // the other two elect a leader and serve
//   etcd.start_member(leader);                 // same ports and data: it rejoins as follower
//   etcd.pause(1);                             // SIGSTOP: the member answers nothing
//   etcd.resume(1);
//   etcd.proxy(2).blackhole();                 // member 2's clients hear nothing (tcp_proxy.hpp)
//
//   dlock::test::EtcdClient client(etcd.endpoint(0));   // one member, 2 s deadline a call
//   std::int64_t lease = client.grant(10);              // a lease of 10 s
//   client.put("/locks/a", "x", lease);                 // returns the revision of the write
//   auto kv = client.get("/locks/a");                   // ->lease == lease, ->version == 1
//   auto all = client.range("/locks/");                 // sorted by create revision
//   client.revoke(lease);                               // its keys go with it
//
//   options.tls.enabled = true;                // https:// client URLs, test_pki() certificates
//   options.tls.client_cert_auth = true;       // and every client shows a certificate
//   EtcdClient over_tls = etcd.client(0);      // trusts the test CA, shows its client cert
//   auto tls = *etcd.client_tls();             // the same files, e.g. for a dlock TlsConfig
//
// CMake: link dlock_test_etcd (it brings dlock_test_support and dlock_runtime_internals, whose
// dlock_runtime holds the gRPC code generated from runtime/src/etcd/etcd_api.proto).
//
// Each member's directory (DIR/member-I, I its index, etcd name mI) holds data/ (etcd's data
// directory: WAL and snapshots), etcd.log (the server's log, zap's JSON lines) and output.log
// (its stdout and stderr: flag errors land there). The members run with
// --initial-cluster-state new, a cluster token unique to the directory, the heartbeat interval
// and election timeout of the options and etcd's defaults otherwise (pre-vote off, no
// auto-compaction, the default backend quota). A restarted member finds its data directory
// and ignores the --initial-cluster flags: it rejoins as the member it was. Members advertise
// their own client ports, not the proxies'.
//
// Processes: each member is a harness child like a RedisServer (registry, exit and signal
// safety nets, PR_SET_PDEATHSIG=SIGKILL), so it dies with the test program, even one killed by
// SIGKILL. etcd forks no helper; pause() stops all its threads with SIGSTOP.
//
// The etcd program is found at configure time (DLOCK_ETCD; Debian's etcd-server, 3.4.23, from
// scripts/install-deps); without it start() throws. The harness asks each member directly
// (never through a proxy) for its Maintenance.Status, 1 s at most: a member "serves" when it
// answers with a leader. "A quorum serves" when every running, unpaused member serves, they
// are a majority, all name the same leader, that leader is one of them and a linearizable read
// through it succeeds.
//
// etcd starts fast. Measured here (2 cores, default timings): start() of 3 new members
// 0.3-1.0 s (spawned one after the other, each once the one before serves its peer port; the
// rest is the first election's randomized timeout), start() again on their data 0.25-0.75 s,
// a member's restart 50-100 ms, stop() 10 ms, stop_all() and destruction 50-300 ms. A killed
// leader is replaced after its followers' randomized election timeout (1-2 election
// timeouts): a quorum with a new leader serves writes 1.1-2.3 s after the SIGKILL. Still,
// share one cluster among the tests of a program where it fits (a static of a fixture,
// created in SetUpTestSuite, and one ctest entry).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::test {

class TcpProxy;
class EtcdClient;

/// The etcd program found at configure time (DLOCK_ETCD), or "" when none was found.
[[nodiscard]] std::string etcd_program();

/// How a harness client (EtcdClient) speaks TLS to a member.
struct EtcdClientTls {
  /// The CA certificates to trust (PEM); empty: gRPC's default roots.
  std::string ca_file;
  /// The client certificate and its key, shown when the member asks; empty: none.
  std::string cert_file;
  std::string key_file;
  /// The name checked against the member's certificate (and sent as SNI); empty: the host.
  std::string server_name;
  /// false: the member's certificate is not checked at all (for a member whose certificate is
  /// meant to fail, e.g. an expired one, that the harness must still ask for its status).
  bool verify = true;
};

/// TLS on the members' client URLs (https://127.0.0.1:C); the peer URLs stay plain http.
struct EtcdClusterTls {
  bool enabled = false;
  /// --cert-file and --key-file; empty: test_pki()'s server certificate and key.
  std::string cert_file;
  std::string key_file;
  /// --client-cert-auth and --trusted-ca-file: every client shows a certificate signed by
  /// `trusted_ca_file` (empty: test_pki()'s CA). etcd asks for one whenever it is given a
  /// trusted CA, so the file is passed only with this.
  bool client_cert_auth = false;
  std::string trusted_ca_file;
  /// What the harness's own client (and EtcdCluster::client_tls()) uses; empty files are
  /// test_pki()'s CA and client certificate (shown only when the member asks).
  EtcdClientTls client;
};

/// How to run a cluster.
struct EtcdClusterOptions {
  /// Number of members (1 makes a cluster of one, which is its own leader).
  int members = 3;
  /// --heartbeat-interval and --election-timeout. etcd's lease TTLs are at least 1.5 election
  /// timeouts, rounded up to whole seconds (2 s with the default).
  std::chrono::milliseconds heartbeat_interval{100};
  std::chrono::milliseconds election_timeout{1000};
  /// Extra command-line flags after the harness's (e.g. "--pre-vote=true"); a flag given twice
  /// takes its last value.
  std::vector<std::string> extra_flags;
  /// A TcpProxy in front of each member's client port (proxy(i)); endpoints() then names the
  /// proxies. They live from the first successful start() to destruction.
  bool proxies = false;
  /// Keep the directory after destruction (also when DLOCK_TEST_KEEP_DIRS=1).
  bool keep_dir = false;
  /// Label used in the directory name, the cluster token and error messages.
  std::string name = "etcd";
  /// The etcd program; empty: the one found at configure time.
  std::string program;
  /// Bound on start() until a quorum serves, and on start_member() until the member serves.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(30);
  /// Bound on the wait after SIGTERM before stop() sends SIGKILL.
  std::chrono::milliseconds stop_timeout = std::chrono::seconds(5);
  /// TLS on the client URLs (off: plain http, as before).
  EtcdClusterTls tls;
};

/// An etcd cluster on 127.0.0.1, members indexed from 0 (etcd names m0, m1, ...). The
/// constructor starts nothing; the destructor stops every member and the proxies and removes
/// the directory. Not thread-safe (but for the proxies' modes); movable, not copyable.
class EtcdCluster {
 public:
  using Options = EtcdClusterOptions;

  explicit EtcdCluster(Options options = {});
  ~EtcdCluster();
  EtcdCluster(EtcdCluster&&) noexcept;
  EtcdCluster& operator=(EtcdCluster&&) noexcept;
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  /// The first start makes the directory and picks 2 free ports per member (client, peer);
  /// every start then runs every member and waits, bounded by start_timeout, until a quorum
  /// serves and every member serves. A later start (after stop_all) reuses directory, data and
  /// ports. A member that cannot bind its port on the first start makes all start again on
  /// fresh ports, with fresh data. Throws std::runtime_error with each member's role and log
  /// tail on failure (no member is left running), std::logic_error if a member is running.
  void start();
  /// SIGCONT to every member (in case one is paused), then SIGTERM to one after the other,
  /// each once the one before has exited (a leader stopped by SIGTERM first hands its
  /// leadership to a running peer, and waits for one that is stopping too), all within
  /// stop_timeout; SIGKILL to those left. Data, ports and proxies stay for a later start().
  void stop_all() noexcept;

  /// Starts member `i` again (after stop or kill) with its ports and data. Waits, bounded by
  /// start_timeout, until its client port accepts connections, then, when a majority of the
  /// members is running (counting it), until it serves. Throws std::logic_error before the
  /// first start() or if it runs, std::runtime_error (with its log tail) if it does not come up.
  void start_member(int i);
  /// SIGTERM (and SIGCONT), wait up to stop_timeout, then SIGKILL; reaps it. No-op when down.
  void stop(int i) noexcept;
  /// SIGKILL to member `i`; reaps it. No-op when down.
  void kill(int i) noexcept;
  /// SIGSTOP to member `i`: it keeps its ports and connections but answers nothing until
  /// resume(); when it led, the others elect a leader after their election timeout. Returns
  /// once the kernel reports it stopped.
  void pause(int i);
  /// SIGCONT after pause().
  void resume(int i);

  /// Waits until a quorum serves (see the top of this file) and returns the leader's index.
  /// Throws std::logic_error at once when fewer than a majority of the members are running and
  /// unpaused, std::runtime_error with the roles and log tails after `timeout`.
  int wait_serving(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// The member every running, unpaused member that answers names as leader, when it is one of
  /// them and says so itself; -1 when there is none or they disagree.
  [[nodiscard]] int leader() const;
  /// What member `i` says it is: "leader", "follower", "no leader" (it answers, knowing no
  /// leader: electing, or cut off from a quorum); "unreachable" when its Status does not come
  /// within 1 s (starting, or without a quorum since its start); "paused" while paused (not
  /// asked); "down" when not running.
  [[nodiscard]] std::string role(int i) const;
  /// Every member's role, e.g. "[leader, follower, down]", for messages.
  [[nodiscard]] std::string roles() const;

  /// "http://127.0.0.1:PORT" ("https://" with Options::tls) of every member: of the proxies
  /// when Options::proxies, else the members' own; empty before the first start.
  [[nodiscard]] std::vector<std::string> endpoints() const;
  /// The members' own client URLs, whatever Options::proxies says.
  [[nodiscard]] std::vector<std::string> direct_endpoints() const;
  /// endpoints()[i] and direct_endpoints()[i].
  [[nodiscard]] std::string endpoint(int i) const;
  [[nodiscard]] std::string direct_endpoint(int i) const;
  /// The member's own client port and peer port; 0 before the first start.
  [[nodiscard]] int client_port(int i) const;
  [[nodiscard]] int peer_port(int i) const;
  /// The member's etcd id (its Status header's member_id, stable across restarts); 0 until a
  /// start has heard from it.
  [[nodiscard]] std::uint64_t member_id(int i) const;
  /// The proxy in front of member `i`. Throws std::logic_error without Options::proxies or
  /// before the first start.
  [[nodiscard]] TcpProxy& proxy(int i);
  /// Every proxy back to forwarding (no-op without proxies).
  void pass_all();
  [[nodiscard]] int members() const;
  /// Whether member `i` is alive (reaps it and returns false if it has exited).
  [[nodiscard]] bool running(int i);
  [[nodiscard]] bool paused(int i) const;
  /// The member's process id, or -1 when not running.
  [[nodiscard]] pid_t pid(int i) const;
  /// The cluster's directory; empty before the first start.
  [[nodiscard]] const std::filesystem::path& dir() const;
  /// DIR/member-i, and its etcd.log.
  [[nodiscard]] std::filesystem::path member_dir(int i) const;
  [[nodiscard]] std::filesystem::path log_file(int i) const;
  /// The last `lines` lines of each member's log and output, for failure messages.
  [[nodiscard]] std::string log_tail(std::size_t lines = 30) const;
  [[nodiscard]] const Options& options() const;
  /// Options::tls.client with the test_pki() files filled in; nothing without Options::tls.
  [[nodiscard]] std::optional<EtcdClientTls> client_tls() const;
  /// A client of member `i` (endpoint(i)), speaking TLS as the harness does when it is on.
  [[nodiscard]] EtcdClient client(int i,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(2)) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A call failed: the gRPC status (code() is grpc::StatusCode's value, e.g. 4
/// DEADLINE_EXCEEDED, 5 NOT_FOUND, 14 UNAVAILABLE) with the server's message.
class EtcdError : public std::runtime_error {
 public:
  EtcdError(const std::string& message, int code) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] int code() const { return code_; }

 private:
  int code_;
};

/// A key as etcd stores it.
struct EtcdKeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  /// The lease the key is attached to, 0 for none.
  std::int64_t lease = 0;
};

/// What a member says of itself (Maintenance.Status).
struct EtcdMemberStatus {
  std::uint64_t member_id = 0;
  /// The leader's member id, 0 when it knows none.
  std::uint64_t leader = 0;
  std::uint64_t raft_term = 0;
  std::uint64_t raft_index = 0;
  /// The store's revision as this member has applied it.
  std::int64_t revision = 0;
  std::string version;
};

/// A small synchronous client of one member (its own gRPC channel, reconnecting after at most
/// 1 s) for setting up, inspecting and tampering with keys and leases in tests. Every call has
/// a deadline (`timeout`), waits within it for a connection (a member that is starting or
/// restarting is waited for) and throws EtcdError on any failure: UNAVAILABLE with gRPC's last
/// connection error when nothing accepts, DEADLINE_EXCEEDED when the member (or its proxy)
/// holds the call. Reads are linearizable unless `serializable` (then the member answers from
/// its own store, also without a quorum). Not thread-safe; movable.
class EtcdClient {
 public:
  /// `endpoint`: "http://127.0.0.1:PORT" or "127.0.0.1:PORT" (an https:// one throws
  /// std::invalid_argument: it needs the TLS below). Connects lazily.
  explicit EtcdClient(std::string endpoint,
                      std::chrono::milliseconds timeout = std::chrono::seconds(2));
  /// Over TLS with `tls`, whatever the scheme ("https://", "http://" or none); throws
  /// std::runtime_error when a file cannot be read. A handshake that fails is an EtcdError
  /// (UNAVAILABLE) with gRPC's reason.
  EtcdClient(std::string endpoint, const EtcdClientTls& tls,
             std::chrono::milliseconds timeout = std::chrono::seconds(2));
  ~EtcdClient();
  EtcdClient(EtcdClient&&) noexcept;
  EtcdClient& operator=(EtcdClient&&) noexcept;
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  /// Writes `key` (attached to `lease` unless 0) and returns the revision of the write.
  std::int64_t put(const std::string& key, const std::string& value, std::int64_t lease = 0);
  /// The key, or std::nullopt when it does not exist.
  std::optional<EtcdKeyValue> get(const std::string& key, bool serializable = false);
  /// The keys starting with `prefix` (every key when empty), sorted by create revision.
  std::vector<EtcdKeyValue> range(const std::string& prefix, bool serializable = false);
  /// Deletes `key`; returns how many keys were deleted (0 or 1).
  std::int64_t remove(const std::string& key);
  /// Deletes the keys starting with `prefix`; returns how many.
  std::int64_t remove_prefix(const std::string& prefix);
  /// Grants a lease of `ttl_seconds` (etcd raises it to its minimum) and returns its id.
  std::int64_t grant(std::int64_t ttl_seconds);
  /// Revokes the lease: its keys are deleted. Throws (NOT_FOUND) when it does not exist.
  void revoke(std::int64_t lease);
  /// The seconds left to the lease, -1 when it has expired or does not exist.
  std::int64_t time_to_live(std::int64_t lease);
  /// The TTL the lease was granted with (after etcd's minimum), -1 when it is gone.
  std::int64_t granted_ttl(std::int64_t lease);
  /// The member's Maintenance.Status.
  EtcdMemberStatus status();

  /// "127.0.0.1:PORT", as dialled.
  [[nodiscard]] const std::string& target() const;
  [[nodiscard]] std::chrono::milliseconds timeout() const;
  void set_timeout(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock::test
