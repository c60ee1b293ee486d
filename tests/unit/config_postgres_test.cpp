// The configuration of a postgres backend: `dsn` and `table`, and the keys it shares with the
// Redis backends and those it does not (docs/CONFIG.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "config_test_helpers.hpp"
#include "dlock/config.hpp"

namespace dlock {
namespace {

using namespace std::chrono_literals;

// A postgres backend named `default` with `settings`, each a line "key: value".
std::string postgres_backend(const std::string& settings) {
  return "backends:\n  default:\n    topology: postgres\n" + settings;
}

// A table name of `length` characters.
std::string name_of_length(std::size_t length) { return std::string(length, 't'); }

const std::string kTooLongTable =
    postgres_backend("    dsn: host=h\n    table: app." + name_of_length(58) + "\n");
const std::string kTooLongSchema =
    postgres_backend("    dsn: host=h\n    table: " + name_of_length(64) + ".locks\n");

const BadFile kBadPostgresFiles[] = {
    // Keys.
    {"WithoutDsnIsRefused", "backends:\n  default:\n    topology: postgres\n    table: locks\n",
     "3:5", "backends.default: missing required key 'dsn' for a postgres backend"},
    {"RedisCredentialsAreRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    password: hunter2\n",
     "5:5",
     "backends.default.password: does not apply to a postgres backend: hosts, credentials, "
     "database and TLS go in 'dsn'"},
    {"RedisDatabaseIsRefused",
     "backends:\n  default: {topology: postgres, dsn: host=h, database: 1}\n", "2:46",
     "backends.default.database: does not apply to a postgres backend: hosts, "
     "credentials, database and TLS go in 'dsn'"},
    {"RedisTlsBlockIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    tls: {verify: false}\n",
     "5:5",
     "backends.default.tls: does not apply to a postgres backend: hosts, credentials, "
     "database and TLS go in 'dsn'"},
    {"RedisAddressIsRefused",
     "backends:\n  default:\n    topology: postgres\n    address: 127.0.0.1:5432\n", "4:5",
     "backends.default.address: does not apply to a postgres backend: hosts, credentials, "
     "database and TLS go in 'dsn'"},
    {"SentinelKeyIsRefusedAsOne",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    master_name: m\n", "5:5",
     "backends.default.master_name: does not apply to a postgres backend (it is a "
     "sentinel setting)"},
    {"DsnOnASingleBackendIsRefused",
     "backends:\n  default:\n    topology: single\n    address: h\n    dsn: host=h\n", "5:5",
     "backends.default.dsn: does not apply to a single backend (it is a postgres setting); a "
     "single backend's server goes in 'address'"},
    {"TableOnARedlockBackendIsRefused",
     "backends:\n  default: {topology: redlock, instances: [a, b, c], table: locks}\n", "2:54",
     "backends.default.table: does not apply to a redlock backend (it is a postgres setting)"},
    {"DsnOnAMemoryBackendIsRefused", "backends:\n  default: {topology: memory, dsn: host=h}\n",
     "2:31", "backends.default.dsn: does not apply to a memory backend"},
    {"DsnInLockSettingsPointsToBackends", "defaults:\n  dsn: host=h\n", "2:3",
     "defaults.dsn: unknown key 'dsn' (backend settings go under 'backends')"},
    {"PoolSizeIsCheckedAsForRedis",
     "backends:\n  default: {topology: postgres, dsn: host=h, pool_size: 0}\n", "2:57",
     "backends.default.pool_size: must be between 1 and 1024, got 0"},

    // The dsn.
    {"EmptyDsnIsRefused", "backends:\n  default:\n    topology: postgres\n    dsn: \" \"\n", "4:10",
     "backends.default.dsn: must not be empty"},
    {"DsnAsListIsRefused", "backends:\n  default:\n    topology: postgres\n    dsn: [h]\n", "4:10",
     "backends.default.dsn: expected a connection string, got a list"},
    {"UnsetVariableInDsnIsRefused",
     "backends:\n  default:\n    topology: postgres\n"
     "    dsn: postgresql://app:${DLOCK_TEST_SURELY_UNSET}@h/app\n",
     "4:10", "backends.default.dsn: environment variable 'DLOCK_TEST_SURELY_UNSET' is not set"},
    {"UnknownDsnOptionIsRefusedWithLibpqsMessage",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h hots=x\n", "4:10",
     "backends.default.dsn: libpq refuses it: invalid connection option \"hots\""},
    {"UnknownUrlParameterIsRefusedWithLibpqsMessage",
     "backends:\n  default:\n    topology: postgres\n    dsn: postgresql://h/app?colour=red\n",
     "4:10", "backends.default.dsn: libpq refuses it: invalid URI query parameter: \"colour\""},
    {"UrlOfAnotherSchemeIsRefused",
     "backends:\n  default:\n    topology: postgres\n"
     "    dsn: jdbc:postgresql://app:hunter2@h/app\n",
     "4:10", "backends.default.dsn: a URL must start with postgresql:// or postgres://"},
    {"ABadDsnHidesTheUrlPasswordLibpqQuotes",
     "backends:\n  default:\n    topology: postgres\n    dsn: postgresql://app:hunter2%zz@h/app\n",
     "4:10", "backends.default.dsn: libpq refuses it: invalid percent-encoded token: \"***\""},
    {"ABadDsnHidesThePasswordInAQuotedUrl",
     "backends:\n  default:\n    topology: postgres\n    dsn: \"postgresql://app:hunter2@[::1\"\n",
     "4:10",
     "libpq refuses it: end of string reached when looking for matching \"]\" in IPv6 host "
     "address in URI: \"postgresql://app:***@[::1\""},
    {"ABadDsnHidesThePasswordKeywordsValue",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h password=hunter2 hunter2\n",
     "4:10",
     "backends.default.dsn: libpq refuses it: missing \"=\" after \"***\" in connection info "
     "string"},
    {"APasswordWithAnUnencodedSlashIsCaughtByItsPort",
     "backends:\n  default:\n    topology: postgres\n"
     "    dsn: postgresql://app:hunter2/x@h:5432/app\n",
     "4:10",
     "backends.default.dsn: a port in the dsn is not a number between 1 and 65535 (write a '/', "
     "'@' or ':' in a user name or password as %2F, %40 or %3A)"},
    {"SeveralHostsWithoutTargetSessionAttrsAreRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=pg1,pg2 dbname=app\n", "4:10",
     "backends.default.dsn: the dsn lists 2 hosts without target_session_attrs: libpq takes "
     "the first host that answers, which can be a read-only standby, or a former primary after "
     "a failover; set target_session_attrs=read-write (or primary)"},
    {"SeveralUrlHostsWithoutTargetSessionAttrsAreRefused",
     "backends:\n  default:\n    topology: postgres\n"
     "    dsn: postgresql://pg1:5432,pg2:5432,pg3:5432/app\n",
     "4:10", "backends.default.dsn: the dsn lists 3 hosts without target_session_attrs:"},
    {"SeveralHostsWithTargetSessionAttrsAnyAreRefused",
     "backends:\n  default:\n    topology: postgres\n"
     "    dsn: postgresql://pg1,pg2/app?target_session_attrs=any\n",
     "4:10",
     "backends.default.dsn: the dsn lists 2 hosts with target_session_attrs=any: libpq takes"},
    {"SeveralHostAddressesAreSeveralHosts",
     "backends:\n  default:\n    topology: postgres\n    dsn: hostaddr=10.0.0.1,10.0.0.2\n", "4:10",
     "backends.default.dsn: the dsn lists 2 hosts without target_session_attrs"},

    // The table.
    {"TableStartingWithADigitIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table: 9locks\n", "5:12",
     "backends.default.table: '9locks' is not a table name: write name or schema.name, each of "
     "letters, digits and '_', not starting with a digit"},
    {"TableWithADashIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table: my-locks\n",
     "5:12", "backends.default.table: 'my-locks' is not a table name"},
    {"TableWithTwoDotsIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table: db.app.locks\n",
     "5:12", "backends.default.table: 'db.app.locks' is not a table name"},
    {"TableWithAnEmptySchemaIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table: .locks\n", "5:12",
     "backends.default.table: '.locks' is not a table name"},
    {"EmptyTableIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table: \"\"\n", "5:12",
     "backends.default.table: '' is not a table name"},
    {"MissingTableIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table:\n", "5:5",
     "backends.default.table: missing value; expected a table name"},
    {"UpperCaseTableSuggestsTheLowerCaseName",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table: App.Locks\n",
     "5:12",
     "backends.default.table: 'App.Locks' has upper-case letters: dlock quotes the name, so the "
     "table would not be app.locks, which is what App.Locks means unquoted in SQL; write "
     "'app.locks'"},
    {"TableInAPgSchemaIsRefused",
     "backends:\n  default:\n    topology: postgres\n    dsn: host=h\n    table: pg_temp.locks\n",
     "5:12",
     "backends.default.table: schema 'pg_temp' is reserved: names starting with 'pg_' are "
     "PostgreSQL's own (in pg_temp each connection would have a table of its own, and no lock "
     "would be shared); use another schema"},
    {"TableNameTooLongForItsSuffixesIsRefused", kTooLongTable.c_str(), "5:12",
     "backends.default.table: the table name 'tttttttttttttttttttttttttttttttttttttttttttttttttt"
     "tttttttt' is longer than 57 characters: dlock also creates <table>_runs and "
     "<table>_audit, and PostgreSQL names are at most 63 bytes"},
    {"SchemaNameTooLongIsRefused", kTooLongSchema.c_str(), "5:12",
     "' is longer than 63 characters, the limit of PostgreSQL names"},
};

INSTANTIATE_TEST_SUITE_P(Postgres, MalformedFile, testing::ValuesIn(kBadPostgresFiles), row_name);

// ---------------------------------------------------------------------------------------
// Well-formed backends.

class PostgresBackend : public testing::Test {
 protected:
  void SetUp() override { ::setenv("DLOCK_TEST_PGPASSWORD", "s3cret", 1); }
  void TearDown() override {
    ::unsetenv("DLOCK_TEST_PGPASSWORD");
    ::unsetenv("DLOCK_TEST_DSN");
  }

