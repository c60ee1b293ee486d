// The configuration of a zookeeper backend: `hosts`, `session_timeout` and `root`, the keys it
// shares with the other backends and those it does not, and what it asks of `service`
// (docs/CONFIG.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "config_test_helpers.hpp"
#include "dlock/config.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;

// A zookeeper backend named `zk` with `settings`, each a line "key: value" (from line 4 on),
// used by default.
std::string zookeeper_backend(const std::string& settings) {
  return "backends:\n  zk:\n    topology: zookeeper\n" + settings + "defaults: {backend: zk}\n";
}

// The same with three servers on line 4 and `settings` from line 5 on.
std::string ensemble(const std::string& settings) {
  return zookeeper_backend("    hosts: [127.0.0.1:2181, 127.0.0.1:2182, 127.0.0.1:2183]\n" +
                           settings);
}

// Each row's text, kept alive for the table's pointers.
const std::string kRows[] = {
    // 0-9: keys.
    zookeeper_backend("    root: /dlock\n"),
    ensemble("    pool_size: 4\n"),
    ensemble("    password: hunter2\n"),
    ensemble("    username: app\n"),
    ensemble("    tls: {verify: false}\n"),
    ensemble("    database: 1\n"),
    zookeeper_backend("    address: 127.0.0.1:2181\n"),
    zookeeper_backend("    nodes: [127.0.0.1:2181]\n"),
    ensemble("    dsn: host=h\n"),
    ensemble("    master_name: m\n"),
    // 10-19: hosts as a whole.
    zookeeper_backend("    hosts: \"127.0.0.1:2181,127.0.0.1:2182\"\n"),
    zookeeper_backend("    hosts: zk1:2181,zk2:2181,zk3:2181/app\n"),
    zookeeper_backend("    hosts: 127.0.0.1:2181\n"),
    zookeeper_backend("    hosts: {zk1: 2181}\n"),
    zookeeper_backend("    hosts:\n"),
    zookeeper_backend("    hosts: []\n"),
    zookeeper_backend("    hosts: [127.0.0.1:2181, 127.0.0.1:2182, 127.0.0.1]\n"),
    zookeeper_backend("    hosts: [\"[::1]:2181\", \"[0::1]\"]\n"),
    zookeeper_backend("    hosts: [zk1:2181, zk2:2181/app]\n"),
    zookeeper_backend("    hosts: [\"zk1:2181,zk2:2181\"]\n"),
    // 20-29: one server.
    zookeeper_backend("    hosts: [zk1:2181, zk2:99999]\n"),
    zookeeper_backend("    hosts: [zk1:2181, \"zk2:\"]\n"),
    zookeeper_backend("    hosts: [zk1:two]\n"),
    zookeeper_backend("    hosts: [\"::1\"]\n"),
    zookeeper_backend("    hosts: [\"zk 1:2181\"]\n"),
    zookeeper_backend("    hosts: [1.2.3:2181]\n"),
    zookeeper_backend("    hosts: [zk://zk1:2181]\n"),
    zookeeper_backend("    hosts: [{host: zk1}]\n"),
    zookeeper_backend("    hosts: [\"\"]\n"),
    zookeeper_backend("    hosts:\n      - zk1:2181\n      - ${DLOCK_TEST_SURELY_UNSET}:2181\n"),
    // 30-37: session_timeout.
    ensemble("    session_timeout: 500ms\n"),
    ensemble("    session_timeout: 11m\n"),
    ensemble("    session_timeout: 0s\n"),
    ensemble("    session_timeout: 10\n"),
    ensemble("    session_timeout: 2s\n"),
    ensemble("    session_timeout: 4s\n    command_timeout: 2s\n"),
    ensemble("    command_timeout: 3s\n    session_timeout: 6s\n"),
    ensemble("    command_timeout: 5s\n"),
    // 38-51: root.
    ensemble("    root: dlock\n"),
    ensemble("    root: /\n"),
    ensemble("    root: /dlock/\n"),
    ensemble("    root: /a//b\n"),
    ensemble("    root: /a/./b\n"),
    ensemble("    root: /a/..\n"),
    ensemble("    root: /zookeeper\n"),
    ensemble("    root: /zookeeper/dlock\n"),
    ensemble("    root: \"/a\\x01b\"\n"),
    ensemble("    root: \"/a\\x7f\"\n"),
    ensemble("    root: \"/a\\u0085\"\n"),
    ensemble("    root: \"/a\\uE000\"\n"),
    ensemble("    root: \"/a\\uFFFE\"\n"),
    ensemble("    root: \"/a\xff\"\n"),
    // 52-54: root, continued.
    ensemble("    root: \"\"\n"),
    ensemble("    root: [/dlock]\n"),
    ensemble("    root: /" + std::string(512, 'r') + "\n"),
    // 55-57: services a znode name cannot be as they are; the backend writes them %XX
    // (AnyServiceLoadsWithAZookeeperBackend).
    "service: shop/eu\n" + ensemble(""),
    "service: ..\n" + ensemble(""),
    ensemble("") + "service: .\n",
    // 58-60: more servers and roots.
    zookeeper_backend("    hosts: [zk1:2181, \":2181\"]\n"),
    zookeeper_backend("    hosts: [\"[zz]:2181\"]\n"),
    ensemble("    root: \"//\"\n"),
};

