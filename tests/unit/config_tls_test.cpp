// The configuration of TLS: rediss:// addresses and a backend's `tls:` block (docs/CONFIG.md).
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

namespace fs = std::filesystem;

// A directory of certificate files, named to the files in ${DLOCK_TEST_TLS}. The loader only
// checks that the files can be read, so their contents need not be PEM.
class Tls : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dlock_config_tls_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "certs");
    for (const char* name : {"ca.pem", "client.pem", "client.key", "certs/ca.pem"}) {
      std::ofstream(dir_ / name) << "not read by the loader\n";
    }
    ::setenv("DLOCK_TEST_TLS", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DLOCK_TEST_TLS");
    fs::remove_all(dir_);
  }

  // A config file in the directory, for load_config.
  fs::path write_config(const std::string& yaml) const {
    const fs::path path = dir_ / "dlock.yaml";
    std::ofstream(path) << yaml;
    return path;
  }

  fs::path dir_;
};

const char* const kFullBlock =
    "backends:\n"
    "  default:\n"
    "    topology: single\n"
    "    address: rediss://cache.internal:6380\n"
    "    tls:\n"
    "      ca_file: ${DLOCK_TEST_TLS}/ca.pem\n"
    "      cert_file: ${DLOCK_TEST_TLS}/client.pem\n"
    "      key_file: ${DLOCK_TEST_TLS}/client.key\n"
    "      server_name: redis.example\n"
    "      verify: true\n";

TEST_F(Tls, AFullBlockFillsEveryField) {
  const TlsConfig tls = parse_config(kFullBlock, kSource).backends.at("default").tls;
  EXPECT_TRUE(tls.enabled);
  EXPECT_EQ(tls.ca_file, (dir_ / "ca.pem").string());
  EXPECT_EQ(tls.cert_file, (dir_ / "client.pem").string());
  EXPECT_EQ(tls.key_file, (dir_ / "client.key").string());
  EXPECT_EQ(tls.server_name, "redis.example");
  EXPECT_TRUE(tls.verify);
  EXPECT_TRUE(warnings_of(kFullBlock).empty());
}

TEST(TlsAddresses, RedissTurnsTlsOnWithDefaultsForEveryRedisTopology) {
  const Config config = parse_config(
      "backends:\n"
      "  default: {topology: single, address: \"REDISS://h:6380\"}\n"
      "  ha: {topology: sentinel, master_name: m, sentinels: [\"rediss://s1\", \"rediss://s2\"]}\n"
      "  shards: {topology: cluster, nodes: [\"rediss://n1:7000\"]}\n"
      "  quorum: {topology: redlock, instances: [\"rediss://a\", \"rediss://b\", "
      "\"rediss://c\"]}\n",
      kSource);
  for (const auto& [name, backend] : config.backends) {
    EXPECT_TRUE(backend.tls.enabled) << name;
    EXPECT_TRUE(backend.tls.verify) << name;
    EXPECT_EQ(backend.tls.ca_file, "") << name << ": the system's trust store";
    EXPECT_EQ(backend.tls.server_name, "") << name << ": the host connected to";
  }
  EXPECT_EQ(config.backends.at("ha").endpoints,
            (std::vector<Endpoint>{{"s1", 6379}, {"s2", 6379}}));
}

TEST(TlsAddresses, PlainAddressesLeaveTlsOff) {
  const Config config = parse_config(
      "backends:\n"
      "  default: {topology: single, address: \"redis://h:6380\"}\n"
      "  shards: {topology: cluster, nodes: [a:7000, \"redis://b:7001\"]}\n",
      kSource);
  EXPECT_FALSE(config.backends.at("default").tls.enabled);
  EXPECT_FALSE(config.backends.at("shards").tls.enabled);
  EXPECT_FALSE(Config::builtin().backends.at("default").tls.enabled);
}

TEST(TlsAddresses, ARedissUrlCarriesCredentialsAndDatabase) {
  const BackendConfig backend =
      parse_config(
          "backends:\n  default: {topology: single, address: \"rediss://app:pw@h:6380/2\"}\n",
          kSource)
          .backends.at("default");
  EXPECT_TRUE(backend.tls.enabled);
  EXPECT_EQ(backend.endpoints, (std::vector<Endpoint>{{"h", 6380}}));
  EXPECT_EQ(backend.username, "app");
  EXPECT_EQ(backend.password, "pw");
  EXPECT_EQ(backend.database, 2);
}

// ---------------------------------------------------------------------------------------
// Refused: each row is the text, where the error must point, and what it must say.

struct BadTls {
  const char* name;
  const char* yaml;
  const char* where;    // "line:col", 1-based
  const char* message;  // "key.path: message"
};

