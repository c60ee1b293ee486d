// The configuration loader: the YAML contract of docs/CONFIG.md, its error messages and the
// precedence of Config::resolve().
#include "config_test_helpers.hpp"
#include "dlock/config.hpp"
#include "dlock/log.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace dlock {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------
// Malformed files: each row is the text, where the error must point, and what it must say.
// config_postgres_test.cpp has the rows of postgres backends.

TEST_P(MalformedFile, IsRefusedWithFileLineColumnKeyAndNoSecret) {
  const BadFile& row = GetParam();
  const std::string message = error_of(row.yaml);
  EXPECT_EQ(message.rfind(std::string(kSource) + ":" + row.where + ": error: ", 0), 0u) << message;
  EXPECT_NE(message.find(row.message), std::string::npos) << message;
  EXPECT_EQ(message.find(kSecret), std::string::npos) << message;
}

const BadFile kBadFiles[] = {
    // Unknown keys, with a hint.
    {"UnknownTopLevelKeySuggestsCloseOne", "service: shop\nbackend: {}\n", "2:1",
     "backend: unknown key 'backend'; did you mean 'backends'?"},
    {"UnknownTopLevelKeyListsValidOnes", "colour: red\n", "1:1",
     "colour: unknown key 'colour' (expected one of: service, backends, defaults, policies, "
     "locks)"},
    {"LockSettingAtTopLevelPointsToDefaults", "lease: 30s\n", "1:1",
     "lease: unknown key 'lease' (lock settings go under 'defaults')"},
    {"UnknownBackendKeySuggestsCloseOne",
     "backends:\n  default:\n    topology: single\n    adress: 127.0.0.1:6379\n", "4:5",
     "backends.default.adress: unknown key 'adress'; did you mean 'address'?"},
    {"UnknownLockKeySuggestsCloseOne", "defaults:\n  leese: 30s\n", "2:3",
     "defaults.leese: unknown key 'leese'; did you mean 'lease'?"},
    {"UnknownPolicyKeySuggestsCloseOne", "policies:\n  reports: {on_bsuy: skip}\n", "2:13",
     "policies.reports.on_bsuy: unknown key 'on_bsuy'; did you mean 'on_busy'?"},
    {"BackendKeyInLockSettingsPointsToBackends", "defaults:\n  address: 127.0.0.1\n", "2:3",
     "defaults.address: unknown key 'address' (backend settings go under 'backends')"},
    {"LockKeyInBackendPointsToLockSections",
     "backends:\n  default: {topology: memory, lease: 5s}\n", "2:31",
     "backends.default.lease: unknown key 'lease' (lock settings go under 'defaults', "
     "'policies' or 'locks')"},
    {"MergeKeyIsNotSupported", "defaults: &d {lease: 5s}\npolicies:\n  p: {<<: *d}\n", "3:7",
     "policies.p.\"<<\": unknown key '<<'; YAML merge keys are not supported"},

    // Wrong types.
    {"TopLevelListIsRefused", "- service\n- shop\n", "1:1",
     "expected a map of settings at the top level, got a list"},
    {"ServiceAsMapIsRefused", "service: {name: shop}\n", "1:10",
     "service: expected a service name, got a map"},
    {"EmptyServiceIsRefused", "service: \"\"\n", "1:10", "service: must not be empty"},
    {"ServiceWithSpaceIsRefused", "service: my shop\n", "1:10",
     "service: 'my shop' may hold only letters, digits and . _ - : /"},
    {"BackendsAsListIsRefused", "backends: [default]\n", "1:11",
     "backends: expected a map of backends by name, got a list"},
    {"BackendAsUrlIsRefusedWithoutEchoingIt", "backends:\n  default: redis://:hunter2@127.0.0.1\n",
     "2:12", "backends.default: expected a map of backend settings, got a single value"},
    {"PoliciesAsScalarIsRefused", "policies: reports\n", "1:11",
     "policies: expected a map of lock settings by policy name, got a single value"},
    {"LocksEntryAsListIsRefused", "locks:\n  \"shop::f\": [lease, 5s]\n", "2:14",
     "locks.shop::f: expected a map of lock settings, got a list"},
    {"LeaseAsListIsRefused", "defaults:\n  lease: [30s]\n", "2:10",
     "defaults.lease: expected a duration like 30s, got a list"},
    {"MissingValueIsRefused", "defaults:\n  lease:\n  wait: 1s\n", "2:3",
     "defaults.lease: missing value; expected a duration like 30s"},
    {"KeyThatIsAListIsRefused", "? [a, b]\n: 1\n", "1:3", "expected a key name, got a list"},
    {"PasswordAsMapIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n    password: {v: hunter2}\n",
     "5:15", "backends.default.password: expected a password, got a map"},
    {"PoolSizeNotAnIntegerIsRefused",
     "backends:\n  default: {topology: single, address: h, pool_size: eight}\n", "2:54",
     "backends.default.pool_size: expected a whole number, got 'eight'"},
    {"PoolSizeFractionIsRefused",
     "backends:\n  default: {topology: single, address: h, pool_size: 8.5}\n", "2:54",
     "backends.default.pool_size: expected a whole number, got '8.5'"},
    {"PoolSizeZeroIsRefused",
     "backends:\n  default: {topology: single, address: h, pool_size: 0}\n", "2:54",
     "backends.default.pool_size: must be between 1 and 1024, got 0"},
    {"PoolSizeHugeIsRefused",
     "backends:\n  default: {topology: single, address: h, pool_size: 99999999999999999999}\n",
     "2:54", "backends.default.pool_size: must be between 1 and 1024"},
    {"SpinPastAMillisecondIsRefused",
     "backends:\n  default: {topology: single, address: h, spin_us: 1001}\n", "2:52",
     "backends.default.spin_us: must be between 0 and 1000, got 1001"},
    {"SpinOnRedlockIsRefused",
     "backends:\n  default: {topology: redlock, instances: [a, b, c], spin_us: 20}\n", "2:54",
     "backends.default.spin_us: does not apply to a redlock backend (it is a single, sentinel "
     "and cluster setting)"},
    {"SpinOnPostgresIsRefused",
     "backends:\n  default: {topology: postgres, dsn: host=h, spin_us: 20}\n", "2:46",
     "backends.default.spin_us: does not apply to a postgres backend (it is a single, sentinel "
     "and cluster setting)"},
    {"NegativeDatabaseIsRefused",
     "backends:\n  default: {topology: single, address: h, database: -1}\n", "2:53",
     "backends.default.database: must be 0 or more, got -1"},
    {"NegativeWaitReplicasIsRefused",
     "backends:\n  ha:\n    topology: sentinel\n    master_name: m\n    sentinels: [s:26379]\n"
     "    wait_replicas: -1\ndefaults: {backend: ha}\n",
     "6:20", "backends.ha.wait_replicas: must be 0 or more, got -1"},
    // Leases the watchdog could not renew (it renews every lease/3).
    {"LeaseTooShortToRenewIsRefused", "defaults: {lease: 2ms}\n", "1:19",
     "defaults.lease: must be at least 3ms: the watchdog renews a lease every lease/3"},
    {"LockLeaseTooShortToRenewIsRefused", "locks:\n  \"shop::f\": {lease: 1ms}\n", "2:22",
     "locks.shop::f.lease: must be at least 3ms"},
    // A user name alone would connect as the 'default' user.
    {"UsernameWithoutPasswordIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n    username: app\n", "5:5",
     "backends.default.username: a user name without a password would connect as the "
     "'default' user; set 'password' too"},
    {"UrlUsernameWithoutPasswordIsRefused",
     "backends:\n  default:\n    topology: single\n    address: redis://app@h\n", "4:14",
     "backends.default.address: a user name without a password would connect as the "
     "'default' user; set 'password' too"},
    {"SentinelUsernameWithoutPasswordIsRefused",
     "backends:\n  default:\n    topology: sentinel\n    master_name: m\n    sentinels: [s]\n"
     "    sentinel_username: watcher\n",
     "6:5",
     "backends.default.sentinel_username: a user name without a password would connect as the "
     "'default' user; set 'sentinel_password' too"},
    {"ClockDriftOutOfRangeIsRefused",
     "backends:\n  q: {topology: redlock, instances: [a:1], clock_drift_factor: 0.5}\n"
     "defaults: {backend: q}\n",
     "2:64", "backends.q.clock_drift_factor: must be at least 0 and less than 0.5, got 0.5"},
    {"ClockDriftNotANumberIsRefused",
     "backends:\n  q: {topology: redlock, instances: [a:1], clock_drift_factor: nan}\n"
     "defaults: {backend: q}\n",
     "2:64", "backends.q.clock_drift_factor: expected a number, got 'nan'"},
    {"OnBusyTypoSuggestsCloseOne", "defaults: {on_busy: thow}\n", "1:21",
     "defaults.on_busy: expected throw or skip, got 'thow'; did you mean 'throw'?"},

    // Durations.
    {"DurationWithoutUnitIsRefused", "defaults:\n  lease: 30\n", "2:10",
     "defaults.lease: bad duration '30': missing unit (ms, s, m, h), e.g. 30s"},
    {"DurationWithUnknownUnitIsRefused", "defaults:\n  lease: 30x\n", "2:10",
     "defaults.lease: bad duration '30x': unknown unit 'x'"},
    {"NegativeDurationIsRefused", "defaults:\n  wait: -1s\n", "2:9",
     "defaults.wait: bad duration '-1s': write a whole number and a unit"},
    {"FractionalDurationIsRefused", "policies:\n  p:\n    min_hold: 1.5s\n", "3:15",
     "policies.p.min_hold: bad duration '1.5s': use a whole number with a smaller unit"},
    {"DurationWithoutNumberIsRefused", "defaults:\n  lease: s\n", "2:10",
     "defaults.lease: bad duration 's': expected a whole number and a unit"},
    {"OverflowingDurationIsRefused", "defaults:\n  lease: 99999999999999999999h\n", "2:10",
     "defaults.lease: bad duration '99999999999999999999h': too large"},
    {"ZeroLeaseIsRefused", "defaults:\n  lease: 0s\n", "2:10",
     "defaults.lease: must be greater than 0"},
    {"ZeroTimeoutIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n    command_timeout: 0ms\n",
     "5:22", "backends.default.command_timeout: must be greater than 0"},
    {"MinHoldAboveMaxHoldIsRefused", "policies:\n  p: {min_hold: 10m, max_hold: 30s}\n", "2:17",
     "policies.p.min_hold: min_hold 10m exceeds max_hold 30s"},

    // Lock kinds: fair and permits are settings; the mode belongs to the code.
    {"NegativePermitsAreRefused", "defaults:\n  permits: -1\n", "2:12",
     "defaults.permits: must be between 0 and 1000000, got -1"},
    {"PermitsAboveTheMostIsRefused", "locks:\n  \"shop::f\": {permits: 1000001}\n", "2:24",
     "locks.shop::f.permits: must be between 0 and 1000000, got 1000001"},
    {"PermitsThatAreNoNumberAreRefused", "policies:\n  p: {permits: x}\n", "2:16",
     "policies.p.permits: expected a whole number, got 'x'"},
    {"FairThatIsNoBooleanIsRefused", "locks:\n  \"shop::f\": {fair: maybe}\n", "2:21",
     "locks.shop::f.fair: expected true or false, got 'maybe'"},
    {"ModeInTheFileIsRefused", "defaults:\n  mode: shared\n", "2:3",
     "defaults.mode: is set in the guard attribute or the runtime API only"},
    {"ModeInAPolicyIsRefused", "policies:\n  readers: {mode: shared}\n", "2:13",
     "policies.readers.mode: is set in the guard attribute or the runtime API only"},

    // Addresses.
    {"PortOutOfRangeIsRefused",
     "backends:\n  default:\n    topology: single\n    address: 127.0.0.1:70000\n", "4:14",
     "backends.default.address: bad address '127.0.0.1:70000': the port must be between 1 and "
     "65535"},
    {"PortZeroIsRefused", "backends:\n  default: {topology: single, address: \"h:0\"}\n", "2:40",
     "bad address 'h:0': the port must be between 1 and 65535"},
    {"NonNumericPortIsRefused", "backends:\n  default: {topology: single, address: \"h:http\"}\n",
     "2:40", "bad address 'h:http': the port must be a number"},
    {"EmptyHostIsRefused", "backends:\n  default: {topology: single, address: \"redis://:6379\"}\n",
     "2:40", "bad address 'redis://:6379': missing host"},
    {"UnknownSchemeIsRefused",
     "backends:\n  default: {topology: single, address: \"http://h:6379\"}\n", "2:40",
     "bad address 'http://h:6379': unknown scheme 'http://'; use redis:// or rediss://"},
    {"UnbracketedIpv6IsRefused",
     "backends:\n  default: {topology: single, address: \"::1:6379\"}\n", "2:40",
     "bad address '::1:6379': put an IPv6 address in brackets"},
    {"UnencodedSlashInPasswordIsExplained",
     "backends:\n  default: {topology: single, address: \"redis://:hunter2/x@h\"}\n", "2:40",
     "bad address 'redis://:***@h': write a '/' in a user name or password as %2F"},
    {"GarbageAddressIsRefused",
     "backends:\n  default: {topology: single, address: \"not an address\"}\n", "2:40",
     "backends.default.address: bad address 'not an address': expected redis://"},
    {"BadAddressHidesItsPassword",
     "backends:\n  default:\n    topology: single\n"
     "    address: redis://app:hunter2@127.0.0.1:99999\n",
     "4:14", "bad address 'redis://app:***@127.0.0.1:99999': the port must be between"},
    {"PasswordGivenTwiceIsRefused",
     "backends:\n  default:\n    topology: single\n"
     "    address: redis://:hunter2@127.0.0.1\n    password: hunter2\n",
     "5:15", "backends.default.password: password given twice, in 'address' and in 'password'"},
    {"DatabaseGivenTwiceIsRefused",
     "backends:\n  default:\n    topology: single\n    database: 2\n"
     "    address: redis://127.0.0.1/3\n",
     "5:14", "backends.default.address: database given twice, in 'address' and in 'database'"},
    {"CredentialsInListEntryAreRefused",
     "backends:\n  default:\n    topology: cluster\n"
     "    nodes: [a:7000, \"redis://:hunter2@b:7001\"]\n",
     "4:21", "backends.default.nodes[1]: credentials are not allowed in a list entry"},
    {"ClusterDatabaseOtherThanZeroIsRefused",
     "backends:\n  default: {topology: cluster, nodes: [a:7000], database: 1}\n", "2:59",
     "backends.default.database: Redis Cluster has only database 0"},

    // Topologies.
    {"UnknownTopologySuggestsCloseOne", "backends:\n  default:\n    topology: sentinal\n", "3:15",
     "backends.default.topology: unknown topology 'sentinal'; did you mean 'sentinel'?"},
    {"UnknownTopologyListsValidOnes", "backends:\n  default:\n    topology: consul\n", "3:15",
     "unknown topology 'consul' (expected one of: single, sentinel, cluster, redlock, "
     "memory, postgres, zookeeper, etcd)"},
    {"MissingTopologyIsRefused", "backends:\n  default:\n    address: 127.0.0.1\n", "3:5",
     "backends.default: missing required key 'topology'"},
    {"EmptyBackendIsRefused", "backends:\n  default:\n", "2:3",
     "backends.default: missing required key 'topology'"},
    {"SingleWithoutAddressIsRefused", "backends:\n  default:\n    topology: single\n", "3:5",
     "backends.default: missing required key 'address' for a single backend"},
    {"SentinelWithoutSentinelsIsRefused",
     "backends:\n  default:\n    topology: sentinel\n    master_name: m\n", "3:5",
     "backends.default: missing required key 'sentinels' for a sentinel backend"},
    {"SentinelWithoutMasterNameIsRefused",
     "backends:\n  default:\n    topology: sentinel\n    sentinels: [a:26379]\n", "3:5",
     "backends.default: missing required key 'master_name' for a sentinel backend"},
    {"ClusterWithoutNodesIsRefused", "backends:\n  default: {topology: cluster}\n", "2:12",
     "backends.default: missing required key 'nodes' for a cluster backend"},
    {"RedlockWithoutInstancesIsRefused", "backends:\n  default: {topology: redlock}\n", "2:12",
     "backends.default: missing required key 'instances' for a redlock backend"},
    {"EmptyInstanceListIsRefused", "backends:\n  default: {topology: redlock, instances: []}\n",
     "2:43", "backends.default.instances: the list is empty"},
    {"KeyOfAnotherTopologyIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n    sentinels: [a:1]\n", "5:5",
     "backends.default.sentinels: does not apply to a single backend (it is a sentinel "
     "setting); a single backend's server goes in 'address'"},
    {"MemoryBackendTakesNoAddress",
     "backends:\n  default:\n    topology: memory\n    address: 127.0.0.1\n", "4:5",
     "backends.default.address: does not apply to a memory backend"},
    {"DuplicateRedlockInstanceIsRefused",
     "backends:\n  default:\n    topology: redlock\n    instances:\n      - a:6380\n"
     "      - b:6381\n      - a:6380\n",
     "7:9", "backends.default.instances[2]: instance a:6380 is listed twice (first at 5:9)"},
    {"DuplicateRedlockInstanceInTwoSpellingsIsRefused",
     "backends:\n  default:\n    topology: redlock\n    instances:\n"
     "      - redis://127.0.0.1:6380\n      - 127.0.0.1:6381\n      - 127.0.0.1:6380\n",
     "7:9",
     "backends.default.instances[2]: instance 127.0.0.1:6380 is listed twice (first at 5:9)"},

    // Backend references.
    {"PolicyNamingMissingBackendIsRefused",
     "backends:\n  default: {topology: memory}\n  ha: {topology: memory}\n"
     "policies:\n  reports: {backend: hq}\n",
     "5:22",
     "policies.reports.backend: backend 'hq' is not configured; did you mean 'ha'? "
     "(configured: default, ha)"},
    {"DefaultsNamingMissingBackendIsRefused", "defaults:\n  backend: replica\n", "2:12",
     "defaults.backend: backend 'replica' is not configured (configured: default)"},
    {"LockNamingMissingBackendIsRefused", "locks:\n  \"shop::f\": {backend: other}\n", "2:24",
     "locks.shop::f.backend: backend 'other' is not configured"},
    {"BackendsWithoutDefaultNeedDefaultsBackend", "backends:\n  ha: {topology: memory}\n", "1:1",
     "backends: no backend named 'default'; add one or set defaults.backend"},

    // The environment.
    {"UnsetVariableIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n"
     "    password: ${DLOCK_TEST_SURELY_UNSET}\n",
     "5:15",
     "backends.default.password: environment variable 'DLOCK_TEST_SURELY_UNSET' is not set"},
    {"UnterminatedVariableIsRefusedWithoutEchoingText",
     "backends:\n  default:\n    topology: single\n    address: h\n    password: hunter2${X\n",
     "5:15", "backends.default.password: '${' must start a reference like ${NAME}"},

    // YAML itself.
    {"SyntaxErrorIsRefusedWithPosition", "defaults: {lease: 30s\nlocks: {}\n", "2:6",
     "invalid YAML: end of map flow not found"},
    {"TabIndentationIsRefused", "defaults:\n\tlease: 30s\n", "2:7", "invalid YAML"},
    {"DuplicateTopLevelKeyIsRefused", "service: a\nservice: b\n", "2:1",
     "service: duplicate key; first given at 1:1"},
    {"DuplicateKeyInFlowMapIsRefused", "defaults: {lease: 1s, lease: 2s}\n", "1:23",
     "defaults.lease: duplicate key; first given at 1:12"},
    {"DuplicateBackendNameIsRefused",
     "backends:\n  default: {topology: memory}\n  default: {topology: memory}\n", "3:3",
     "backends.default: duplicate key; first given at 2:3"},
    {"SecondDocumentIsRefused", "service: a\n---\nservice: b\n", "2:1",
     "found a second YAML document"},
    // yaml-cpp 0.7 alone would loop until memory runs out, or read these as empty files.
    {"LoneCommaIsRefused", ",\n", "1:1", "invalid YAML: unexpected ','"},
    {"CommaAfterCommentIsRefused", "# settings\n, service: x\n", "2:1",
     "invalid YAML: unexpected ','"},
    {"CommaAfterFlowListIsRefused", "[a], b\n", "1:4", "invalid YAML: unexpected ','"},
};

