// The configuration of an etcd backend: `endpoints`, `root` and `tls`, the keys it shares with
// the other backends and those it does not (docs/CONFIG.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config_test_helpers.hpp"
#include "dlock/config.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// An etcd backend named `etcd` with `settings`, each a line "key: value" (from line 4 on),
// used by default.
std::string etcd_backend(const std::string& settings) {
  return "backends:\n  etcd:\n    topology: etcd\n" + settings + "defaults: {backend: etcd}\n";
}

// The same with three members on line 4 and `settings` from line 5 on.
std::string cluster(const std::string& settings) {
  return etcd_backend(
      "    endpoints: [http://127.0.0.1:2379, http://127.0.0.1:22379, http://127.0.0.1:32379]\n" +
      settings);
}

// The same with two https:// members on line 4 and `settings` from line 5 on.
std::string tls_cluster(const std::string& settings) {
  return etcd_backend("    endpoints: [https://etcd-1:2379, https://etcd-2:2379]\n" + settings);
}

// Each row's text, kept alive for the table's pointers.
const std::string kRows[] = {
    // 0-9: keys.
    etcd_backend("    root: /dlock\n"),
    cluster("    pool_size: 4\n"),
    cluster("    username: app\n"),
    cluster("    password: hunter2\n"),
    cluster("    database: 1\n"),
    etcd_backend("    address: 127.0.0.1:2379\n"),
    etcd_backend("    hosts: [127.0.0.1:2379]\n"),
    cluster("    session_timeout: 10s\n"),
    cluster("    dsn: host=h\n"),
    etcd_backend("    endpoint: [a]\n"),
    // 10-19: endpoints as a whole.
    etcd_backend("    endpoints: \"http://a:2379,http://b:2379\"\n"),
    etcd_backend("    endpoints: http://127.0.0.1:2379\n"),
    etcd_backend("    endpoints: {a: 2379}\n"),
    etcd_backend("    endpoints:\n"),
    etcd_backend("    endpoints: []\n"),
    etcd_backend("    endpoints: [http://127.0.0.1:2379, 127.0.0.1]\n"),
    etcd_backend("    endpoints: [\"http://[::1]:2379\", \"[0::1]\"]\n"),
    etcd_backend("    endpoints: [http://a:2379, https://b:2379]\n"),
    etcd_backend("    endpoints:\n      - https://a:2379\n      - b:2379\n"),
    etcd_backend("    endpoints: [\"http://a:2379,http://b:2379\"]\n"),
    // 20-34: one endpoint.
    etcd_backend("    endpoints: [http://a:2379, http://b:99999]\n"),
    etcd_backend("    endpoints: [\"http://b:\"]\n"),
    etcd_backend("    endpoints: [a:two]\n"),
    etcd_backend("    endpoints: [\"::1\"]\n"),
    etcd_backend("    endpoints: [grpc://a:2379]\n"),
    etcd_backend("    endpoints: [http://a:2379/v3]\n"),
    etcd_backend("    endpoints: [https://a:2379/]\n"),
    etcd_backend("    endpoints: [\"http://root:hunter2@a:2379\"]\n"),
    etcd_backend("    endpoints: [\"http://:2379\"]\n"),
    etcd_backend("    endpoints: [\"https://[zz]:2379\"]\n"),
    etcd_backend("    endpoints: [{host: a}]\n"),
    etcd_backend("    endpoints: [\"\"]\n"),
    etcd_backend("    endpoints:\n      - http://a:2379\n"
                 "      - http://${DLOCK_TEST_SURELY_UNSET}:2379\n"),
    etcd_backend("    endpoints: [a:0]\n"),
    etcd_backend("    endpoints: [\"etcd 1:2379\"]\n"),
    // 35-39: tls.
    cluster("    tls: {server_name: etcd.internal}\n"),
    etcd_backend("    tls:\n      verify: true\n    endpoints: [a, b]\n"),
    tls_cluster("    tls: true\n"),
    tls_cluster("    tls: {ca_fle: x}\n"),
    tls_cluster("    tls: [a]\n"),
    // 40-51: root.
    cluster("    root: dlock\n"),
    cluster("    root: /\n"),
    cluster("    root: /dlock/\n"),
    cluster("    root: \"\"\n"),
    cluster("    root: [/dlock]\n"),
    cluster("    root: \"/a\\x01b\"\n"),
    cluster("    root: \"/a\\x7f\"\n"),
    cluster("    root: \"/a\\u0085\"\n"),
    cluster("    root: \"/a\xff\"\n"),
    cluster("    root: /" + std::string(4096, 'r') + "\n"),
    cluster("    root: \"/a\\tb\"\n"),
    cluster("    root: /a//\n"),
};