const BadFile kBadZookeeperFiles[] = {
    // Keys.
    {"WithoutHostsIsRefused", kRows[0].c_str(), "3:5",
     "backends.zk: missing required key 'hosts' for a zookeeper backend"},
    {"PoolSizeIsRefused", kRows[1].c_str(), "5:5",
     "backends.zk.pool_size: does not apply to a zookeeper backend: it holds one ZooKeeper "
     "session, not a pool of connections"},
    {"RedisPasswordIsRefused", kRows[2].c_str(), "5:5",
     "backends.zk.password: does not apply to a zookeeper backend: it takes no credentials or "
     "TLS settings; the servers go in 'hosts'"},
    {"RedisUsernameIsRefused", kRows[3].c_str(), "5:5",
     "backends.zk.username: does not apply to a zookeeper backend: it takes no credentials or "
     "TLS settings; the servers go in 'hosts'"},
    {"RedisTlsBlockIsRefused", kRows[4].c_str(), "5:5",
     "backends.zk.tls: does not apply to a zookeeper backend: it takes no credentials or TLS "
     "settings; the servers go in 'hosts'"},
    {"RedisDatabaseIsRefused", kRows[5].c_str(), "5:5",
     "backends.zk.database: does not apply to a zookeeper backend: ZooKeeper has no databases; "
     "give the backend a 'root' of its own instead"},
    {"RedisAddressIsRefused", kRows[6].c_str(), "4:5",
     "backends.zk.address: does not apply to a zookeeper backend: the ensemble's servers go in "
     "'hosts'"},
    {"RedisNodesAreRefused", kRows[7].c_str(), "4:5",
     "backends.zk.nodes: does not apply to a zookeeper backend: the ensemble's servers go in "
     "'hosts'"},
    {"DsnIsRefusedAsAPostgresSetting", kRows[8].c_str(), "5:5",
     "backends.zk.dsn: does not apply to a zookeeper backend (it is a postgres setting)"},
    {"SentinelKeyIsRefusedAsOne", kRows[9].c_str(), "5:5",
     "backends.zk.master_name: does not apply to a zookeeper backend (it is a sentinel setting)"},
    {"HostsOnASingleBackendIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n    hosts: [h]\n", "5:5",
     "backends.default.hosts: does not apply to a single backend (it is a zookeeper setting); "
     "a single backend's server goes in 'address'"},
    {"RootOnAPostgresBackendIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    root: /dlock\n", "5:5",
     "backends.default.root: does not apply to a postgres backend (it is a zookeeper and etcd "
     "setting)"},
    {"SessionTimeoutOnAMemoryBackendIsRefused",
     "backends:\n  default: {topology: memory, session_timeout: 10s}\n", "2:31",
     "backends.default.session_timeout: does not apply to a memory backend"},
    {"SessionTimeoutInLockSettingsPointsToBackends", "defaults:\n  session_timeout: 10s\n", "2:3",
     "defaults.session_timeout: unknown key 'session_timeout' (backend settings go under "
     "'backends')"},
    {"MisspelledHostsSuggestsHosts",
     "backends:\n  zk:\n    topology: zookeeper\n    host: [a]\ndefaults: {backend: zk}\n", "4:5",
     "backends.zk.host: unknown key 'host'; did you mean 'hosts'?"},
    {"UnknownTopologyListsZookeeperAmongValidOnes", "backends:\n  default:\n    topology: consul\n",
     "3:15",
     "backends.default.topology: unknown topology 'consul' (expected one of: single, sentinel, "
     "cluster, redlock, memory, postgres, zookeeper, etcd)"},
    {"MissingTopologyListsZookeeper", "backends:\n  default:\n    hosts: [zk1]\n", "3:5",
     "backends.default: missing required key 'topology' (one of: single, sentinel, cluster, "
     "redlock, memory, postgres, zookeeper, etcd)"},
    {"MisspelledTopologySuggestsZookeeper", "backends:\n  default:\n    topology: zookeper\n",
     "3:15", "backends.default.topology: unknown topology 'zookeper'; did you mean 'zookeeper'?"},

    // hosts as a whole.
    {"CommaSeparatedHostsStringIsRefusedWithAList", kRows[10].c_str(), "4:12",
     "backends.zk.hosts: expected a list, got one comma-separated string; write the servers as "
     "a YAML list (hosts: [127.0.0.1:2181, 127.0.0.1:2182])"},
    {"ConnectionStringWithChrootIsRefusedWithListAndRoot", kRows[11].c_str(), "4:12",
     "backends.zk.hosts: expected a list, got one comma-separated string; write the servers as "
     "a YAML list (hosts: [zk1:2181, zk2:2181, zk3:2181]), and the chroot in 'root' (root: "
     "/app)"},
    {"SingleHostNotInAListIsRefused", kRows[12].c_str(), "4:12",
     "backends.zk.hosts: expected a list of servers like [host:port, ...], got a single value"},
    {"HostsAsMapIsRefused", kRows[13].c_str(), "4:12",
     "backends.zk.hosts: expected a list of servers like [host:port, ...], got a map"},
    {"MissingHostsValueIsRefused", kRows[14].c_str(), "4:5",
     "backends.zk.hosts: missing value; expected a list of servers like [host:port, ...]"},
    {"EmptyHostsListIsRefused", kRows[15].c_str(), "4:12",
     "backends.zk.hosts: the list is empty; give at least one server"},
    {"ServerListedTwiceIsRefusedWithTheDefaultPort", kRows[16].c_str(), "4:45",
     "backends.zk.hosts[2]: server 127.0.0.1:2181 is listed twice (first at 4:13)"},
    {"Ipv6ServerInTwoSpellingsIsListedTwice", kRows[17].c_str(), "4:27",
     "backends.zk.hosts[1]: server [0::1]:2181 is listed twice (first at 4:13)"},
    {"ChrootAfterAServerIsRefusedForRoot", kRows[18].c_str(), "4:23",
     "backends.zk.hosts[1]: '/app' after the server is a chroot, which hosts do not take; set "
     "root: /app instead (the znodes live under <root>/<service>/)"},
    {"SeveralServersInOneEntryAreRefused", kRows[19].c_str(), "4:13",
     "backends.zk.hosts[0]: 'zk1:2181,zk2:2181' holds several servers; give each its own entry "
     "of the list"},

    // One server.
    {"PortOutOfRangeIsRefused", kRows[20].c_str(), "4:23",
     "backends.zk.hosts[1]: bad address 'zk2:99999': the port must be between 1 and 65535"},
    {"MissingPortAfterColonIsRefused", kRows[21].c_str(), "4:23",
     "backends.zk.hosts[1]: bad address 'zk2:': missing port after ':'"},
    {"PortNotANumberIsRefused", kRows[22].c_str(), "4:13",
     "backends.zk.hosts[0]: bad address 'zk1:two': the port must be a number"},
    {"Ipv6WithoutBracketsIsRefused", kRows[23].c_str(), "4:13",
     "backends.zk.hosts[0]: bad address '::1': put an IPv6 address in brackets, e.g. "
     "\"[::1]:2181\""},
    {"HostWithASpaceIsRefused", kRows[24].c_str(), "4:13",
     "backends.zk.hosts[0]: bad address 'zk 1:2181': expected host:port, host or "
     "[ipv6]:port; a host is a DNS name or an IPv4 address"},
    {"IncompleteIpv4IsRefused", kRows[25].c_str(), "4:13",
     "backends.zk.hosts[0]: bad address '1.2.3:2181': expected host:port, host or [ipv6]:port"},
    {"ServerWithASchemeIsRefused", kRows[26].c_str(), "4:13",
     "backends.zk.hosts[0]: bad address 'zk://zk1:2181': a ZooKeeper server is host:port, with "
     "no scheme"},
    {"ServerWithoutHostIsRefused", kRows[58].c_str(), "4:23",
     "backends.zk.hosts[1]: bad address ':2181': missing host"},
    {"BadIpv6InBracketsIsRefused", kRows[59].c_str(), "4:13",
     "backends.zk.hosts[0]: bad address '[zz]:2181': expected [ipv6] or [ipv6]:port with a "
     "valid IPv6 address"},
    {"ServerAsMapIsRefused", kRows[27].c_str(), "4:13",
     "backends.zk.hosts[0]: expected a server like host:port, got a map"},
    {"EmptyServerIsRefused", kRows[28].c_str(), "4:13",
     "backends.zk.hosts[0]: the address is empty"},
    {"UnsetVariableInAServerIsRefused", kRows[29].c_str(), "6:9",
     "backends.zk.hosts[1]: environment variable 'DLOCK_TEST_SURELY_UNSET' is not set"},

    // session_timeout.
    {"SessionTimeoutBelowOneSecondIsRefused", kRows[30].c_str(), "5:22",
     "backends.zk.session_timeout: must be between 1s and 10m, got 500ms (a shorter session "
     "expires on any pause of the client or the network)"},
    {"SessionTimeoutAboveTenMinutesIsRefused", kRows[31].c_str(), "5:22",
     "backends.zk.session_timeout: must be between 1s and 10m, got 11m (a holder that stopped "
     "talking to the ensemble would keep its locks that long)"},
    {"ZeroSessionTimeoutIsRefused", kRows[32].c_str(), "5:22",
     "backends.zk.session_timeout: must be between 1s and 10m, got 0s"},
    {"SessionTimeoutWithoutUnitIsRefused", kRows[33].c_str(), "5:22",
     "backends.zk.session_timeout: bad duration '10': missing unit (ms, s, m, h), e.g. 10s"},
    {"SessionTimeoutNotAboveTwiceTheDefaultCommandTimeoutIsRefused", kRows[34].c_str(), "5:22",
     "backends.zk.session_timeout: session_timeout 2s is not greater than twice "
     "command_timeout 1s (the default): a renewal must be able to time out and be retried "
     "before the session expires; raise session_timeout above 2s or lower command_timeout"},
    {"SessionTimeoutBeforeCommandTimeoutIsChecked", kRows[35].c_str(), "5:22",
     "backends.zk.session_timeout: session_timeout 4s is not greater than twice "
     "command_timeout 2s: a renewal must be able to time out and be retried before the session "
     "expires; raise session_timeout above 4s or lower command_timeout"},
    {"SessionTimeoutAfterCommandTimeoutIsChecked", kRows[36].c_str(), "6:22",
     "backends.zk.session_timeout: session_timeout 6s is not greater than twice "
     "command_timeout 3s: a renewal must be able to time out and be retried before the session "
     "expires; raise session_timeout above 6s or lower command_timeout"},
    {"CommandTimeoutAgainstTheDefaultSessionTimeoutIsRefused", kRows[37].c_str(), "5:22",
     "backends.zk.command_timeout: session_timeout 10s (the default) is not greater than twice "
     "command_timeout 5s: a renewal must be able to time out and be retried before the session "
     "expires; raise session_timeout above 10s or lower command_timeout"},

    // root.
    {"RelativeRootIsRefused", kRows[38].c_str(), "5:11",
     "backends.zk.root: 'dlock' is not an absolute znode path: it must start with '/' (/dlock)"},
    {"TopOfTheTreeAsRootIsRefused", kRows[39].c_str(), "5:11",
     "backends.zk.root: '/' is the top of ZooKeeper's tree; give dlock a path of its own like "
     "/dlock"},
    {"RootOfSlashesOnlyIsRefused", kRows[60].c_str(), "5:11",
     "backends.zk.root: '//' is the top of ZooKeeper's tree; give dlock a path of its own like "
     "/dlock"},
    {"RootWithTrailingSlashIsRefused", kRows[40].c_str(), "5:11",
     "backends.zk.root: '/dlock/' ends in '/'; write /dlock"},
    {"RootWithEmptyComponentIsRefused", kRows[41].c_str(), "5:11",
     "backends.zk.root: '/a//b' has an empty component ('//')"},
    {"RootWithDotComponentIsRefused", kRows[42].c_str(), "5:11",
     "backends.zk.root: '/a/./b' has a '.' component; ZooKeeper takes no relative paths"},
    {"RootWithDotDotComponentIsRefused", kRows[43].c_str(), "5:11",
     "backends.zk.root: '/a/..' has a '..' component; ZooKeeper takes no relative paths"},
    {"ZookeeperAsRootIsRefused", kRows[44].c_str(), "5:11",
     "backends.zk.root: '/zookeeper' is under /zookeeper, which ZooKeeper reserves for itself; "
     "use another root, like /dlock"},
    {"RootUnderZookeeperIsRefused", kRows[45].c_str(), "5:11",
     "backends.zk.root: '/zookeeper/dlock' is under /zookeeper, which ZooKeeper reserves for "
     "itself"},
    {"RootWithAControlCharacterIsRefused", kRows[46].c_str(), "5:11",
     "backends.zk.root: '/a\\x01b' holds U+0001, a character ZooKeeper refuses in a znode path"},
    {"RootWithDeleteIsRefused", kRows[47].c_str(), "5:11",
     "backends.zk.root: '/a\\x7f' holds U+007F, a character ZooKeeper refuses in a znode path"},
    {"RootWithAC1ControlIsRefused", kRows[48].c_str(), "5:11",
     "holds U+0085, a character ZooKeeper refuses in a znode path"},
    {"RootWithAPrivateUseCharacterIsRefused", kRows[49].c_str(), "5:11",
     "holds U+E000, a character ZooKeeper refuses in a znode path"},
    {"RootWithANonCharacterIsRefused", kRows[50].c_str(), "5:11",
     "holds U+FFFE, a character ZooKeeper refuses in a znode path"},
    {"RootNotInUtf8IsRefused", kRows[51].c_str(), "5:11",
     "backends.zk.root: is not valid UTF-8 (at byte 3)"},
    {"EmptyRootIsRefused", kRows[52].c_str(), "5:11",
     "backends.zk.root: must not be empty; write an absolute znode path like /dlock"},
    {"RootAsListIsRefused", kRows[53].c_str(), "5:11",
     "backends.zk.root: expected an absolute znode path like /dlock, got a list"},
    {"RootLongerThan512BytesIsRefused", kRows[54].c_str(), "5:11",
     "...(513 bytes)' is longer than 512 bytes"},
};