INSTANTIATE_TEST_SUITE_P(Config, MalformedFile, testing::ValuesIn(kBadFiles), row_name);

TEST(ParseConfig, DeepNestingIsRefusedNotACrash) {
  const std::string deep = "defaults: " + std::string(100000, '[') + "\n";
  EXPECT_NE(error_of(deep).find(": error: invalid YAML: nested too deeply"), std::string::npos)
      << error_of(deep);
}

// ---------------------------------------------------------------------------------------
// Well-formed files.

TEST(ParseConfig, EmptyFileGivesTheBuiltInConfiguration) {
  for (const char* text : {"", "# only a comment\n", "---\n"}) {
    const Config config = parse_config(text, "empty.yaml");
    EXPECT_EQ(config.service, "default");
    EXPECT_EQ(config.source, "empty.yaml");
    ASSERT_EQ(config.backends.size(), 1u);
    const BackendConfig& backend = config.backends.at("default");
    EXPECT_EQ(backend.topology, Topology::kSingle);
    ASSERT_EQ(backend.endpoints.size(), 1u);
    EXPECT_EQ(backend.endpoints[0], (Endpoint{"127.0.0.1", 6379}));
  }
}

TEST(ParseConfig, BuiltInHasOneSingleBackendOnLocalhost) {
  const Config config = Config::builtin();
  EXPECT_EQ(config.service, "default");
  EXPECT_EQ(config.source, "<built-in>");
  ASSERT_EQ(config.backends.count("default"), 1u);
  EXPECT_EQ(config.backends.at("default").name, "default");
  EXPECT_EQ(config.backends.at("default").endpoints, (std::vector<Endpoint>{{"127.0.0.1", 6379}}));
  EXPECT_TRUE(config.policies.empty());
  EXPECT_TRUE(config.locks.empty());
}