const BadFile kBadEtcdFiles[] = {
    // Keys.
    {"WithoutEndpointsIsRefused", kRows[0].c_str(), "3:5",
     "backends.etcd: missing required key 'endpoints' for an etcd backend"},
    {"PoolSizeIsRefused", kRows[1].c_str(), "5:5",
     "backends.etcd.pool_size: does not apply to an etcd backend: its calls share one gRPC "
     "connection per member, not a pool of connections"},
    {"UsernameIsRefusedAsEtcdAuthenticationIsNotSupported", kRows[2].c_str(), "5:5",
     "backends.etcd.username: does not apply to an etcd backend: etcd authentication is not "
     "supported by dlock yet; use client certificates over https:// instead (tls: cert_file, "
     "key_file)"},
    {"PasswordIsRefusedAsEtcdAuthenticationIsNotSupported", kRows[3].c_str(), "5:5",
     "backends.etcd.password: does not apply to an etcd backend: etcd authentication is not "
     "supported by dlock yet; use client certificates over https:// instead (tls: cert_file, "
     "key_file)"},
    {"DatabaseIsRefused", kRows[4].c_str(), "5:5",
     "backends.etcd.database: does not apply to an etcd backend: etcd has no databases; give "
     "the backend a 'root' of its own instead"},
    {"RedisAddressIsRefusedForEndpoints", kRows[5].c_str(), "4:5",
     "backends.etcd.address: does not apply to an etcd backend: the cluster's members go in "
     "'endpoints'"},
    {"ZookeeperHostsAreRefusedForEndpoints", kRows[6].c_str(), "4:5",
     "backends.etcd.hosts: does not apply to an etcd backend: the cluster's members go in "
     "'endpoints'"},
    {"SessionTimeoutIsRefusedAsAZookeeperSetting", kRows[7].c_str(), "5:5",
     "backends.etcd.session_timeout: does not apply to an etcd backend (it is a zookeeper "
     "setting)"},
    {"DsnIsRefusedAsAPostgresSetting", kRows[8].c_str(), "5:5",
     "backends.etcd.dsn: does not apply to an etcd backend (it is a postgres setting)"},
    {"MisspelledEndpointsSuggestsEndpoints", kRows[9].c_str(), "4:5",
     "backends.etcd.endpoint: unknown key 'endpoint'; did you mean 'endpoints'?"},
    {"UnknownKeyListsTheKeysOfAnEtcdBackend",
     "backends:\n  default: {topology: etcd, endpoints: [a], colour: red}\n", "2:45",
     "backends.default.colour: unknown key 'colour' (expected one of: topology, endpoints, root, "
     "tls, connect_timeout, command_timeout, poll_interval)"},
    {"EndpointsOnASingleBackendIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n    endpoints: [h]\n", "5:5",
     "backends.default.endpoints: does not apply to a single backend (it is an etcd setting); "
     "a single backend's server goes in 'address'"},
    {"EndpointsOnARedlockBackendNameItsInstances",
     "backends:\n  default:\n    topology: redlock\n    instances: [redis://h:1]\n"
     "    endpoints: [h]\n",
     "5:5",
     "backends.default.endpoints: does not apply to a redlock backend (it is an etcd setting); "
     "a redlock backend's servers go in 'instances'"},
    {"EndpointsOnAZookeeperBackendIsRefusedForHosts",
     "backends:\n  default:\n    topology: zookeeper\n    hosts: [h]\n    endpoints: [h]\n",
     "5:5",
     "backends.default.endpoints: does not apply to a zookeeper backend: the ensemble's servers "
     "go in 'hosts'"},
    {"EndpointsOnAMemoryBackendIsRefused",
     "backends:\n  default: {topology: memory, endpoints: [h]}\n", "2:31",
     "backends.default.endpoints: does not apply to a memory backend"},
    {"EndpointsInLockSettingsPointsToBackends", "defaults:\n  endpoints: [h]\n", "2:3",
     "defaults.endpoints: unknown key 'endpoints' (backend settings go under 'backends')"},
    {"MisspelledTopologySuggestsEtcd", "backends:\n  default:\n    topology: etc\n", "3:15",
     "backends.default.topology: unknown topology 'etc'; did you mean 'etcd'?"},

    // endpoints as a whole.
    {"CommaSeparatedEndpointsStringIsRefusedWithAList", kRows[10].c_str(), "4:16",
     "backends.etcd.endpoints: expected a list, got one comma-separated string; write the "
     "endpoints as a YAML list (endpoints: [http://a:2379, http://b:2379])"},
    {"SingleEndpointNotInAListIsRefused", kRows[11].c_str(), "4:16",
     "backends.etcd.endpoints: expected a list of endpoints like [http://host:port, ...], got a "
     "single value"},
    {"EndpointsAsMapIsRefused", kRows[12].c_str(), "4:16",
     "backends.etcd.endpoints: expected a list of endpoints like [http://host:port, ...], got a "
     "map"},
    {"MissingEndpointsValueIsRefused", kRows[13].c_str(), "4:5",
     "backends.etcd.endpoints: missing value; expected a list of endpoints like "
     "[http://host:port, ...]"},
    {"EmptyEndpointsListIsRefused", kRows[14].c_str(), "4:16",
     "backends.etcd.endpoints: the list is empty; give at least one endpoint"},
    {"EndpointListedTwiceIsRefusedWithTheDefaultPort", kRows[15].c_str(), "4:40",
     "backends.etcd.endpoints[1]: endpoint 127.0.0.1:2379 is listed twice (first at 4:17)"},
    {"Ipv6EndpointInTwoSpellingsIsListedTwice", kRows[16].c_str(), "4:38",
     "backends.etcd.endpoints[1]: endpoint [0::1]:2379 is listed twice (first at 4:17)"},
    {"HttpAndHttpsMixedAreRefused", kRows[17].c_str(), "4:32",
     "backends.etcd.endpoints[1]: mixes https:// (here) and http:// (at 4:17) entries; write "
     "every entry as https:// for TLS, or none"},
    {"HttpsAndBareHostPortMixedAreRefused", kRows[18].c_str(), "6:9",
     "backends.etcd.endpoints[1]: mixes host:port (here) and https:// (at 5:9) entries; write "
     "every entry as https:// for TLS, or none"},
    {"SeveralEndpointsInOneEntryAreRefused", kRows[19].c_str(), "4:17",
     "backends.etcd.endpoints[0]: 'http://a:2379,http://b:2379' holds several endpoints; give "
     "each its own entry of the list"},

    // One endpoint.
    {"PortOutOfRangeIsRefused", kRows[20].c_str(), "4:32",
     "backends.etcd.endpoints[1]: bad endpoint 'http://b:99999': the port must be between 1 "
     "and 65535"},
    {"PortZeroIsRefused", kRows[33].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'a:0': the port must be between 1 and 65535"},
    {"MissingPortAfterColonIsRefused", kRows[21].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'http://b:': missing port after ':'"},
    {"PortNotANumberIsRefused", kRows[22].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'a:two': the port must be a number"},
    {"Ipv6WithoutBracketsIsRefused", kRows[23].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint '::1': put an IPv6 address in brackets, e.g. "
     "\"[::1]:2379\""},
    {"UnknownSchemeIsRefused", kRows[24].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'grpc://a:2379': unknown scheme 'grpc://'; use "
     "http:// or https://"},
    {"PathAfterTheMemberIsRefused", kRows[25].c_str(), "4:17",
     "backends.etcd.endpoints[0]: '/v3' after the member is a path, which an endpoint does not "
     "take; write http://a:2379 (the keys go under 'root')"},
    {"TrailingSlashIsRefused", kRows[26].c_str(), "4:17",
     "backends.etcd.endpoints[0]: '/' after the member is a path, which an endpoint does not "
     "take; write https://a:2379 (the keys go under 'root')"},
    {"CredentialsInAnEndpointAreRefusedAndHidden", kRows[27].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'http://root:***@a:2379': credentials are not "
     "allowed in an endpoint; etcd authentication is not supported by dlock yet, use client "
     "certificates over https:// instead (tls: cert_file, key_file)"},
    {"EndpointWithoutHostIsRefused", kRows[28].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'http://:2379': missing host"},
    {"BadIpv6InBracketsIsRefused", kRows[29].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'https://[zz]:2379': expected [ipv6] or "
     "[ipv6]:port with a valid IPv6 address"},
    {"HostWithASpaceIsRefused", kRows[34].c_str(), "4:17",
     "backends.etcd.endpoints[0]: bad endpoint 'etcd 1:2379': expected host:port, host or "
     "[ipv6]:port; a host is a DNS name or an IPv4 address"},
    {"EndpointAsMapIsRefused", kRows[30].c_str(), "4:17",
     "backends.etcd.endpoints[0]: expected an endpoint like http://host:port, got a map"},
    {"EmptyEndpointIsRefused", kRows[31].c_str(), "4:17",
     "backends.etcd.endpoints[0]: the endpoint is empty"},
    {"UnsetVariableInAnEndpointIsRefused", kRows[32].c_str(), "6:9",
     "backends.etcd.endpoints[1]: environment variable 'DLOCK_TEST_SURELY_UNSET' is not set"},

    // tls.
    {"TlsBlockBesideHttpEndpointsIsRefused", kRows[35].c_str(), "5:5",
     "backends.etcd.tls: tls applies to https:// endpoints, and this backend's are not; write "
     "them as https://host:port, or remove 'tls'"},
    {"TlsBlockBeforeBareEndpointsIsRefused", kRows[36].c_str(), "4:5",
     "backends.etcd.tls: tls applies to https:// endpoints, and this backend's are not; write "
     "them as https://host:port, or remove 'tls'"},
    {"TlsAsTrueIsNotHowToTurnItOn", kRows[37].c_str(), "5:10",
     "backends.etcd.tls: expected a map of TLS settings, got a single value (https:// endpoints "
     "turn TLS on)"},
    {"UnknownTlsKeySuggestsCloseOne", kRows[38].c_str(), "5:11",
     "backends.etcd.tls.ca_fle: unknown key 'ca_fle'; did you mean 'ca_file'?"},
    {"TlsAsListIsRefused", kRows[39].c_str(), "5:10",
     "backends.etcd.tls: expected a map of TLS settings, got a list"},

    // root.
    {"RelativeRootIsRefused", kRows[40].c_str(), "5:11",
     "backends.etcd.root: 'dlock' must start with '/' (/dlock)"},
    {"SlashAloneAsRootIsRefused", kRows[41].c_str(), "5:11",
     "backends.etcd.root: '/' leaves dlock no prefix of its own: every key of the cluster "
     "starts with it; write one like /dlock"},
    {"RootWithTrailingSlashIsRefused", kRows[42].c_str(), "5:11",
     "backends.etcd.root: '/dlock/' ends in '/'; write /dlock (the keys of a service start with "
     "<root>/<service>/)"},
    {"RootWithTrailingSlashesIsRefused", kRows[51].c_str(), "5:11",
     "backends.etcd.root: '/a//' ends in '/'; write /a ("},
    {"EmptyRootIsRefused", kRows[43].c_str(), "5:11",
     "backends.etcd.root: must not be empty; write a key prefix like /dlock"},
    {"RootAsListIsRefused", kRows[44].c_str(), "5:11",
     "backends.etcd.root: expected a key prefix like /dlock, got a list"},
    {"RootWithAControlCharacterIsRefused", kRows[45].c_str(), "5:11",
     "backends.etcd.root: '/a\\x01b' holds U+0001, a control character"},
    {"RootWithATabIsRefused", kRows[50].c_str(), "5:11",
     "backends.etcd.root: '/a\\x09b' holds U+0009, a control character"},
    {"RootWithDeleteIsRefused", kRows[46].c_str(), "5:11",
     "backends.etcd.root: '/a\\x7f' holds U+007F, a control character"},
    {"RootWithAC1ControlIsRefused", kRows[47].c_str(), "5:11",
     "holds U+0085, a control character"},
    {"RootNotInUtf8IsRefused", kRows[48].c_str(), "5:11",
     "backends.etcd.root: is not valid UTF-8 (at byte 3)"},
    {"RootLongerThan4096BytesIsRefused", kRows[49].c_str(), "5:11",
     "...(4097 bytes)' is longer than 4096 bytes"},
};

INSTANTIATE_TEST_SUITE_P(Etcd, MalformedFile, testing::ValuesIn(kBadEtcdFiles), row_name);

// ---------------------------------------------------------------------------------------
// Well-formed backends.

class EtcdBackend : public testing::Test {
 protected:
  void TearDown() override { ::unsetenv("DLOCK_TEST_ETCD_HOST"); }

  // The `etcd` backend of a file that gives it these settings.
  static BackendConfig loaded(const std::string& settings) {
    return parse_config(etcd_backend(settings), kSource).backends.at("etcd");
  }
};

TEST_F(EtcdBackend, TheDesignsExampleLoads) {
  const Config config = parse_config(R"(
backends:
  etcd:
    topology: etcd
    endpoints: [http://127.0.0.1:2379, http://127.0.0.1:22379, http://127.0.0.1:32379]
defaults: {backend: etcd}
)",
                                     kSource);
  const BackendConfig& etcd = config.backends.at("etcd");
  EXPECT_EQ(etcd.name, "etcd");
  EXPECT_EQ(etcd.topology, Topology::kEtcd);
  EXPECT_EQ(etcd.endpoints, (std::vector<Endpoint>{
                                {"127.0.0.1", 2379}, {"127.0.0.1", 22379}, {"127.0.0.1", 32379}}));
  EXPECT_FALSE(etcd.tls.enabled);
  EXPECT_EQ(etcd.root, "/dlock");
  EXPECT_EQ(etcd.pool_size, 0);
  EXPECT_TRUE(etcd.dsn.empty());
  EXPECT_EQ(config.resolve("g", "", {}).backend, "etcd");
}

TEST_F(EtcdBackend, EachFormOfAPlainEndpointLoadsWithPort2379UnlessGiven) {
  const BackendConfig etcd = loaded(
      "    endpoints: [http://a:2380, HTTP://b, c:1234, d, 10.0.0.5, \"[::1]:2381\", "
      "\"http://[fe80::1%eth0]\", \"Http://[::2]:1\"]\n");
  EXPECT_EQ(etcd.endpoints,
            (std::vector<Endpoint>{{"a", 2380},
                                   {"b", 2379},
                                   {"c", 1234},
                                   {"d", 2379},
                                   {"10.0.0.5", 2379},
                                   {"::1", 2381},
                                   {"fe80::1%eth0", 2379},
                                   {"::2", 1}}));
  EXPECT_FALSE(etcd.tls.enabled);
}

TEST_F(EtcdBackend, HttpsEndpointsTurnTlsOnWithItsDefaults) {
  const BackendConfig etcd =
      loaded("    endpoints: [https://etcd-1, \"HTTPS://[::1]:2380\", https://etcd-3:65535]\n");
  EXPECT_EQ(etcd.endpoints,
            (std::vector<Endpoint>{{"etcd-1", 2379}, {"::1", 2380}, {"etcd-3", 65535}}));
  EXPECT_TRUE(etcd.tls.enabled);
  EXPECT_TRUE(etcd.tls.verify);
  EXPECT_TRUE(etcd.tls.ca_file.empty());
  EXPECT_TRUE(etcd.tls.cert_file.empty());
  EXPECT_TRUE(etcd.tls.server_name.empty());
}

TEST_F(EtcdBackend, HttpAndBareEndpointsMayBeMixed) {
  const BackendConfig etcd = loaded("    endpoints: [http://a, b:2380]\n");
  EXPECT_EQ(etcd.endpoints, (std::vector<Endpoint>{{"a", 2379}, {"b", 2380}}));
  EXPECT_FALSE(etcd.tls.enabled);
}

TEST_F(EtcdBackend, ReadsTheConnectionKeysItSharesWithTheOthers) {
  const BackendConfig etcd = loaded(
      "    endpoints: [a]\n    connect_timeout: 250ms\n    command_timeout: 2s\n"
      "    poll_interval: 50ms\n    root: /apps/shop/locks\n");
  EXPECT_EQ(etcd.connect_timeout, 250ms);
  EXPECT_EQ(etcd.command_timeout, 2s);
  EXPECT_EQ(etcd.poll_interval, 50ms);
  EXPECT_EQ(etcd.root, "/apps/shop/locks");
  EXPECT_EQ(etcd.session_timeout, 10s);  // a zookeeper setting, left as it is
}

TEST_F(EtcdBackend, RootsEtcdAcceptsLoad) {
  const std::vector<std::string> roots = {"/a",     "/a/b/c", "/a//b", "/..",
                                          "/a b",   "/.",     "/zookeeper",
                                          "/сервис", "/" + std::string(4095, 'r')};
  for (const std::string& root : roots) {
    EXPECT_EQ(loaded("    endpoints: [a]\n    root: \"" + root + "\"\n").root, root);
  }
}

TEST_F(EtcdBackend, AnEndpointMayComeFromTheEnvironment) {
  ::setenv("DLOCK_TEST_ETCD_HOST", "etcd.internal", 1);
  EXPECT_EQ(loaded("    endpoints:\n      - http://${DLOCK_TEST_ETCD_HOST}:2380\n"
                   "      - ${DLOCK_TEST_ETCD_HOST}\n")
                .endpoints,
            (std::vector<Endpoint>{{"etcd.internal", 2380}, {"etcd.internal", 2379}}));
  // A whole URL in a variable is read like one written in the file.
  ::setenv("DLOCK_TEST_ETCD_HOST", "https://etcd.internal:2380", 1);
  const BackendConfig etcd = loaded("    endpoints: [\"${DLOCK_TEST_ETCD_HOST}\"]\n");
  EXPECT_EQ(etcd.endpoints, (std::vector<Endpoint>{{"etcd.internal", 2380}}));
  EXPECT_TRUE(etcd.tls.enabled);
  // etcdctl's ETCDCTL_ENDPOINTS, a comma-separated string.
  ::setenv("DLOCK_TEST_ETCD_HOST", "http://a:2379,http://b:2379", 1);
  EXPECT_EQ(error_of(etcd_backend("    endpoints: ${DLOCK_TEST_ETCD_HOST}\n")),
            "test.yaml:4:16: error: backends.etcd.endpoints: expected a list, got one "
            "comma-separated string; write the endpoints as a YAML list (endpoints: "
            "[http://a:2379, http://b:2379])");
}

TEST_F(EtcdBackend, EveryMistakeOfTheBackendIsReportedInOneError) {
  const auto lines = lines_of(error_of(etcd_backend(
      "    endpoints: [a, http://a]\n    command_timeout: 0s\n    root: dlock\n")));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "test.yaml:4:20: error: backends.etcd.endpoints[1]: endpoint a:2379 is listed twice "
            "(first at 4:17)");
  EXPECT_EQ(lines[1],
            "test.yaml:5:22: error: backends.etcd.command_timeout: must be greater than 0");
  EXPECT_EQ(lines[2],
            "test.yaml:6:11: error: backends.etcd.root: 'dlock' must start with '/' (/dlock)");
}

TEST_F(EtcdBackend, UsernamePasswordAndPoolSizeAreEachReported) {
  const auto lines = lines_of(error_of(
      cluster("    username: app\n    password: hunter2\n    pool_size: 2\n")));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("test.yaml:5:5: error: backends.etcd.username: does not apply", 0),
            0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("test.yaml:6:5: error: backends.etcd.password: does not apply", 0),
            0u)
      << lines[1];
  EXPECT_EQ(lines[2].rfind("test.yaml:7:5: error: backends.etcd.pool_size: does not apply", 0),
            0u)
      << lines[2];
  EXPECT_EQ(lines[1].find(kSecret), std::string::npos) << lines[1];
}

TEST_F(EtcdBackend, ALeaseNoLongerThanTheCommandTimeoutIsWarnedAbout) {
  const auto lines = warnings_of(etcd_backend("    endpoints: [a]\n    command_timeout: 2s\n") +
                                 "policies:\n  p: {lease: 2s}\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("policies.p.lease: 2s is not longer than the command_timeout (2s) of "
                          "backend 'etcd'"),
            std::string::npos)
      << lines[0];
}

// A directory of certificate files for the `tls:` block; the loader only checks that the
// files can be read.
class EtcdTls : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dlock_config_etcd_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    for (const char* name : {"ca.pem", "client.pem", "client.key"}) {
      std::ofstream(dir_ / name) << "not read by the loader\n";
    }
    ::setenv("DLOCK_TEST_ETCD_TLS", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DLOCK_TEST_ETCD_TLS");
    fs::remove_all(dir_);
  }

  fs::path dir_;
};