void PrintTo(const BadTls& row, std::ostream* out) { *out << row.name; }

class RefusedTls : public Tls, public testing::WithParamInterface<BadTls> {};

TEST_P(RefusedTls, IsRefusedWithFileLineColumnAndKey) {
  const BadTls& row = GetParam();
  const std::string expected = std::string(kSource) + ":" + row.where + ": error: " + row.message;
  EXPECT_EQ(error_of(row.yaml), expected);
}

const BadTls kBadTls[] = {
    // A list is all rediss:// or not at all; a bare host:port is plain.
    {"RedissListWithABareEntry",
     "backends:\n  default:\n    topology: cluster\n    nodes: [\"rediss://a:1\", b:2]\n", "4:29",
     "backends.default.nodes[1]: mixes host:port (here) and rediss:// (at 4:13) entries; write "
     "every entry as rediss:// for TLS, or none"},
    {"BareListWithARedissEntry",
     "backends:\n  default:\n    topology: redlock\n    instances:\n      - a:1\n      - b:2\n"
     "      - rediss://c:3\n",
     "7:9",
     "backends.default.instances[2]: mixes rediss:// (here) and host:port (at 5:9) entries; "
     "write every entry as rediss:// for TLS, or none"},
    {"RedisListWithARedissEntry",
     "backends:\n  default:\n    topology: sentinel\n    master_name: m\n"
     "    sentinels: [\"redis://a:1\", \"rediss://b:2\"]\n",
     "5:32",
     "backends.default.sentinels[1]: mixes rediss:// (here) and redis:// (at 5:17) entries; "
     "write every entry as rediss:// for TLS, or none"},

    // The block's shape and keys.
    {"TlsBesidePlainAddress",
     "backends:\n  default:\n    topology: single\n    address: redis://h\n    tls: {}\n", "5:5",
     "backends.default.tls: tls applies to rediss:// addresses, and this backend's are not; "
     "write them as rediss://host:port, or remove 'tls'"},
    {"TlsBesidePlainList",
     "backends:\n  default:\n    topology: cluster\n    tls:\n      verify: true\n"
     "    nodes: [a:1, b:2]\n",
     "4:5",
     "backends.default.tls: tls applies to rediss:// addresses, and this backend's are not; "
     "write them as rediss://host:port, or remove 'tls'"},
    {"TlsAsTrueIsNotHowToTurnItOn",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n    tls: true\n",
     "5:10",
     "backends.default.tls: expected a map of TLS settings, got a single value (rediss:// "
     "addresses turn TLS on)"},
    {"TlsAsList",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n    tls: [a]\n", "5:10",
     "backends.default.tls: expected a map of TLS settings, got a list"},
    {"UnknownTlsKeySuggestsCloseOne",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n"
     "    tls: {ca_fle: x}\n",
     "5:11", "backends.default.tls.ca_fle: unknown key 'ca_fle'; did you mean 'ca_file'?"},
    {"UnknownTlsKeyListsValidOnes",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n"
     "    tls: {colour: red}\n",
     "5:11",
     "backends.default.tls.colour: unknown key 'colour' (expected one of: ca_file, cert_file, "
     "key_file, server_name, verify)"},
    {"EmptyServerName",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n"
     "    tls: {server_name: \"\"}\n",
     "5:24", "backends.default.tls.server_name: must not be empty"},
    {"VerifyNotABoolean",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n"
     "    tls: {verify: no}\n",
     "5:19", "backends.default.tls.verify: expected true or false, got 'no'"},
    {"TlsOnAMemoryBackend", "backends:\n  default:\n    topology: memory\n    tls: {}\n", "4:5",
     "backends.default.tls: does not apply to a memory backend: it lives in this process and "
     "connects to no server"},
    {"TlsInLockSettings", "defaults:\n  tls: {}\n", "2:3",
     "defaults.tls: unknown key 'tls' (backend settings go under 'backends')"},

    // A client certificate and its key go together.
    {"CertificateWithoutKey",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n    tls:\n"
     "      cert_file: ${DLOCK_TEST_TLS}/client.pem\n",
     "6:7",
     "backends.default.tls.cert_file: a client certificate needs its key; set 'key_file' too"},
    {"KeyWithoutCertificate",
     "backends:\n  default:\n    topology: single\n    address: rediss://h\n    tls:\n"
     "      key_file: ${DLOCK_TEST_TLS}/client.key\n",
     "6:7",
     "backends.default.tls.key_file: a key needs its client certificate; set 'cert_file' too"},
};

std::string row_name(const testing::TestParamInfo<BadTls>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Config, RefusedTls, testing::ValuesIn(kBadTls), row_name);

