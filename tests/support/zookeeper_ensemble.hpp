// Test harness: a real ZooKeeper ensemble (3 members by default) on free loopback ports, in a
// throw-away directory, each member a `java ... QuorumPeerMain` stopped by process id; and a
// small synchronous client on ZooKeeper's C library (zookeeper_mt).
//
//   dlock::test::ZookeeperEnsemble zk;         // nothing runs yet
//   zk.start();                                // 3 JVMs; returns once a quorum serves
//   std::string hosts = zk.connect_string();   // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
//   int leader = zk.leader();                  // index (0-based) of the member that leads
//   zk.kill(leader);                           // SIGKILL; zk.stop(i) is SIGTERM, then SIGKILL
//   zk.wait_serving();                         // the other two elect a leader and serve
//   zk.start_member(leader);                   // same ports and data: it rejoins as follower
//   zk.pause(1);                               // SIGSTOP: the member answers nothing
//   zk.resume(1);
//
//   dlock::test::ZookeeperClient client(zk.connect_string());
//   client.create("/locks", "");                               // returns the path created
//   client.create("/locks/a-", "x", ZOO_EPHEMERAL_SEQUENTIAL); // "/locks/a-0000000000"
//   auto names = client.children("/locks");    // {"a-0000000000"}
//   auto data = client.get("/locks/a-0000000000");     // std::optional<std::string>
//   auto stat = client.exists("/locks/a-0000000000");  // ->ephemeral_owner == session_id()
//   client.remove("/locks/a-0000000000");
//
// CMake: link dlock_test_zookeeper (it brings dlock_test_support and the C library, so the
// ZOO_* flags of <zookeeper/zookeeper.h> are at hand).
//
// Each member's directory (DIR/member-I, I its index; its ZooKeeper id is I + 1) holds zoo.cfg,
// data/myid, data/version-2 (snapshots and transaction logs), zookeeper.log (the server's log,
// log4j 1.2 through slf4j as Debian packages it; or logback.xml's, when the classpath brings
// logback) and output.log (the JVM's stdout and stderr). The servers run with tickTime
// Options::tick, initLimit=10, syncLimit=5, forceSync=no, no admin server, the four-letter
// words srvr, mntr, ruok and stat, min/max session timeouts 2 ticks / 60 s and no limit on
// connections per client address.
//
// Processes: each member is a harness child like a RedisServer (registry, exit and signal
// safety nets, PR_SET_PDEATHSIG=SIGKILL), so it dies with the test program, even one killed by
// SIGKILL. A JVM has no child processes; pause() stops all its threads with SIGSTOP.
//
// The java program and the classpath are found at configure time (DLOCK_JAVA,
// DLOCK_ZOOKEEPER_CLASSPATH: Debian's /usr/share/java/zookeeper.jar, whose manifest names its
// dependencies, with slf4j-log4j12.jar and log4j-1.2.jar). Without them start() throws. The
// JVMs map the server's classes from a class-data-sharing archive kept in the build tree
// (tests/support/zookeeper-classes-HASH.jsa), written by the first ensemble that runs without
// one when a member exits cleanly (Options::class_data_sharing).
//
// A member "serves" when it answers `srvr` with Mode leader, follower or standalone; "a quorum
// serves" when every running, unpaused member serves, they are a majority of the ensemble and
// exactly one of them says leader.
//
// JVM start-up is slow (start() takes 1-2 s on a busy 2-core machine with the class archive,
// 2-3 s without; a member's restart 0.3-1 s): share one ensemble among the tests of a program
// where possible (a static member of a fixture, created in SetUpTestSuite, and one ctest entry
// for the program rather than gtest_discover_tests, which runs each test in its own process).
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

/// The java program found at configure time (DLOCK_JAVA), or "" when none was found.
[[nodiscard]] std::string zookeeper_java_program();
/// The classpath of the ZooKeeper server found at configure time (DLOCK_ZOOKEEPER_CLASSPATH),
/// or "" when zookeeper.jar was not found.
[[nodiscard]] std::string zookeeper_classpath();

/// Sends a four-letter word (e.g. "srvr", "mntr", "ruok") to 127.0.0.1:`port` and returns the
/// whole answer (the server closes the connection after it), or std::nullopt when nothing
/// connects or the answer does not end within `timeout`. Never throws but for memory.
[[nodiscard]] std::optional<std::string> zookeeper_four_letter_word(
    int port, const std::string& word,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(1000));