INSTANTIATE_TEST_SUITE_P(Zookeeper, MalformedFile, testing::ValuesIn(kBadZookeeperFiles), row_name);

// ---------------------------------------------------------------------------------------
// Well-formed backends.

class ZookeeperBackend : public testing::Test {
 protected:
  void TearDown() override { ::unsetenv("DLOCK_TEST_ZK_HOST"); }

  // The `zk` backend of a file that gives it these settings.
  static BackendConfig loaded(const std::string& settings) {
    return parse_config(zookeeper_backend(settings), kSource).backends.at("zk");
  }
};

TEST_F(ZookeeperBackend, TheDesignsExampleLoads) {
  const Config config = parse_config(R"(
backends:
  zk:
    topology: zookeeper
    hosts: [127.0.0.1:2181, 127.0.0.1:2182, 127.0.0.1:2183]
    session_timeout: 10s
    root: /dlock                   # znodes live under <root>/<service>/
defaults: {backend: zk}
)",
                                     kSource);
  const BackendConfig& zk = config.backends.at("zk");
  EXPECT_EQ(zk.name, "zk");
  EXPECT_EQ(zk.topology, Topology::kZookeeper);
  EXPECT_EQ(zk.endpoints,
            (std::vector<Endpoint>{{"127.0.0.1", 2181}, {"127.0.0.1", 2182}, {"127.0.0.1", 2183}}));
  EXPECT_EQ(zk.session_timeout, 10s);
  EXPECT_EQ(zk.root, "/dlock");
  EXPECT_TRUE(zk.dsn.empty());
  EXPECT_EQ(config.resolve("g", "", {}).backend, "zk");
}