  // The `default` backend of a file that gives it these settings.
  static BackendConfig loaded(const std::string& settings) {
    return parse_config(postgres_backend(settings), kSource).backends.at("default");
  }
};

TEST_F(PostgresBackend, TheDesignsExampleLoadsWithItsPasswordFromTheEnvironment) {
  const Config config = parse_config(R"(
backends:
  db:
    topology: postgres
    dsn: "postgresql://dlock:${DLOCK_TEST_PGPASSWORD}@127.0.0.1:5432/app"
    table: dlock_locks             # created if missing
defaults: {backend: db}
)",
                                     kSource);
  const BackendConfig& db = config.backends.at("db");
  EXPECT_EQ(db.topology, Topology::kPostgres);
  EXPECT_EQ(db.dsn, "postgresql://dlock:s3cret@127.0.0.1:5432/app");
  EXPECT_EQ(db.table, "dlock_locks");
  EXPECT_TRUE(db.endpoints.empty());
  EXPECT_EQ(config.resolve("g", "", {}).backend, "db");
}

TEST_F(PostgresBackend, TheTableIsDlockLocksUnlessGiven) {
  EXPECT_EQ(loaded("    dsn: host=h\n").table, "dlock_locks");
  EXPECT_EQ(loaded("    dsn: host=h\n    table: locks\n").table, "locks");
  EXPECT_EQ(loaded("    dsn: host=h\n    table: app.dlock_locks_2\n").table, "app.dlock_locks_2");
  const std::string longest = name_of_length(63) + "._" + name_of_length(56);
  EXPECT_EQ(loaded("    dsn: host=h\n    table: " + longest + "\n").table, longest);
}

TEST_F(PostgresBackend, ReadsTheConnectionKeysItSharesWithRedis) {
  const BackendConfig backend = loaded(
      "    dsn: host=h\n    connect_timeout: 250ms\n    command_timeout: 2s\n"
      "    poll_interval: 50ms\n    pool_size: 16\n");
  EXPECT_EQ(backend.connect_timeout, 250ms);
  EXPECT_EQ(backend.command_timeout, 2s);
  EXPECT_EQ(backend.poll_interval, 50ms);
  EXPECT_EQ(backend.pool_size, 16);
}

TEST_F(PostgresBackend, KeywordAndUrlFormsAreKeptAsWritten) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"host=db.internal port=5433 dbname=app user=dlock sslmode=verify-full",
       "host=db.internal port=5433 dbname=app user=dlock sslmode=verify-full"},
      {"'host=h password=''a b'''", "host=h password='a b'"},
      {"postgres://h/app?sslmode=disable", "postgres://h/app?sslmode=disable"},
      {"postgresql:///app?host=/var/run/postgresql", "postgresql:///app?host=/var/run/postgresql"},
      {"\"postgresql://[::1]:5432/app?application_name=shop\"",
       "postgresql://[::1]:5432/app?application_name=shop"},
  };
  for (const auto& [written, dsn] : cases) {
    EXPECT_EQ(loaded("    dsn: " + written + "\n").dsn, dsn);
  }
}