TEST_F(EtcdTls, ATlsBlockFillsEveryFieldForHttpsEndpoints) {
  const std::string yaml = tls_cluster(
      "    tls:\n"
      "      ca_file: ${DLOCK_TEST_ETCD_TLS}/ca.pem\n"
      "      cert_file: ${DLOCK_TEST_ETCD_TLS}/client.pem\n"
      "      key_file: ${DLOCK_TEST_ETCD_TLS}/client.key\n"
      "      server_name: etcd.example\n"
      "      verify: true\n");
  const TlsConfig tls = parse_config(yaml, kSource).backends.at("etcd").tls;
  EXPECT_TRUE(tls.enabled);
  EXPECT_EQ(tls.ca_file, (dir_ / "ca.pem").string());
  EXPECT_EQ(tls.cert_file, (dir_ / "client.pem").string());
  EXPECT_EQ(tls.key_file, (dir_ / "client.key").string());
  EXPECT_EQ(tls.server_name, "etcd.example");
  EXPECT_TRUE(tls.verify);
  EXPECT_TRUE(warnings_of(yaml).empty());
}

TEST_F(EtcdTls, ACertificateNeedsItsKey) {
  EXPECT_EQ(error_of(tls_cluster("    tls:\n      cert_file: ${DLOCK_TEST_ETCD_TLS}/client.pem\n")),
            "test.yaml:6:7: error: backends.etcd.tls.cert_file: a client certificate needs its "
            "key; set 'key_file' too");
}