TEST(ParseConfig, EmptySectionsReadAsAbsent) {
  const Config config = parse_config("backends:\ndefaults:\npolicies:\nlocks:\n", kSource);
  EXPECT_EQ(config.backends.count("default"), 1u);
  EXPECT_FALSE(config.defaults.lease);
  EXPECT_TRUE(config.policies.empty());
}

TEST(ParseConfig, ReadsEveryBackendSetting) {
  const Config config = parse_config(R"(
service: shop
backends:
  default:
    topology: single
    address: redis://127.0.0.1:6390/2
    username: app
    password: pw
    connect_timeout: 250ms
    command_timeout: 2s
    poll_interval: 50ms
    pool_size: 16
    spin_us: 0
  ha:
    topology: sentinel
    master_name: mymaster
    sentinels: ["[::1]:26379", sentinel.local]
    wait_replicas: 2
    sentinel_username: sentry
    sentinel_password: spw
)",
                                     kSource);
  EXPECT_EQ(config.service, "shop");
  const BackendConfig& single = config.backends.at("default");
  EXPECT_EQ(single.name, "default");
  EXPECT_EQ(single.endpoints, (std::vector<Endpoint>{{"127.0.0.1", 6390}}));
  EXPECT_EQ(single.database, 2);
  EXPECT_EQ(single.username, "app");
  EXPECT_EQ(single.password, "pw");
  EXPECT_EQ(single.connect_timeout, 250ms);
  EXPECT_EQ(single.command_timeout, 2s);
  EXPECT_EQ(single.poll_interval, 50ms);
  EXPECT_EQ(single.pool_size, 16);
  EXPECT_EQ(single.spin, 0us);

  const BackendConfig& ha = config.backends.at("ha");
  EXPECT_EQ(ha.topology, Topology::kSentinel);
  EXPECT_EQ(ha.master_name, "mymaster");
  EXPECT_EQ(ha.endpoints, (std::vector<Endpoint>{{"::1", 26379}, {"sentinel.local", 6379}}));
  EXPECT_EQ(ha.wait_replicas, 2);
  EXPECT_EQ(ha.sentinel_username, "sentry");
  EXPECT_EQ(ha.sentinel_password, "spw");
  EXPECT_EQ(ha.connect_timeout, 1000ms);  // untouched defaults
  EXPECT_EQ(ha.pool_size, 0);  // not set: the pool picks kSharedPoolSize
  EXPECT_EQ(ha.spin, kDefaultSpin);
}