TEST_F(PostgresBackend, SeveralHostsLoadWithTargetSessionAttrsReadWriteOrPrimary) {
  for (const std::string dsn : {"host=pg1,pg2 target_session_attrs=read-write",
                                "postgresql://pg1:5432,pg2:5433/app?target_session_attrs=primary",
                                "hostaddr=10.0.0.1,10.0.0.2 target_session_attrs=read-write"}) {
    EXPECT_EQ(loaded("    dsn: " + dsn + "\n").dsn, dsn);
  }
}

// A value from the environment in a URL's user info is taken as it is: percent-encoded for
// libpq, which decodes it, so that a '/' or '@' in it cannot move the host.
TEST_F(PostgresBackend, AnEnvironmentPasswordInAUrlIsPercentEncoded) {
  ::setenv("DLOCK_TEST_PGPASSWORD", "p@ss/w:rd%41 x", 1);
  EXPECT_EQ(loaded("    dsn: postgresql://dlock:${DLOCK_TEST_PGPASSWORD}@h:5432/app\n").dsn,
            "postgresql://dlock:p%40ss%2Fw%3Ard%2541%20x@h:5432/app");
  // What the file itself writes there is left for libpq to decode.
  EXPECT_EQ(loaded("    dsn: postgresql://dl%40ck:x%2F${DLOCK_TEST_PGPASSWORD}@h/app\n").dsn,
            "postgresql://dl%40ck:x%2Fp%40ss%2Fw%3Ard%2541%20x@h/app");
  // Outside the user info, and in the keyword form, a value is inserted as it is.
  ::setenv("DLOCK_TEST_PGPASSWORD", "pg1:5432,pg2:5432", 1);
  EXPECT_EQ(loaded("    dsn: postgresql://${DLOCK_TEST_PGPASSWORD}/app?target_session_attrs="
                   "read-write\n")
                .dsn,
            "postgresql://pg1:5432,pg2:5432/app?target_session_attrs=read-write");
  ::setenv("DLOCK_TEST_PGPASSWORD", "a%41", 1);
  EXPECT_EQ(loaded("    dsn: host=h password=${DLOCK_TEST_PGPASSWORD}\n").dsn,
            "host=h password=a%41");
}