TEST_F(ZookeeperBackend, ThePortIs2181TheSessionTimeout10sAndTheRootDlockUnlessGiven) {
  const BackendConfig zk = loaded("    hosts: [zk1, \"[::1]\", 10.0.0.5, zk2:2888]\n");
  EXPECT_EQ(zk.endpoints, (std::vector<Endpoint>{
                              {"zk1", 2181}, {"::1", 2181}, {"10.0.0.5", 2181}, {"zk2", 2888}}));
  EXPECT_EQ(zk.session_timeout, 10s);
  EXPECT_EQ(zk.root, "/dlock");
}

TEST_F(ZookeeperBackend, ReadsTheConnectionKeysItSharesWithTheOthers) {
  const BackendConfig zk = loaded(
      "    hosts: [zk1]\n    connect_timeout: 250ms\n    command_timeout: 2s\n"
      "    poll_interval: 50ms\n    session_timeout: 30s\n    root: /apps/shop/locks\n");
  EXPECT_EQ(zk.connect_timeout, 250ms);
  EXPECT_EQ(zk.command_timeout, 2s);
  EXPECT_EQ(zk.poll_interval, 50ms);
  EXPECT_EQ(zk.session_timeout, 30s);
  EXPECT_EQ(zk.root, "/apps/shop/locks");
}