/// How to run an ensemble.
struct ZookeeperEnsembleOptions {
  /// Number of members. With 1 the member runs standalone (Mode: standalone); with more,
  /// standaloneEnabled=false.
  int members = 3;
  /// tickTime. initLimit is 10 ticks, syncLimit 5 (a follower or leader that hears nothing for
  /// 5 ticks gives up), minSessionTimeout 2 ticks.
  std::chrono::milliseconds tick{500};
  /// Lines "key=value" appended to each zoo.cfg (ZooKeeper keeps the last of a key).
  std::vector<std::string> extra_config;
  /// Extra JVM options, before the main class (e.g. "-Dzookeeper.commitLogCount=100").
  std::vector<std::string> jvm_options;
  /// Keep the directory after destruction (also when DLOCK_TEST_KEEP_DIRS=1).
  bool keep_dir = false;
  /// Label used in the directory name and in error messages.
  std::string name = "zookeeper";
  /// Bound on start() until a quorum serves, and on start_member() until the member serves.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(60);
  /// Bound on the wait after SIGTERM before stop() sends SIGKILL.
  std::chrono::milliseconds stop_timeout = std::chrono::seconds(5);
  /// Map the server's classes from an archive in the build tree (JVM class-data sharing: a
  /// start takes about a third less). The first ensemble without one writes it when a member
  /// exits cleanly.
  bool class_data_sharing = true;
};

/// A ZooKeeper ensemble on 127.0.0.1, members indexed from 0 (member i has ZooKeeper id i + 1).
/// The constructor starts nothing; the destructor stops every member and removes the
/// directory. Not thread-safe; movable, not copyable.
class ZookeeperEnsemble {
 public:
  using Options = ZookeeperEnsembleOptions;

  explicit ZookeeperEnsemble(Options options = {});
  ~ZookeeperEnsemble();
  ZookeeperEnsemble(ZookeeperEnsemble&&) noexcept;
  ZookeeperEnsemble& operator=(ZookeeperEnsemble&&) noexcept;
  ZookeeperEnsemble(const ZookeeperEnsemble&) = delete;
  ZookeeperEnsemble& operator=(const ZookeeperEnsemble&) = delete;

  /// The first start makes the directory, picks 3 free ports per member (client, quorum,
  /// election) and writes each member's zoo.cfg and myid; every start then runs every member
  /// and waits, bounded by start_timeout, until a quorum serves and every member serves. A
  /// later start (after stop_all) reuses directory, data and ports. A member that cannot bind
  /// its port on the first start makes all start again on fresh ports. Throws
  /// std::runtime_error with each member's mode and log tail on failure (no member is left
  /// running), std::logic_error if a member is already running.
  void start();
  /// SIGTERM to every member (SIGCONT too, in case one is paused), a bounded wait, then SIGKILL
  /// to those left; reaps them. Data and ports stay for a later start().
  void stop_all() noexcept;

  /// Starts member `i` again (after stop or kill) with its ports and data. Waits, bounded by
  /// start_timeout, until it answers `srvr`, then, when a majority of members is running
  /// (counting it), until it serves. Throws std::logic_error before the first start() or if it
  /// runs, std::runtime_error (with its log tail) if it does not come up.
  void start_member(int i);
  /// SIGTERM (and SIGCONT), wait up to stop_timeout, then SIGKILL; reaps it. No-op when down.
  void stop(int i) noexcept;
  /// SIGKILL to member `i`; reaps it. No-op when down.
  void kill(int i) noexcept;
  /// SIGSTOP to member `i`: it keeps its ports and connections but answers nothing until
  /// resume(); its peers drop it after syncLimit (5 ticks). Returns once the kernel reports it
  /// stopped.
  void pause(int i);
  /// SIGCONT after pause().
  void resume(int i);