TEST_F(EtcdTls, AMissingFileIsRefusedWithItsPath) {
  EXPECT_EQ(error_of(tls_cluster("    tls:\n      ca_file: ${DLOCK_TEST_ETCD_TLS}/missing.pem\n")),
            "test.yaml:6:16: error: backends.etcd.tls.ca_file: cannot read '" +
                (dir_ / "missing.pem").string() + "': No such file or directory");
}

TEST_F(EtcdTls, VerificationCannotBeTurnedOff) {
  EXPECT_EQ(error_of(tls_cluster("    tls: {verify: false}\n")),
            "test.yaml:5:19: error: backends.etcd.tls.verify: an etcd backend always verifies the "
            "members' certificates; for a test CA, name it in ca_file");
  EXPECT_TRUE(parse_config(tls_cluster("    tls: {verify: true}\n"), kSource)
                  .backends.at("etcd")
                  .tls.verify);
}

TEST(EtcdSample, LoadsAsTheDesignDescribes) {
  const Config config = load_config(std::string(DLOCK_SAMPLES_DIR) + "/etcd.yaml");
  const BackendConfig& backend = config.backends.at("default");
  EXPECT_EQ(backend.topology, Topology::kEtcd);
  EXPECT_EQ(backend.endpoints, (std::vector<Endpoint>{{"127.0.0.1", 2379},
                                                      {"127.0.0.1", 22379},
                                                      {"127.0.0.1", 32379}}));
  EXPECT_FALSE(backend.tls.enabled);
  EXPECT_EQ(backend.root, "/dlock");
}

}  // namespace
}  // namespace dlock