TEST_F(ZookeeperBackend, SessionTimeoutsAtTheLimitsLoad) {
  EXPECT_EQ(loaded("    hosts: [zk1]\n    session_timeout: 1s\n    command_timeout: 499ms\n")
                .session_timeout,
            1s);
  EXPECT_EQ(loaded("    hosts: [zk1]\n    session_timeout: 10m\n").session_timeout, 10min);
  EXPECT_EQ(loaded("    hosts: [zk1]\n    session_timeout: 2001ms\n").session_timeout, 2001ms);
  EXPECT_EQ(loaded("    hosts: [zk1]\n    command_timeout: 4999ms\n").command_timeout, 4999ms);
}

TEST_F(ZookeeperBackend, RootsZookeeperAcceptsLoad) {
  const std::vector<std::string> roots = {"/a",          "/a/b/c",  "/dlock/zookeeper",
                                          "/zookeeper2", "/...",    "/.a",
                                          "/a:b-c_d",    "/сервис", "/" + std::string(511, 'r')};
  for (const std::string& root : roots) {
    EXPECT_EQ(loaded("    hosts: [zk1]\n    root: \"" + root + "\"\n").root, root);
  }
}

TEST_F(ZookeeperBackend, AServerMayComeFromTheEnvironment) {
  ::setenv("DLOCK_TEST_ZK_HOST", "zk.internal", 1);
  const BackendConfig zk = loaded(
      "    hosts:\n      - ${DLOCK_TEST_ZK_HOST}:2182\n"
      "      - ${DLOCK_TEST_ZK_HOST}\n");
  EXPECT_EQ(zk.endpoints, (std::vector<Endpoint>{{"zk.internal", 2182}, {"zk.internal", 2181}}));
  ::setenv("DLOCK_TEST_ZK_HOST", "a:2181,b:2181", 1);
  EXPECT_EQ(error_of(zookeeper_backend("    hosts: ${DLOCK_TEST_ZK_HOST}\n")),
            "test.yaml:4:12: error: backends.zk.hosts: expected a list, got one "
            "comma-separated string; write the servers as a YAML list (hosts: [a:2181, b:2181])");
}