TEST(ParseConfig, UrlCredentialsAndDatabaseFillTheBackend) {
  const Config config = parse_config(
      "backends:\n  default:\n    topology: single\n    address: redis://bob:s%40cret@h:7000/5\n",
      kSource);
  const BackendConfig& backend = config.backends.at("default");
  EXPECT_EQ(backend.username, "bob");
  EXPECT_EQ(backend.password, "s@cret");
  EXPECT_EQ(backend.database, 5);
  EXPECT_EQ(backend.endpoints, (std::vector<Endpoint>{{"h", 7000}}));
}

TEST(ParseConfig, UrlUserAndExplicitPasswordCombine) {
  const Config config = parse_config(
      "backends:\n  default:\n    topology: single\n    address: redis://bob@h\n"
      "    password: pw\n",
      kSource);
  EXPECT_EQ(config.backends.at("default").username, "bob");
  EXPECT_EQ(config.backends.at("default").password, "pw");
}

TEST(ParseConfig, RedlockAndClusterListsKeepTheirOrder) {
  const Config config = parse_config(R"(
backends:
  default:
    topology: redlock
    instances: [redis://a:6380, b:6381, "[::1]:6382"]
    clock_drift_factor: 0.02
  shards:
    topology: cluster
    nodes: [n1:7000, n2:7001]
)",
                                     kSource);
  const BackendConfig& quorum = config.backends.at("default");
  EXPECT_EQ(quorum.topology, Topology::kRedlock);
  EXPECT_EQ(quorum.endpoints, (std::vector<Endpoint>{{"a", 6380}, {"b", 6381}, {"::1", 6382}}));
  EXPECT_DOUBLE_EQ(quorum.clock_drift_factor, 0.02);
  EXPECT_EQ(config.backends.at("shards").topology, Topology::kCluster);
  EXPECT_EQ(config.backends.at("shards").endpoints.size(), 2u);
}

TEST(ParseConfig, SameHostOnDifferentPortsIsNotADuplicate) {
  EXPECT_NO_THROW((void)parse_config(
      "backends:\n  default: {topology: redlock, instances: [h:6380, h:6381, h:6382]}\n", kSource));
}

TEST(ParseConfig, DuplicateInstanceIgnoresHostCaseAndIpv6Spelling) {
  EXPECT_NE(error_of("backends:\n  default: {topology: redlock, instances: [Redis1:1, redis1:1]}\n")
                .find("is listed twice"),
            std::string::npos);
  EXPECT_NE(error_of("backends:\n  default: {topology: redlock, instances: "
                     "[\"[::1]:1\", \"[0:0::1]:1\"]}\n")
                .find("is listed twice"),
            std::string::npos);
}

TEST(ParseConfig, DefaultsBackendStandsInForMissingDefaultBackend) {
  const Config config =
      parse_config("backends:\n  ha: {topology: memory}\ndefaults: {backend: ha}\n", kSource);
  EXPECT_EQ(config.backends.count("default"), 0u);
  EXPECT_EQ(config.resolve("g", "", {}).backend, "ha");
}

TEST(ParseConfig, LockSettingsAtEveryLevel) {
  const Config config = parse_config(R"(
defaults: {lease: 20s, wait: 5s, on_busy: throw}
policies:
  reports: {on_busy: skip, min_hold: 30s, max_hold: 10m}
locks:
  "shop::place_order": {lease: 45s, wait: 0s}
)",
                                     kSource);
  EXPECT_EQ(config.defaults.lease, 20s);
  EXPECT_EQ(config.defaults.wait, 5s);
  EXPECT_EQ(config.defaults.on_busy, OnBusy::kThrow);
  const LockOverrides& reports = config.policies.at("reports");
  EXPECT_EQ(reports.on_busy, OnBusy::kSkip);
  EXPECT_EQ(reports.min_hold, 30s);
  EXPECT_EQ(reports.max_hold, 10min);
  EXPECT_FALSE(reports.lease);
  EXPECT_EQ(config.locks.at("shop::place_order").lease, 45s);
  EXPECT_EQ(config.locks.at("shop::place_order").wait, 0s);
}

TEST(ParseConfig, FairAndPermitsAtEveryLevelResolveIntoLockSettings) {
  const Config config = parse_config(R"(
backends:
  default: {topology: memory}
defaults: {fair: true}
policies:
  pool: {permits: 3}
  unfair: {fair: false}
locks:
  "shop::stock": {permits: 5}
)",
                                     kSource);
  EXPECT_EQ(config.defaults.fair, true);
  EXPECT_FALSE(config.defaults.permits);
  EXPECT_EQ(config.policies.at("pool").permits, 3);
  EXPECT_FALSE(config.policies.at("pool").fair) << "not set in the policy";
  EXPECT_EQ(config.policies.at("unfair").fair, false);

  const LockSettings plain = config.resolve("g", "", {});
  EXPECT_TRUE(plain.fair);
  EXPECT_EQ(plain.permits, 0);
  EXPECT_EQ(plain.mode, LockMode::kExclusive);
  const LockSettings pool = config.resolve("g", "pool", {});
  EXPECT_EQ(pool.permits, 3);
  EXPECT_TRUE(pool.fair);
  EXPECT_FALSE(config.resolve("g", "unfair", {}).fair);
  EXPECT_EQ(config.resolve("shop::stock", "pool", {}).permits, 5) << "locks beats the policy";
  LockOverrides shared;
  shared.mode = LockMode::kShared;
  EXPECT_EQ(config.resolve("g", "", shared).mode, LockMode::kShared);
}