  /// Waits until a quorum serves (see the top of this file) and returns the leader's index.
  /// Throws std::logic_error at once when fewer than a majority of members are running and
  /// unpaused, std::runtime_error with the modes and log tails after `timeout`.
  int wait_serving(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// The member that says leader (asked with `srvr`, the running, unpaused members only), or
  /// -1 when none or more than one does.
  [[nodiscard]] int leader() const;
  /// What member `i` says it is: "leader", "follower", "standalone" or "observer" (the Mode
  /// line of `srvr`); "not serving" when it answers without one (electing, or cut off from a
  /// quorum); "unreachable" when it does not answer within 1 s; "paused" while paused (not
  /// asked); "down" when not running.
  [[nodiscard]] std::string mode(int i) const;
  /// Every member's mode, e.g. "[leader, follower, down]", for messages.
  [[nodiscard]] std::string modes() const;

  /// "127.0.0.1:P1,127.0.0.1:P2,..." of all members; empty before the first start.
  [[nodiscard]] std::string connect_string() const;
  /// The member's client port; 0 before the first start.
  [[nodiscard]] int client_port(int i) const;
  /// "127.0.0.1:PORT" of member `i`.
  [[nodiscard]] std::string endpoint(int i) const;
  [[nodiscard]] int members() const;
  /// Whether member `i` is alive (reaps it and returns false if it has exited).
  [[nodiscard]] bool running(int i);
  [[nodiscard]] bool paused(int i) const;
  /// The member's process id, or -1 when not running.
  [[nodiscard]] pid_t pid(int i) const;
  /// The ensemble's directory; empty before the first start.
  [[nodiscard]] const std::filesystem::path& dir() const;
  /// DIR/member-i.
  [[nodiscard]] std::filesystem::path member_dir(int i) const;
  [[nodiscard]] std::filesystem::path log_file(int i) const;
  /// The last `lines` lines of each member's log and output, for failure messages.
  [[nodiscard]] std::string log_tail(std::size_t lines = 30) const;
  [[nodiscard]] const Options& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// An operation failed: the server's answer (code from zookeeper.h, e.g. ZNODEEXISTS = -110,
/// ZNONODE = -101), a lost connection, or no answer within the timeout (ZOPERATIONTIMEOUT).
class ZookeeperError : public std::runtime_error {
 public:
  ZookeeperError(const std::string& message, int code) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] int code() const { return code_; }

 private:
  int code_;
};

/// The parts of a znode's Stat tests look at.
struct ZookeeperStat {
  std::int64_t czxid = 0;
  std::int64_t mzxid = 0;
  std::int64_t ctime_ms = 0;
  std::int64_t mtime_ms = 0;
  std::int32_t version = 0;
  std::int32_t cversion = 0;
  /// The session that owns an ephemeral node, 0 for a persistent one.
  std::int64_t ephemeral_owner = 0;
  std::int32_t data_length = 0;
  std::int32_t num_children = 0;
};

/// A small synchronous client (the C library's asynchronous calls, each waited for with a
/// deadline) for setting up, inspecting and tampering with znodes in tests. One session: the
/// constructor connects (bounded by `timeout`) and the destructor closes it, so its ephemeral
/// nodes go. The C library moves the session to another member when its member fails; a read
/// (children, get, exists) that meets a lost connection is tried again until the timeout, a
/// write is not. The library's own log lines are dropped. Not thread-safe; movable.
class ZookeeperClient {
 public:
  /// `connect_string`: "host:port,..."; `timeout` bounds the connect and each call;
  /// `session_timeout` is asked of the server (which clamps it to its min and max).
  explicit ZookeeperClient(std::string connect_string,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10),
                           std::chrono::milliseconds session_timeout = std::chrono::seconds(10));
  ~ZookeeperClient();
  ZookeeperClient(ZookeeperClient&&) noexcept;
  ZookeeperClient& operator=(ZookeeperClient&&) noexcept;
  ZookeeperClient(const ZookeeperClient&) = delete;
  ZookeeperClient& operator=(const ZookeeperClient&) = delete;

  /// The names (not paths) of the children of `path`, sorted; throws ZNONODE's error when
  /// `path` does not exist.
  std::vector<std::string> children(const std::string& path);
  /// The data of `path`, or std::nullopt when it does not exist.
  std::optional<std::string> get(const std::string& path);
  /// The Stat of `path`, or std::nullopt when it does not exist.
  std::optional<ZookeeperStat> exists(const std::string& path);
  /// Creates `path` (open ACL) with `flags` (0 = persistent, ZOO_EPHEMERAL, ZOO_SEQUENCE and
  /// the ZOO_*_SEQUENTIAL modes of zookeeper.h) and returns the path created (with its
  /// sequence number). Throws ZNODEEXISTS's or ZNONODE's (no parent) error.
  std::string create(const std::string& path, const std::string& data = {}, int flags = 0);
  /// Sets the data of `path` (any version).
  void set(const std::string& path, const std::string& data);
  /// Deletes `path` (any version); false when it did not exist. Throws ZNOTEMPTY's error when
  /// it has children.
  bool remove(const std::string& path);
  /// The session id (the ephemeral_owner of this client's ephemeral nodes).
  [[nodiscard]] std::int64_t session_id() const;
  /// The member the session is connected to ("127.0.0.1:PORT"), or "" while disconnected.
  [[nodiscard]] std::string connected_to() const;
  /// Ends the session (its ephemeral nodes go); later calls throw. Bounded by a few seconds.
  void close() noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock::test