TEST_F(ZookeeperBackend, AnyServiceLoadsWithAZookeeperBackend) {
  // The backend writes a service that is no znode name as it is ('/', '.', '..') with %XX.
  EXPECT_EQ(parse_config(kRows[55], kSource).service, "shop/eu");
  EXPECT_EQ(parse_config(kRows[56], kSource).service, "..");
  EXPECT_EQ(parse_config(kRows[57], kSource).service, ".");
  for (const std::string service : {"shop.eu", "...", ".shop", "a:b"}) {
    EXPECT_EQ(
        parse_config("service: \"" + service + "\"\n" + zookeeper_backend("    hosts: [zk1]\n"),
                     kSource)
            .service,
        service);
  }
}

TEST_F(ZookeeperBackend, EveryMistakeOfTheBackendIsReportedInOneError) {
  const auto lines = lines_of(error_of(
      zookeeper_backend("    hosts: [zk1, zk1]\n    session_timeout: 500ms\n    root: dlock\n")));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "test.yaml:4:18: error: backends.zk.hosts[1]: server zk1:2181 is listed twice "
            "(first at 4:13)");
  EXPECT_EQ(lines[1].rfind("test.yaml:5:22: error: backends.zk.session_timeout: must be", 0), 0u)
      << lines[1];
  EXPECT_EQ(lines[2].rfind("test.yaml:6:11: error: backends.zk.root: 'dlock' is not", 0), 0u)
      << lines[2];
}