// ---------------------------------------------------------------------------------------
// Several mistakes in one file: each independent one is reported, a line each, in document
// order, so that fixing a file does not take one run per mistake.

TEST(SeveralMistakes, EveryIndependentMistakeIsReportedInOneErrorInDocumentOrder) {
  const auto lines = lines_of(error_of(R"(service: "bad name!"
backends:
  default:
    topology: single
    adress: redis://127.0.0.1:6379
  ha:
    topology: sentinal
defaults:
  lease: 30
  wiat: 1s
policies:
  reports:
    backend: hq
)"));
  const std::vector<std::string> expected = {
      "test.yaml:1:10: error: service: 'bad name!' may hold only letters",
      "test.yaml:5:5: error: backends.default.adress: unknown key 'adress'; did you mean",
      "test.yaml:7:15: error: backends.ha.topology: unknown topology 'sentinal'",
      "test.yaml:9:10: error: defaults.lease: bad duration '30'",
      "test.yaml:10:3: error: defaults.wiat: unknown key 'wiat'; did you mean 'wait'?",
      "test.yaml:13:14: error: policies.reports.backend: backend 'hq' is not configured",
  };
  ASSERT_EQ(lines.size(), expected.size()) << testing::PrintToString(lines);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(lines[i].rfind(expected[i], 0), 0u) << "line " << i << ": " << lines[i];
  }
}