TEST_F(PostgresBackend, AWholeDsnFromTheEnvironmentIsReadAsIfWrittenInTheFile) {
  ::setenv("DLOCK_TEST_DSN", "postgresql://app:a%2Fb@h/app", 1);
  EXPECT_EQ(loaded("    dsn: ${DLOCK_TEST_DSN}\n").dsn, "postgresql://app:a%2Fb@h/app");
  ::setenv("DLOCK_TEST_DSN", "host=a,b", 1);
  const std::string message = error_of(postgres_backend("    dsn: ${DLOCK_TEST_DSN}\n"));
  EXPECT_EQ(message.rfind("test.yaml:4:10: error: backends.default.dsn: the dsn lists 2 hosts", 0),
            0u)
      << message;
}

TEST_F(PostgresBackend, AnEnvironmentPasswordNeverAppearsInADsnError) {
  ::setenv("DLOCK_TEST_PGPASSWORD", kSecret, 1);
  for (const char* dsn : {"postgresql://app:${DLOCK_TEST_PGPASSWORD}@[::1/app",
                          "host=h password=${DLOCK_TEST_PGPASSWORD} ${DLOCK_TEST_PGPASSWORD}",
                          "\"host=h password='${DLOCK_TEST_PGPASSWORD}\"",
                          "postgresql://h/app?password=${DLOCK_TEST_PGPASSWORD}%zz"}) {
    const std::string message = error_of(postgres_backend(std::string("    dsn: ") + dsn + "\n"));
    EXPECT_NE(message.find("libpq refuses it"), std::string::npos) << message;
    EXPECT_EQ(message.find(kSecret), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------
// Warnings.

TEST_F(PostgresBackend, AConnectTimeoutInTheDsnIsWarnedAboutAndTheBackendKeyWins) {
  const auto lines = warnings_of(postgres_backend(
      "    dsn: postgresql://h/app?connect_timeout=10\n    connect_timeout: 2s\n"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "test.yaml:4:10: warning: backends.default.dsn: connect_timeout in the dsn does not "
            "apply: the backend's connect_timeout (2s) bounds the connection; set it there");
  const auto keyword = warnings_of(postgres_backend("    dsn: host=h connect_timeout=10\n"));
  ASSERT_EQ(keyword.size(), 1u);
  EXPECT_NE(keyword[0].find("the backend's connect_timeout (1s)"), std::string::npos) << keyword[0];
}

TEST_F(PostgresBackend, APlainDsnIsNotWarnedAbout) {
  EXPECT_TRUE(
      warnings_of(postgres_backend("    dsn: postgresql://h/app?sslmode=disable\n")).empty());
}

TEST_F(PostgresBackend, ALeaseNoLongerThanTheCommandTimeoutIsWarnedAbout) {
  const auto lines = warnings_of(postgres_backend("    dsn: host=h\n    command_timeout: 1s\n") +
                                 "defaults: {lease: 1s}\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("defaults.lease: 1s is not longer than the command_timeout (1s)"),
            std::string::npos)
      << lines[0];
}

TEST(PostgresSample, LoadsAsTheDesignDescribes) {
  const Config config = load_config(std::string(DLOCK_SAMPLES_DIR) + "/postgres.yaml");
  const BackendConfig& backend = config.backends.at("default");
  EXPECT_EQ(backend.topology, Topology::kPostgres);
  EXPECT_EQ(backend.table, "dlock_locks");
  EXPECT_EQ(backend.dsn, "postgresql://dlock@127.0.0.1:5432/app");
}

}  // namespace
}  // namespace dlock