TEST_F(ZookeeperBackend, ARedisKeyAndPoolSizeAreBothReported) {
  const auto lines = lines_of(
      error_of(zookeeper_backend("    hosts: [zk1]\n    pool_size: 2\n    password: x\n")));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("test.yaml:5:5: error: backends.zk.pool_size: does not apply", 0), 0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("test.yaml:6:5: error: backends.zk.password: does not apply", 0), 0u)
      << lines[1];
}

TEST_F(ZookeeperBackend, ALeaseNoLongerThanTheCommandTimeoutIsWarnedAbout) {
  const auto lines = warnings_of(zookeeper_backend("    hosts: [zk1]\n    command_timeout: 2s\n") +
                                 "policies:\n  p: {lease: 2s}\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("policies.p.lease: 2s is not longer than the command_timeout (2s) of "
                          "backend 'zk'"),
            std::string::npos)
      << lines[0];
}

TEST(ZookeeperSample, LoadsAsTheDesignDescribes) {
  const Config config = load_config(std::string(DLOCK_SAMPLES_DIR) + "/zookeeper.yaml");
  const BackendConfig& backend = config.backends.at("default");
  EXPECT_EQ(backend.topology, Topology::kZookeeper);
  EXPECT_EQ(backend.endpoints, (std::vector<Endpoint>{{"127.0.0.1", 2181},
                                                      {"127.0.0.1", 2182},
                                                      {"127.0.0.1", 2183}}));
  EXPECT_EQ(backend.session_timeout, 10s);
  EXPECT_EQ(backend.root, "/dlock");
}

}  // namespace
}  // namespace dlock