TEST(SeveralMistakes, ASectionOfTheWrongShapeIsReportedBesideTheOthers) {
  const auto lines =
      lines_of(error_of("service: \"bad name!\"\nbackends: [a, b]\ndefaults: {wiat: 1s}\n"));
  ASSERT_EQ(lines.size(), 3u) << testing::PrintToString(lines);
  EXPECT_EQ(lines[0].rfind("test.yaml:1:10: error: service:", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("test.yaml:2:11: error: backends:", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("test.yaml:3:12: error: defaults.wiat:", 0), 0u) << lines[2];
}

TEST(SeveralMistakes, ErrorsComeInDocumentOrderAcrossSections) {
  const auto lines =
      lines_of(error_of("locks:\n  \"a::f\": {wiat: 1s}\nservice: \"bad name!\"\nbackends:\n"
                        "  default: {topology: single, adress: h}\ntypo: 1\n"));
  ASSERT_EQ(lines.size(), 4u) << testing::PrintToString(lines);
  EXPECT_EQ(lines[0].rfind("test.yaml:2:12: error: locks.", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("test.yaml:3:10: error: service:", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("test.yaml:5:31: error: backends.default.adress:", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("test.yaml:6:1: error: typo:", 0), 0u) << lines[3];
}

// A refused `defaults` may name the default backend: "no backend named 'default'" would be
// made up.
TEST(SeveralMistakes, ARefusedDefaultsBlockIsNotTakenAsNamingNoBackend) {
  for (const char* defaults :
       {"defaults: {backend: main, min_hold: 10s, max_hold: 5s}\n",
        "defaults: {backend: main, wait: 1s, wait: 2s}\n", "defaults: {backend: mian}\n"}) {
    const std::string error =
        error_of(std::string("backends: {main: {topology: memory}}\n") + defaults);
    EXPECT_EQ(lines_of(error).size(), 1u) << error;
    EXPECT_EQ(error.find("no backend named 'default'"), std::string::npos) << error;
  }
}

// A backends section refused as a whole leaves its names unknown: references to them are
// not all reported as not configured.
TEST(SeveralMistakes, ABackendsSectionRefusedAsAWholeMakesNoReferenceAnError) {
  for (const char* backends :
       {"backends:\n  main: {topology: memory}\n  main: {topology: memory}\n", "backends: [a]\n"}) {
    const std::string error = error_of(
        std::string(backends) + "defaults: {backend: main}\npolicies: {p: {backend: main}}\n");
    EXPECT_EQ(lines_of(error).size(), 1u) << error;
    EXPECT_EQ(error.find("not configured"), std::string::npos) << error;
  }
  const std::string empty_name = error_of(
      "backends: {main: {topology: memory}, \"\": {topology: memory}}\ndefaults: {backend: "
      "main}\n");
  EXPECT_EQ(lines_of(empty_name).size(), 1u) << empty_name;
  EXPECT_NE(empty_name.find("a backend name must not be empty"), std::string::npos) << empty_name;
}

TEST(SeveralMistakes, AMissingRequiredKeyIsReportedBesideARefusedValue) {
  const auto lines =
      lines_of(error_of("backends:\n  default:\n    topology: sentinel\n    sentinels: []\n"));
  ASSERT_EQ(lines.size(), 2u) << testing::PrintToString(lines);
  EXPECT_NE(lines[0].find("missing required key 'master_name'"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("backends.default.sentinels"), std::string::npos) << lines[1];
}

TEST(SeveralMistakes, AValueRefusedInABlockSkipsTheChecksAcrossItsKeys) {
  // min_hold is refused: comparing it with max_hold would report a second, made-up error.
  const std::string error = error_of("defaults:\n  min_hold: soon\n  max_hold: 1s\n");
  EXPECT_EQ(lines_of(error).size(), 1u) << error;
  EXPECT_NE(error.find("defaults.min_hold: bad duration 'soon'"), std::string::npos) << error;
  // A backend whose keys are wrong has its values left unread: the typo comes alone.
  const std::string backend = error_of(
      "backends:\n  default:\n    topology: single\n    adress: h\n    pool_size: -2\n");
  EXPECT_EQ(lines_of(backend).size(), 1u) << backend;
}

TEST(SeveralMistakes, AReferenceToARefusedBackendRaisesNoErrorOfItsOwn) {
  const std::string error = error_of(
      "backends:\n  default: {topology: single, address: h}\n  ha: {topology: zookeper}\n"
      "policies:\n  reports: {backend: ha}\n");
  EXPECT_EQ(lines_of(error).size(), 1u) << error;
  EXPECT_NE(error.find("backends.ha.topology: unknown topology 'zookeper'"), std::string::npos)
      << error;
}

TEST(SeveralMistakes, AFileWithManyMistakesShowsTheFirstTwentyAndCountsTheRest) {
  std::string yaml;
  for (int i = 0; i < 25; ++i) yaml += "typo" + std::to_string(i) + ": 1\n";
  const auto lines = lines_of(error_of(yaml));
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_EQ(lines[0].rfind("test.yaml:1:1: error: typo0: unknown key 'typo0'", 0), 0u) << lines[0];
  EXPECT_EQ(lines[20], "test.yaml: 5 more errors not shown");
}

TEST(SeveralMistakes, ARefusedFileLogsNoWarnings) {
  // The short lease would be warned about in a file that loads; the mistake comes after it.
  std::vector<std::string> warnings;
  set_log_sink([&](LogLevel level, std::string_view line) {
    if (level == LogLevel::kWarn) warnings.emplace_back(line);
  });
  const std::string error = error_of(
      "backends:\n  default: {topology: single, address: h, command_timeout: 1s}\n"
      "defaults: {lease: 500ms}\npolicies:\n  quick: {wiat: 1s}\n");
  set_log_sink({});
  EXPECT_NE(error.find("policies.quick.wiat"), std::string::npos) << error;
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

// ---------------------------------------------------------------------------------------
// Settings that load but deserve a warning, logged at load time with file:line:col.

TEST(Warnings, ALeaseNoLongerThanItsBackendsCommandTimeoutIsWarnedAbout) {
  const auto lines = warnings_of(
      "backends:\n  default: {topology: single, address: h, command_timeout: 1s}\n"
      "defaults: {lease: 500ms}\npolicies:\n  quick: {lease: 1s}\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "test.yaml:3:19: warning: defaults.lease: 500ms is not longer than the "
            "command_timeout (1s) of backend 'default': a grant that arrives after its lease "
            "has run out is refused");
  EXPECT_EQ(lines[1].rfind("test.yaml:5:18: warning: policies.quick.lease: 1s is not longer", 0),
            0u)
      << lines[1];
}

TEST(Warnings, ALeaseLongerThanTheCommandTimeoutIsNotWarnedAbout) {
  EXPECT_TRUE(warnings_of("backends:\n  default: {topology: single, address: h}\n"
                          "defaults: {lease: 1001ms}\n")
                  .empty());
  EXPECT_TRUE(warnings_of("backends:\n  default: {topology: memory}\ndefaults: {lease: 5ms}\n")
                  .empty())
      << "a memory backend has no command timeout";
}

TEST(Warnings, RedlockWithAnEvenNumberOfInstancesIsWarnedAbout) {
  for (const char* list : {"[a, b]", "[a, b, c, d]"}) {
    const auto lines = warnings_of(std::string("backends:\n  default:\n    topology: redlock\n"
                                               "    instances: ") +
                                   list + "\n");
    ASSERT_EQ(lines.size(), 1u) << list;
    EXPECT_EQ(lines[0].rfind("test.yaml:4:16: warning: backends.default.instances: ", 0), 0u)
        << lines[0];
    EXPECT_NE(lines[0].find("use an odd number"), std::string::npos) << lines[0];
  }
  EXPECT_TRUE(warnings_of("backends:\n  default:\n    topology: redlock\n"
                          "    instances: [a, b, c]\n")
                  .empty());
}

// ---------------------------------------------------------------------------------------
// The environment.

class Environment : public testing::Test {
 protected:
  void SetUp() override {
    ::setenv("DLOCK_TEST_PASSWORD", "from-env", 1);
    ::setenv("DLOCK_TEST_HOST", "redis.internal", 1);
  }
  void TearDown() override {
    ::unsetenv("DLOCK_TEST_PASSWORD");
    ::unsetenv("DLOCK_TEST_HOST");
  }
};

TEST_F(Environment, VariablesExpandInBackendStrings) {
  const Config config = parse_config(
      "service: ${DLOCK_TEST_HOST}\nbackends:\n  default:\n    topology: single\n"
      "    address: redis://${DLOCK_TEST_HOST}:6380\n    password: ${DLOCK_TEST_PASSWORD}\n",
      kSource);
  EXPECT_EQ(config.service, "redis.internal");
  EXPECT_EQ(config.backends.at("default").endpoints,
            (std::vector<Endpoint>{{"redis.internal", 6380}}));
  EXPECT_EQ(config.backends.at("default").password, "from-env");
}

TEST_F(Environment, DoubleDollarIsALiteralReference) {
  const Config config = parse_config(
      "backends:\n  default:\n    topology: single\n    address: h\n"
      "    password: a$${DLOCK_TEST_PASSWORD}b$c\n",
      kSource);
  EXPECT_EQ(config.backends.at("default").password, "a${DLOCK_TEST_PASSWORD}b$c");
}

TEST_F(Environment, ExpandedSecretNeverAppearsInAnAddressError) {
  ::setenv("DLOCK_TEST_PASSWORD", kSecret, 1);
  const std::string message = error_of(
      "backends:\n  default:\n    topology: single\n"
      "    address: redis://:${DLOCK_TEST_PASSWORD}@h:0\n");
  EXPECT_NE(message.find("redis://:***@h:0"), std::string::npos) << message;
  EXPECT_EQ(message.find(kSecret), std::string::npos) << message;
}

TEST_F(Environment, UsernameWithAnEmptyPasswordFromTheEnvironmentIsRefused) {
  ::setenv("DLOCK_TEST_PASSWORD", "", 1);
  const std::string message = error_of(
      "backends:\n  default:\n    topology: single\n    address: h\n    username: app\n"
      "    password: ${DLOCK_TEST_PASSWORD}\n");
  EXPECT_EQ(message.rfind("test.yaml:5:5: error: backends.default.username: a user name without "
                          "a password", 0),
            0u)
      << message;
}

// The `default` backend of a file that gives it as `single` with this address.
BackendConfig single_at(const std::string& address) {
  return parse_config("backends:\n  default:\n    topology: single\n    address: " + address + "\n",
                      kSource)
      .backends.at("default");
}

// The address is split into its parts before ${NAME} is expanded: a value from the
// environment is taken as it is, never percent-decoded, and cannot change the structure.
TEST_F(Environment, PercentSequencesInAnEnvironmentPasswordAreKeptAsTheyAre) {
  ::setenv("DLOCK_TEST_PASSWORD", "p%41ss", 1);
  const BackendConfig backend = single_at("redis://app:${DLOCK_TEST_PASSWORD}@h:7000");
  EXPECT_EQ(backend.password, "p%41ss");
  EXPECT_EQ(backend.username, "app");
}

TEST_F(Environment, ASlashInAnEnvironmentPasswordDoesNotBreakTheAddress) {
  ::setenv("DLOCK_TEST_PASSWORD", "pa/ss@x:y", 1);
  const BackendConfig backend =
      single_at("redis://app:${DLOCK_TEST_PASSWORD}@${DLOCK_TEST_HOST}:7000/3");
  EXPECT_EQ(backend.password, "pa/ss@x:y");
  EXPECT_EQ(backend.endpoints, (std::vector<Endpoint>{{"redis.internal", 7000}}));
  EXPECT_EQ(backend.database, 3);
}

TEST_F(Environment, TheFilesOwnPercentEncodingIsStillDecodedAroundAReference) {
  ::setenv("DLOCK_TEST_PASSWORD", "%2F", 1);
  EXPECT_EQ(single_at("redis://app:a%2F${DLOCK_TEST_PASSWORD}@h").password, "a/%2F");
}

TEST_F(Environment, LockSettingsAreNotExpanded) {
  EXPECT_NE(error_of("defaults: {lease: \"${DLOCK_TEST_PASSWORD}\"}\n").find("bad duration"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------
// resolve(): built-in < defaults < policy < attribute < locks.

Config layered_config() {
  return parse_config(R"(
backends:
  default: {topology: memory}
  ha: {topology: memory}
  other: {topology: memory}
defaults: {lease: 20s, wait: 5s}
policies:
  reports: {lease: 40s, on_busy: skip, max_hold: 10m, backend: ha}
  patient: {wait: 1m, on_busy: skip}
locks:
  "shop::tuned": {lease: 90s, backend: other}
)",
                      kSource);
}

TEST(Resolve, BuiltInSettingsApplyWhenNothingIsSet) {
  const LockSettings settings = Config::builtin().resolve("g", "", {});
  EXPECT_EQ(settings.lease, 30s);
  EXPECT_EQ(settings.wait, 10s);
  EXPECT_EQ(settings.on_busy, OnBusy::kThrow);
  EXPECT_EQ(settings.min_hold, 0s);
  EXPECT_FALSE(settings.max_hold);
  EXPECT_EQ(settings.backend, "default");
}

TEST(Resolve, DefaultsOverrideBuiltIn) {
  const LockSettings settings = layered_config().resolve("g", "", {});
  EXPECT_EQ(settings.lease, 20s);
  EXPECT_EQ(settings.wait, 5s);
  EXPECT_EQ(settings.backend, "default");
}

TEST(Resolve, PolicyOverridesDefaults) {
  const LockSettings settings = layered_config().resolve("g", "reports", {});
  EXPECT_EQ(settings.lease, 40s);
  EXPECT_EQ(settings.on_busy, OnBusy::kSkip);
  EXPECT_EQ(settings.max_hold, 10min);
  EXPECT_EQ(settings.backend, "ha");
  EXPECT_EQ(settings.wait, 5s);  // set in defaults, so skip does not zero it
}

TEST(Resolve, AttributeOverridesPolicy) {
  LockOverrides attribute;
  attribute.lease = 7s;
  attribute.on_busy = OnBusy::kThrow;
  const LockSettings settings = layered_config().resolve("g", "reports", attribute);
  EXPECT_EQ(settings.lease, 7s);
  EXPECT_EQ(settings.on_busy, OnBusy::kThrow);
  EXPECT_EQ(settings.backend, "ha");
}

TEST(Resolve, LocksEntryOverridesAttribute) {
  LockOverrides attribute;
  attribute.lease = 7s;
  attribute.wait = 3s;
  const LockSettings settings = layered_config().resolve("shop::tuned", "reports", attribute);
  EXPECT_EQ(settings.lease, 90s);
  EXPECT_EQ(settings.wait, 3s);
  EXPECT_EQ(settings.backend, "other");
}

TEST(Resolve, LocksEntryAppliesOnlyToItsGuard) {
  EXPECT_EQ(layered_config().resolve("shop::other", "", {}).lease, 20s);
}

TEST(Resolve, SkipWithoutAnyWaitMeansZeroWait) {
  Config config = Config::builtin();
  config.policies["fire_and_forget"].on_busy = OnBusy::kSkip;
  EXPECT_EQ(config.resolve("g", "fire_and_forget", {}).wait, 0s);

  LockOverrides attribute;
  attribute.on_busy = OnBusy::kSkip;
  EXPECT_EQ(Config::builtin().resolve("g", "", attribute).wait, 0s);
}

TEST(Resolve, SkipKeepsAWaitSetAtAnyLevel) {
  EXPECT_EQ(layered_config().resolve("g", "patient", {}).wait, 1min);

  Config config = Config::builtin();
  config.locks["g"].wait = 2s;
  LockOverrides attribute;
  attribute.on_busy = OnBusy::kSkip;
  EXPECT_EQ(config.resolve("g", "", attribute).wait, 2s);
}

TEST(Resolve, ExplicitZeroWaitWithThrowStaysZero) {
  LockOverrides attribute;
  attribute.wait = 0s;
  EXPECT_EQ(Config::builtin().resolve("g", "", attribute).wait, 0s);
}

TEST(Resolve, UnknownPolicyNamesGuardAndPolicy) {
  const Config config = layered_config();
  try {
    (void)config.resolve("shop::f", "reprots", {});
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(),
                 "test.yaml: error: guard 'shop::f': unknown policy 'reprots' "
                 "(configured: patient, reports)");
  }
  EXPECT_THROW((void)Config::builtin().resolve("g", "reports", {}), ConfigError);
}

TEST(Resolve, AttributeNamingMissingBackendFails) {
  LockOverrides attribute;
  attribute.backend = "nowhere";
  try {
    (void)layered_config().resolve("shop::f", "", attribute);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(),
                 "test.yaml: error: guard 'shop::f': backend 'nowhere' is not configured "
                 "(configured: default, ha, other)");
  }
}

TEST(Resolve, AnAttributeLeaseTooShortToRenewFails) {
  LockOverrides attribute;
  attribute.lease = 2ms;
  try {
    (void)Config::builtin().resolve("g", "", attribute);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(),
                 "<built-in>: error: guard 'g': lease 2ms is too short: must be at least 3ms, as "
                 "the watchdog renews a lease every lease/3");
  }
}

TEST(Resolve, MinHoldAboveMaxHoldAcrossLevelsFails) {
  Config config = Config::builtin();
  config.defaults.min_hold = 1min;
  config.policies["short"].max_hold = 30s;
  try {
    (void)config.resolve("g", "short", {});
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_STREQ(error.what(), "<built-in>: error: guard 'g': min_hold 1m exceeds max_hold 30s");
  }
}

TEST(Resolve, PermitsFromTheAttributeWithModeSharedFail) {
  LockOverrides attribute;
  attribute.mode = LockMode::kShared;
  attribute.permits = 3;
  try {
    (void)Config::builtin().resolve("g", "", attribute);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("guard 'g': permits=3 cannot be used with mode=shared"),
              std::string::npos)
        << error.what();
  }
  // Permits from a policy meet the attribute's mode=shared the same way.
  Config config = Config::builtin();
  config.policies["pool"].permits = 2;
  LockOverrides shared;
  shared.mode = LockMode::kShared;
  EXPECT_THROW((void)config.resolve("g", "pool", shared), ConfigError);
}

TEST(Resolve, AttributePermitsOutOfRangeFail) {
  for (const int permits : {-1, kMaxPermits + 1}) {
    LockOverrides attribute;
    attribute.permits = permits;
    try {
      (void)Config::builtin().resolve("g", "", attribute);
      FAIL() << "no error for " << permits;
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("is out of range: a semaphore has 1 to 1000000"),
                std::string::npos)
          << error.what();
    }
  }
}

// ---------------------------------------------------------------------------------------
// parse_duration and parse_address.

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("250ms"), 250ms);
  EXPECT_EQ(parse_duration("30s"), 30s);
  EXPECT_EQ(parse_duration("10m"), 10min);
  EXPECT_EQ(parse_duration("1h"), 1h);
  EXPECT_EQ(parse_duration("0s"), 0s);
  EXPECT_EQ(parse_duration("007s"), 7s);
}

TEST(ParseDuration, RefusesEverythingElse) {
  for (const char* text : {"", "30", "s", "ms", "30x", "-1s", "+1s", "1.5s", " 30s", "30s ", "30 s",
                           "30S", "30sec", "1h30m", "0x10s", "30ms5", "３０s"}) {
    EXPECT_EQ(parse_duration(text), std::nullopt) << text;
  }
}

TEST(ParseDuration, RefusesOverflowInsteadOfWrapping) {
  EXPECT_EQ(parse_duration("99999999999999999999h"), std::nullopt);
  EXPECT_EQ(parse_duration("9223372036854775807ms"), std::nullopt);
  EXPECT_EQ(parse_duration("18446744073709551617ms"), std::nullopt);
  // The largest accepted value still fits in nanoseconds, for steady_clock arithmetic.
  const auto largest = parse_duration("2562047h");
  ASSERT_TRUE(largest);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::duration<double>>(*largest).count() * 1e9,
            9.3e18);
  EXPECT_EQ(parse_duration("2562048h"), std::nullopt);
}

TEST(ParseAddress, ReadsHostAndPortForms) {
  const auto plain = parse_address("127.0.0.1:6380");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->endpoint, (Endpoint{"127.0.0.1", 6380}));
  EXPECT_TRUE(plain->username.empty());
  EXPECT_FALSE(plain->database);

  EXPECT_EQ(parse_address("redis.local")->endpoint, (Endpoint{"redis.local", 6379}));
  EXPECT_EQ(parse_address("[::1]:6379")->endpoint, (Endpoint{"::1", 6379}));
  EXPECT_EQ(parse_address("[::1]")->endpoint, (Endpoint{"::1", 6379}));
  EXPECT_EQ(parse_address("[fe80::1%eth0]:7000")->endpoint, (Endpoint{"fe80::1%eth0", 7000}));
  EXPECT_EQ(parse_address("h:1")->endpoint.port, 1);
  EXPECT_EQ(parse_address("h:65535")->endpoint.port, 65535);
}