TEST_F(Tls, IndependentMistakesInOneBlockAreReportedTogether) {
  const auto lines = lines_of(
      error_of("backends:\n  default:\n    topology: single\n    address: rediss://h\n    tls:\n"
               "      verify: off\n      ca_fiel: x\n      server_name: \"\"\n"));
  ASSERT_EQ(lines.size(), 3u) << lines.front();
  EXPECT_EQ(lines[0].rfind("test.yaml:6:15: error: backends.default.tls.verify: ", 0), 0u);
  EXPECT_EQ(lines[1].rfind("test.yaml:7:7: error: backends.default.tls.ca_fiel: ", 0), 0u);
  EXPECT_EQ(lines[2].rfind("test.yaml:8:20: error: backends.default.tls.server_name: ", 0), 0u);
}

// ---------------------------------------------------------------------------------------
// The files: each must be there and readable when the configuration loads.

std::string with_ca_file(const std::string& value) {
  return "backends:\n  default:\n    topology: single\n    address: rediss://h\n    tls:\n"
         "      ca_file: " +
         value + "\n";
}

TEST_F(Tls, AMissingFileIsRefusedWithItsPath) {
  EXPECT_EQ(error_of(with_ca_file("${DLOCK_TEST_TLS}/missing.pem")),
            "test.yaml:6:16: error: backends.default.tls.ca_file: cannot read '" +
                (dir_ / "missing.pem").string() + "': No such file or directory");
}

TEST_F(Tls, ADirectoryIsRefused) {
  EXPECT_EQ(error_of(with_ca_file("${DLOCK_TEST_TLS}/certs")),
            "test.yaml:6:16: error: backends.default.tls.ca_file: cannot read '" +
                (dir_ / "certs").string() + "': it is a directory");
}

// Root reads any file, so the check runs in a child that is not root (an unprivileged user
// when the test runs as root, as in CI).
TEST_F(Tls, AnUnreadableFileIsRefused) {
  fs::permissions(dir_ / "client.key", fs::perms::none);
  const std::string expected =
      "test.yaml:6:16: error: backends.default.tls.ca_file: cannot read '" +
      (dir_ / "client.key").string() + "': Permission denied";
  const std::string yaml = with_ca_file("${DLOCK_TEST_TLS}/client.key");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) std::_Exit(2);
        std::_Exit(error_of(yaml) == expected ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(Tls, RelativePathsAreRelativeToTheConfigurationFilesDirectory) {
  const fs::path path = write_config(
      "backends:\n  default:\n    topology: single\n    address: rediss://h\n    tls:\n"
      "      ca_file: certs/ca.pem\n      cert_file: ./client.pem\n      key_file: client.key\n");
  ASSERT_FALSE(fs::exists("client.key")) << "the current directory must not hold the files";
  const TlsConfig tls = load_config(path.string()).backends.at("default").tls;
  EXPECT_EQ(tls.ca_file, (dir_ / "certs" / "ca.pem").string());
  EXPECT_EQ(tls.cert_file, (dir_ / "client.pem").string());
  EXPECT_EQ(tls.key_file, (dir_ / "client.key").string());
}

TEST_F(Tls, AMissingRelativeFileIsReportedAtItsResolvedPath) {
  const fs::path path = write_config(with_ca_file("nowhere/ca.pem"));
  try {
    (void)load_config(path.string());
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()),
              path.string() + ":6:16: error: backends.default.tls.ca_file: cannot read '" +
                  (dir_ / "nowhere" / "ca.pem").string() + "': No such file or directory");
  }
}

TEST_F(Tls, ParseConfigLeavesRelativePathsRelativeToTheCurrentDirectory) {
  const fs::path before = fs::current_path();
  fs::current_path(dir_);
  std::string loaded;
  std::string refused;
  try {
    loaded = parse_config(with_ca_file("certs/ca.pem"), kSource).backends.at("default").tls.ca_file;
    refused = error_of(with_ca_file("elsewhere.pem"));
  } catch (...) {
    fs::current_path(before);
    throw;
  }
  fs::current_path(before);
  EXPECT_EQ(loaded, "certs/ca.pem");
  EXPECT_EQ(refused,
            "test.yaml:6:16: error: backends.default.tls.ca_file: cannot read 'elsewhere.pem': "
            "No such file or directory");
}

// ---------------------------------------------------------------------------------------
// Warnings.

TEST(TlsWarnings, VerificationOffIsWarnedAbout) {
  const auto lines = warnings_of(
      "backends:\n  default:\n    topology: single\n    address: rediss://h\n"
      "    tls:\n      verify: false\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "test.yaml:6:15: warning: backends.default.tls.verify: certificate verification is "
            "off: any server can pose as this one; for tests only");
}

}  // namespace
}  // namespace dlock