TEST(ParseAddress, ReadsRedisUrls) {
  const auto full = parse_address("redis://user:pass@redis.local:6390/3");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->endpoint, (Endpoint{"redis.local", 6390}));
  EXPECT_EQ(full->username, "user");
  EXPECT_EQ(full->password, "pass");
  EXPECT_EQ(full->database, 3);

  const auto password_only = parse_address("redis://:pw@h");
  ASSERT_TRUE(password_only);
  EXPECT_EQ(password_only->username, "");
  EXPECT_EQ(password_only->password, "pw");
  EXPECT_EQ(password_only->endpoint.port, 6379);

  EXPECT_EQ(parse_address("redis://u@h")->username, "u");
  EXPECT_EQ(parse_address("redis://:p@ss@h")->password, "p@ss");
  EXPECT_EQ(parse_address("redis://:a%2Fb%3a@h")->password, "a/b:");
  EXPECT_EQ(parse_address("REDIS://h:1")->endpoint, (Endpoint{"h", 1}));
  EXPECT_EQ(parse_address("redis://[::1]:6380/0")->endpoint, (Endpoint{"::1", 6380}));
  EXPECT_EQ(parse_address("redis://[::1]:6380/0")->database, 0);
  EXPECT_FALSE(parse_address("redis://h:1/")->database);
  EXPECT_FALSE(parse_address("redis://h:1")->tls);
  EXPECT_FALSE(parse_address("h:1")->tls);
}

TEST(ParseAddress, ReadsRedissUrlsAsRedisUrlsWithTls) {
  const auto full = parse_address("rediss://user:pass@redis.local:6390/3");
  ASSERT_TRUE(full);
  EXPECT_TRUE(full->tls);
  EXPECT_EQ(full->endpoint, (Endpoint{"redis.local", 6390}));
  EXPECT_EQ(full->username, "user");
  EXPECT_EQ(full->password, "pass");
  EXPECT_EQ(full->database, 3);

  EXPECT_EQ(parse_address("rediss://h")->endpoint, (Endpoint{"h", 6379}));
  EXPECT_TRUE(parse_address("RediSS://h:1")->tls);
  EXPECT_TRUE(parse_address("rediss://[::1]:6380")->tls);
}

TEST(ParseAddress, RefusesEmbeddedNul) {
  EXPECT_EQ(parse_address(std::string_view("[::1\0x]:1", 10)), std::nullopt);
  EXPECT_EQ(parse_address(std::string_view("h\0x:1", 6)), std::nullopt);
}

TEST(ParseAddress, RefusesGarbage) {
  for (const char* text : {"",
                           ":6379",
                           "h:",
                           "h:0",
                           "h:65536",
                           "h:99999999999999999999",
                           "h:-1",
                           "h:+1",
                           "h:1x",
                           "h:1:2",
                           "::1",
                           "::1:6379",
                           "[::1",
                           "[::1]6379",
                           "[]:1",
                           "[zz]:1",
                           "[127.0.0.1]:1",
                           "redis://",
                           "redis://:1",
                           "redis://h:1/x",
                           "redis://h:1/-1",
                           "redis://h:1/1?x=1",
                           "redis://h/99999999999",
                           "redis://%zz@h",
                           "http://h:1",
                           "redisss://h:1",
                           "rediss:/h:1",
                           "rediss://",
                           "unix:///tmp/s",
                           "user@h:1",
                           "h:1/0",
                           "h h",
                           "h\n",
                           "-",
                           ".",
                           "a..b",
                           "a.",
                           "6379",
                           "999.1.1.1",
                           "1.2.3",
                           "h_ost!",
                           "redis://h:1#f",
                           "redis://:pa/ss@h"}) {
    EXPECT_EQ(parse_address(text), std::nullopt) << text;
  }
}

// ---------------------------------------------------------------------------------------
// Files.

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("dlock_config_test_" + std::to_string(::getpid()) + "_" + name);
}

TEST(LoadConfig, ReadsAFileFromDisk) {
  const auto path = temp_path("disk.yaml");
  {
    std::ofstream out(path);
    out << "service: disk\nbackends:\n  default: {topology: memory}\n";
  }
  const Config config = load_config(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(config.service, "disk");
  EXPECT_EQ(config.source, path.string());
  EXPECT_EQ(config.backends.at("default").topology, Topology::kMemory);
}

TEST(LoadConfig, ErrorsNameTheFilePath) {
  const auto path = temp_path("bad.yaml");
  {
    std::ofstream out(path);
    out << "service: x\ndefaults:\n  lease: 30\n";
  }
  try {
    (void)load_config(path.string());
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()).rfind(path.string() + ":3:10: error: defaults.lease: ", 0),
              0u)
        << error.what();
  }
  std::filesystem::remove(path);
}

TEST(LoadConfig, MissingFileNamesPathAndReason) {
  const auto path = temp_path("does-not-exist.yaml");
  try {
    (void)load_config(path.string());
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()),
              path.string() +
                  ": error: cannot open the configuration file: No such file or "
                  "directory");
  }
}

TEST(LoadConfig, DirectoryIsRefused) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  try {
    (void)load_config(dir);
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("Is a directory"), std::string::npos) << error.what();
  }
}

TEST(LoadConfig, EverySampleLoads) {
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DLOCK_SAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    EXPECT_NO_THROW((void)load_config(entry.path().string())) << entry.path();
  }
  EXPECT_GE(count, 3u);
}

TEST(LoadConfig, FullSampleMatchesTheDesign) {
  const Config config = load_config(std::string(DLOCK_SAMPLES_DIR) + "/full.yaml");
  EXPECT_EQ(config.service, "shop");
  EXPECT_EQ(config.backends.at("ha").topology, Topology::kSentinel);
  EXPECT_EQ(config.backends.at("ha").wait_replicas, 1);
  EXPECT_EQ(config.backends.at("shards").endpoints.size(), 3u);
  EXPECT_EQ(config.backends.at("quorum").endpoints.size(), 3u);

  const LockSettings reports = config.resolve("nightly", "reports", {});
  EXPECT_EQ(reports.on_busy, OnBusy::kSkip);
  EXPECT_EQ(reports.wait, 0s);
  EXPECT_EQ(reports.min_hold, 30s);
  EXPECT_EQ(reports.max_hold, 10min);
  EXPECT_EQ(reports.backend, "ha");
  EXPECT_EQ(config.resolve("shop::place_order", "", {}).lease, 45s);
}

// Mangled versions of the full sample: whatever the bytes, the loader answers with a Config
// or a ConfigError, never another exception or a crash.
TEST(LoadConfig, MangledInputOnlyEverRaisesConfigError) {
  std::ifstream in(std::string(DLOCK_SAMPLES_DIR) + "/full.yaml");
  const std::string original((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(original.empty());
  const std::string alphabet = "{}[]:,-#&*!|>'\"%@`\n\t ${}0a\x01\xff";
  std::mt19937 random(12345);
  for (int round = 0; round < 3000; ++round) {
    std::string text = original;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = random() % text.size();
      switch (random() % 3) {
        case 0:
          text[at] = alphabet[random() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + random() % 8);
          break;
        default:
          text.insert(at, 1, alphabet[random() % alphabet.size()]);
      }
      if (text.empty()) text = "x";
    }
    try {
      (void)parse_config(text, "mangled.yaml");
    } catch (const ConfigError& error) {
      EXPECT_EQ(std::string(error.what()).rfind("mangled.yaml", 0), 0u) << error.what();
    }
  }
}

}  // namespace
}  // namespace dlock
