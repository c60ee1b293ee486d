// The PostgreSQL backend against a real server started once for this program: what the
// contract suite cannot show (the table, stored bytes, the database's faults). Each test
// keeps to its own service namespace, or its own database where it changes the schema.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <atomic>
#include <thread>

#include "dlock/admin.hpp"
#include "dlock/dlock.hpp"
#include "fixtures.hpp"
#include "postgres_fixture.hpp"
#include "settler.hpp"

namespace dlock::test {
namespace {

TEST(Postgres, TheTablesAreCreatedInAFreshDatabaseAndInASchema) {
  server().create_database("fresh");
  server().exec("CREATE SCHEMA app", "fresh");
  for (const std::string table : {"dlock_locks", "app.locks"}) {
    Client client(config_for(server().dsn("fresh"), table));
    Lease lease = client.acquire("k", settings(10s));
    ASSERT_TRUE(lease) << table << ": " << lease.error();
    EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  }
  const PostgresRows tables = server().exec(
      "SELECT table_schema || '.' || table_name FROM information_schema.tables "
      "WHERE table_name LIKE '%lock%' AND table_schema IN ('public', 'app') ORDER BY 1",
      "fresh");
  std::vector<std::string> names;
  for (const auto& row : tables) names.push_back(row.at(0));
  EXPECT_EQ(names, (std::vector<std::string>{"app.locks", "app.locks_audit", "app.locks_runs",
                                             "public.dlock_locks", "public.dlock_locks_audit",
                                             "public.dlock_locks_runs"}));
}

TEST(Postgres, AnExistingTableIsUsedByARoleThatMayNotCreateTables) {
  server().create_database("locked_down");
  Client(config_for(server().dsn("locked_down"))).acquire("warm", settings(10s)).release();
  server().exec(
      "CREATE ROLE app LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC; "
      "GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_locks, dlock_locks_runs, dlock_locks_audit "
      "TO app; GRANT USAGE ON SEQUENCE dlock_locks_audit_seq_seq TO app",
      "locked_down");
  const std::string dsn =
      fmt::format("postgresql://app@127.0.0.1:{}/locked_down", server().port());
  Lease lease = Client(config_for(dsn)).acquire("k", settings(10s));
  EXPECT_TRUE(lease) << lease.error();
  // Where the table is missing and cannot be made, the error says so.
  Lease refused = Client(config_for(dsn, "other_locks")).try_acquire("k", settings(10s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(refused.error().find("cannot create the lock table \"public\".\"other_locks\""),
            std::string::npos)
      << refused.error();
}

TEST(Postgres, TwoRolesWithSchemasOfTheirOwnShareOneTable) {
  // PostgreSQL 15's advice: a schema per role, found first in its search_path. An
  // unqualified table name would then mean one table per role, and no exclusion.
  server().create_database("per_role");
  server().exec(
      "REVOKE CREATE ON SCHEMA public FROM PUBLIC; CREATE ROLE svc_a LOGIN; "
      "CREATE ROLE svc_b LOGIN; CREATE SCHEMA svc_a AUTHORIZATION svc_a; "
      "CREATE SCHEMA svc_b AUTHORIZATION svc_b",
      "per_role");
  Client(config_for(server().dsn("per_role"))).acquire("warm", settings(10s)).release();
  server().exec(
      "GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_locks, dlock_locks_runs, "
      "dlock_locks_audit TO svc_a, svc_b",
      "per_role");
  const auto as = [&](const std::string& role) {
    Config c = config_for(fmt::format("postgresql://{}@127.0.0.1:{}/per_role", role, server().port()));
    c.service = "shared";
    return c;
  };
  Client a(as("svc_a")), b(as("svc_b"));
  Lease held = a.acquire("invoice:42", settings(10s));
  ASSERT_TRUE(held) << held.error();
  EXPECT_EQ(b.try_acquire("invoice:42", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(server().exec("SELECT count(*) FROM pg_tables WHERE tablename = 'dlock_locks'",
                          "per_role")[0][0],
            "1");
}

TEST(Postgres, ASerializableDatabaseDefaultStillGivesBusyNotErrors) {
  server().create_database("serializable");
  server().exec("ALTER DATABASE serializable SET default_transaction_isolation = 'serializable'");
  Client a(config_for(server().dsn("serializable"))), b(config_for(server().dsn("serializable")));
  std::atomic<int> busy{0}, unavailable{0};
  std::vector<std::thread> threads;
  for (Client* c : {&a, &b, &a, &b}) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < 50; ++i) {
        Lease lease = c->try_acquire("contended", settings(10s));
        if (lease.status() == AcquireStatus::kBusy) ++busy;
        if (lease.status() == AcquireStatus::kUnavailable) ++unavailable;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(busy.load(), 0);
  EXPECT_EQ(unavailable.load(), 0);
}

TEST(Postgres, ATableOfAnotherLayoutIsNamedNotMetByFailingStatements) {
  server().create_database("old_layout");
  server().exec(
      "CREATE TABLE dlock_locks (service text, key bytea, owner text, PRIMARY KEY (service, key));"
      "CREATE TABLE dlock_locks_runs (service text); CREATE TABLE dlock_locks_audit (seq int)",
      "old_layout");
  Lease refused = Client(config_for(server().dsn("old_layout"))).try_acquire("k", settings(10s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(refused.error().find("has another layout"), std::string::npos) << refused.error();
}

TEST(Postgres, AServiceThatIsNotPostgresTextIsAConfigError) {
  Config c = config();
  c.service = std::string("svc\0one", 7);
  EXPECT_THROW(Client{c}, ConfigError);
  c.service = "\xff\xfe";
  EXPECT_THROW(Client{c}, ConfigError);
}

TEST(Postgres, TheFirstWaiterDoesNotWaitLongerThanAFailedListen) {
  // The role may hold one connection: the pool's. The listener's is refused at once.
  server().create_database("one_conn");
  Client holder(config_for(server().dsn("one_conn")));
  Lease held = holder.acquire("k", settings(10s));
  ASSERT_TRUE(held);
  server().exec(
      "CREATE ROLE lonely LOGIN CONNECTION LIMIT 1; GRANT SELECT, INSERT, UPDATE, DELETE ON "
      "dlock_locks, dlock_locks_runs, dlock_locks_audit TO lonely",
      "one_conn");
  Config c = config_for(fmt::format("postgresql://lonely@127.0.0.1:{}/one_conn", server().port()));
  c.backends["default"].pool_size = 1;
  Client waiter(c);
  const auto start = Clock::now();
  Lease refused = waiter.acquire("k", settings(10s, 100ms));
  EXPECT_EQ(refused.status(), AcquireStatus::kBusy);
  EXPECT_LT(ms_since(start), 100 + 400);
}

TEST(Postgres, AnyKeyBytesAreStoredAsGivenAndWakeTheirOwnWaiters) {
  Client a(config()), b(config());
  const std::string keys[] = {std::string("nul\0byte", 8), "\xff\xfe not utf-8", "",
                              std::string(100000, 'x'), "quote\"back\\slash"};
  for (const std::string& key : keys) {
    Lease held = a.acquire(key, settings(10s));
    ASSERT_TRUE(held) << held.error();
    EXPECT_EQ(b.try_acquire(key, settings(10s)).status(), AcquireStatus::kBusy);
    std::thread release([&] {
      std::this_thread::sleep_for(100ms);
      held.release();
    });
    const auto start = Clock::now();
    Lease next = b.acquire(key, settings(10s, 5s));
    release.join();
    EXPECT_TRUE(next) << next.error();
    // Woken by the notification, not by the 250 ms poll.
    EXPECT_LT(ms_since(start), 100 + 200);
    const auto info = Admin(a).inspect(key);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->key, key);
    EXPECT_EQ(info->token, next.token());
  }
}

// A raw connection LISTENing on the lock table's channel, counting what it hears.
class Listener {
 public:
  Listener() : conn_(PQconnectdb(server().dsn().c_str())) {
    PQclear(PQexec(conn_, "LISTEN dlock_locks"));
  }
  ~Listener() { PQfinish(conn_); }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  /// Notifications heard within `window`.
  int heard(std::chrono::milliseconds window) {
    int count = 0;
    const auto until = Clock::now() + window;
    while (Clock::now() < until) {
      pollfd p{PQsocket(conn_), POLLIN, 0};
      ::poll(&p, 1, 10);
      PQconsumeInput(conn_);
      while (PGnotify* note = PQnotifies(conn_)) {
        ++count;
        PQfreemem(note);
      }
    }
    return count;
  }

 private:
  PGconn* conn_;
};

TEST(Postgres, AReleaseNotifiesOnlyWhileSomeoneWaits) {
  Listener listener;
  Client a(config()), b(config());
  for (int i = 0; i < 3; ++i) a.acquire("quiet", settings(10s)).release();
  EXPECT_EQ(listener.heard(300ms), 0) << "nobody waited";
  Lease held = a.acquire("busy", settings(10s));
  ASSERT_TRUE(held);
  Lease got;
  std::thread waiter([&] { got = b.acquire("busy", settings(10s, 5s)); });
  ASSERT_TRUE(wait_until([&] { return b.metrics().waits == 1; }, 2s, 5ms));
  std::this_thread::sleep_for(100ms);  // the waiter's try after its watch is armed
  held.release();
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(listener.heard(300ms), 1);
}

TEST(Postgres, EachStatementOfAThreadIsAppliedAfterItsReleaseWhoseAnswerItDidNotWaitFor) {
  // A lease's destructor sends the release and goes on; the thread's next statement goes
  // out on the same connection behind it, so the key is free for it every time.
  Client a(config());
  for (int i = 0; i < 200; ++i) {
    Lease lease = a.try_acquire("again and again", settings(10s));
    ASSERT_TRUE(lease) << "round " << i << ": " << lease.error();
  }
  EXPECT_TRUE(wait_until([&] { return a.metrics().releases == 200; }, 2s, 5ms));
}

TEST(Postgres, AReleaseRefusedAtCommitFailsOnlyItself) {
  // A deferred trigger refuses, at commit, the release of one key: the refusal arrives after
  // the statement's own answer, and the statements behind it on the connection are not
  // taken for it.
  server().create_database("commit_refused");
  const std::string dsn = server().dsn("commit_refused");
  Client a(config_for(dsn));
  a.acquire("create", settings(10s)).release();
  server().exec(
      "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF NEW.key = 'refused'::bytea AND NEW.owner IS NULL THEN RAISE EXCEPTION 'no'; END IF; "
      "RETURN NEW; END $$; "
      "CREATE CONSTRAINT TRIGGER refuse AFTER UPDATE ON dlock_locks DEFERRABLE INITIALLY "
      "DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse()",
      "commit_refused");
  { Lease held = a.acquire("refused", settings(10s)); ASSERT_TRUE(held); }
  for (int i = 0; i < 3; ++i) {
    Lease next = a.try_acquire(fmt::format("next {}", i), settings(10s));
    EXPECT_TRUE(next) << i << ": " << next.error();
    EXPECT_EQ(next.release(), ReleaseStatus::kReleased);
  }
  // The refused release, sent once more from the settler, was refused again: the key stays
  // held until its lease ends.
  EXPECT_FALSE(Client(config_for(dsn)).try_acquire("refused", settings(10s)));
}

TEST(Postgres, AConnectionLostWithAReleaseInFlightFailsOnlyThatRelease) {
  const std::string app = "dlock-in-flight";
  Config c = config_for(server().dsn() + "?application_name=" + app);
  // Long enough that the release waiting for the row lock is cut off by the kill, not
  // refused by its lock timeout first.
  c.backends["default"].command_timeout = 5s;
  Client a(c);
  Lease other = a.acquire("other", settings(10s));
  ASSERT_TRUE(other);
  PostgresClient blocker(server().dsn());
  // The settler (which reads answers nobody came back for) is kept busy meanwhile, so that
  // the thread's next call is the first to look at its connection.
  auto settler_free = std::make_shared<std::atomic<bool>>(false);
  internal::settler::post([settler_free] {
    wait_until([&] { return settler_free->load(); }, 5s, 5ms);
  });
  struct Free {
    std::shared_ptr<std::atomic<bool>> flag;
    ~Free() { *flag = true; }
  } free_on_exit{settler_free};
  {
    Lease held = a.acquire("in flight", settings(10s));
    ASSERT_TRUE(held);
    // The row is locked elsewhere: the destructor's release waits for it on the server.
    blocker.exec(fmt::format("BEGIN; SELECT 1 FROM dlock_locks WHERE service = '{}' AND "
                             "key = 'in flight'::bytea FOR UPDATE",
                             unique_service()));
  }
  std::this_thread::sleep_for(100ms);
  EXPECT_GE(server().kill_backends_of(app), 1);
  blocker.exec("ROLLBACK");
  // The thread's next statement goes out on a new connection, not behind the lost release,
  // which was not applied (its key expires with its lease); the release after it is.
  std::this_thread::sleep_for(50ms);
  Lease next = a.try_acquire("next", settings(10s));
  *settler_free = true;
  EXPECT_TRUE(next) << next.error();
  EXPECT_EQ(other.release(), ReleaseStatus::kReleased);
  Client b(config());
  EXPECT_FALSE(b.try_acquire("in flight", settings(10s)));
  EXPECT_EQ(a.metrics().releases, 1u);
}

TEST(Postgres, TokensKeepIncreasingWhenTheRowsAreGone) {
  Client a(config());
  Lease first = a.acquire("swept", settings(10s));
  ASSERT_TRUE(first);
  const std::uint64_t token = first.token();
  ASSERT_EQ(first.release(), ReleaseStatus::kReleased);
  server().exec(fmt::format("DELETE FROM dlock_locks WHERE service = '{}'", unique_service()));
  Lease second = a.acquire("swept", settings(10s));
  ASSERT_TRUE(second);
  EXPECT_GT(second.token(), token);
}

TEST(Postgres, RowsFreeForAWeekAndRunRecordsPastTheirTimeAreSwept) {
  server().create_database("swept");
  const std::string dsn = server().dsn("swept");
  Client(config_for(dsn)).acquire("create", settings(10s)).release();
  server().exec(
      "INSERT INTO dlock_locks (service, key_hash, key, owner, token, expires_at) VALUES "
      "('s', sha256('old'), 'old', NULL, 1, now() - interval '8 days'), "
      "('s', sha256('recent'), 'recent', NULL, 2, now() - interval '6 days'), "
      "('s', sha256('dead holder'), 'dead holder', 'x', 3, now() - interval '8 days');"
      "INSERT INTO dlock_locks_runs (service, key_hash, key, owner, token, name, label, host, "
      "pid, started_at, outcome, expires_at) VALUES ('s', sha256('run'), 'run', 'x', 1, '', '', "
      "'', 1, now(), 'ok', now() - interval '1 second')",
      "swept");
  // A new client's first release sweeps (then every 10 minutes), in the background.
  Client(config_for(dsn)).acquire("k", settings(10s)).release();
  EXPECT_TRUE(wait_until(
      [&] {
        return server().exec("SELECT count(*) FROM dlock_locks_runs", "swept")[0][0] == "0";
      },
      2s));
  const PostgresRows left =
      server().exec("SELECT convert_from(key, 'UTF8') FROM dlock_locks WHERE service = 's'", "swept");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0][0], "recent");
}

TEST(Postgres, ARowDeletedUnderAHolderIsALossTheWatchdogReports) {
  Client a(config());
  Lease lease = a.acquire("vanishing", settings(600ms));
  ASSERT_TRUE(lease);
  server().exec(fmt::format("DELETE FROM dlock_locks WHERE service = '{}'", unique_service()));
  EXPECT_TRUE(wait_until([&] { return lease.lost(); }, 2s, 10ms));
  EXPECT_EQ(lease.release(), ReleaseStatus::kLost);
}

TEST(Postgres, AStoppedServerCostsACallItsTimeoutAndNothingMore) {
  Client a(config());
  Lease held = a.acquire("stalled", settings(10s));
  ASSERT_TRUE(held);
  server().pause();
  auto start = Clock::now();
  Lease refused = a.try_acquire("other", settings(10s));
  const auto acquire_ms = ms_since(start);
  start = Clock::now();
  const ReleaseStatus released = held.release();
  const auto release_ms = ms_since(start);
  server().resume();
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_LE(acquire_ms, 500 + 300);
  EXPECT_NE(released, ReleaseStatus::kReleased);
  EXPECT_LE(release_ms, 500 + 300);
  // Back: the pool drops the connections that timed out and opens new ones.
  EXPECT_TRUE(wait_until([&] { return bool(a.try_acquire("after", settings(10s))); }, 5s, 50ms));
}

TEST(Postgres, AfterARestartPooledConnectionsAreReplacedAndWaitersAreStillWoken) {
  Config c = config();
  c.backends["default"].poll_interval = 5s;  // a wake-up must come from a notification
  Client a(c), b(c);
  Lease before = a.acquire("before", settings(10s));
  ASSERT_TRUE(before);
  // b waits once, so that its listener runs when the server goes down.
  EXPECT_EQ(b.acquire("before", settings(10s, 100ms)).status(), AcquireStatus::kBusy);
  server().restart();
  Lease held = a.acquire("restart", settings(10s));
  ASSERT_TRUE(held) << held.error();
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = bool(b.acquire("restart", settings(10s, 8s))); });
  // The waiter's listener reconnects after the restart; once it listens, a release wakes it.
  ASSERT_TRUE(wait_until([&] { return b.metrics().waits == 2; }, 2s, 5ms));
  std::this_thread::sleep_for(1500ms);
  const auto released = Clock::now();
  held.release();
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_LT(ms_since(released), 1000);
}

TEST(Postgres, AForcedReleaseIsAuditedAndWakesTheWaiter) {
  Config c = config();
  c.backends["default"].poll_interval = 5s;
  Client a(c), b(c);
  Lease held = a.acquire("stuck", settings(900ms));  // renewed every 300 ms
  ASSERT_TRUE(held);
  std::atomic<bool> got{false};
  std::thread waiter([&] { got = bool(b.acquire("stuck", settings(10s, 4s))); });
  ASSERT_TRUE(wait_until([&] { return b.metrics().waits == 1; }, 2s, 5ms));
  const auto removed = Admin(b).force_release("stuck", "holder hung");
  const auto forced = Clock::now();
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_LT(ms_since(forced), 1000);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->token, held.token());
  const auto history = Admin(b).history(10);
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].key, "stuck");
  EXPECT_EQ(history[0].note, "holder hung");
  EXPECT_EQ(history[0].token, held.token());
  EXPECT_TRUE(wait_until([&] { return held.lost(); }, 2s, 10ms));
}

TEST(Postgres, AYamlFileWithOnlyTheBackendChangedRunsTheSameCode) {
  YamlFile file(fmt::format(R"(service: {}
backends:
  default:
    topology: postgres
    dsn: "{}"
    table: yaml_locks
)",
                            unique_service(), server().dsn()));
  Client client(load_config(file.path()));
  Lease lease = client.acquire("k", settings(10s));
  ASSERT_TRUE(lease) << lease.error();
  EXPECT_EQ(server().exec("SELECT count(*) FROM yaml_locks WHERE owner IS NOT NULL").at(0).at(0),
            "1");
}

TEST(Postgres, DlockctlListsInspectsAndForceReleasesLocksInTheTable) {
  YamlFile file(fmt::format(R"(service: {}
backends:
  default:
    topology: postgres
    dsn: "{}"
)",
                            unique_service(), server().dsn()));
  const auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {DLOCK_CTL, "--config", file.path()});
    return run_command(args, 15s);
  };
  Client client(load_config(file.path()));
  Lease held = client.acquire("order:7", settings(10s));
  ASSERT_TRUE(held);
  EXPECT_EQ(ctl({"check-config"}).status, 0);
  const CommandResult list = ctl({"list", "order:*"});
  EXPECT_EQ(list.status, 0);
  EXPECT_NE(list.output.find("order:7"), std::string::npos) << list.output;
  const CommandResult inspect = ctl({"--json", "inspect", "order:7"});
  EXPECT_EQ(inspect.status, 0);
  EXPECT_NE(inspect.output.find(std::to_string(held.token())), std::string::npos) << inspect.output;
  EXPECT_EQ(ctl({"release", "order:7", "--force", "--note", "stuck"}).status, 0);
  EXPECT_EQ(ctl({"inspect", "order:7"}).status, 1);
  const CommandResult history = ctl({"history"});
  EXPECT_NE(history.output.find("stuck"), std::string::npos) << history.output;
}

TEST(Postgres, AnUnreachableDatabaseIsAClearErrorWithinTheConnectTimeout) {
  const int port = free_loopback_port();
  Client client(config_for(fmt::format("postgresql://dlock@127.0.0.1:{}/postgres", port)));
  const auto start = Clock::now();
  Lease refused = client.try_acquire("k", settings(10s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_LE(ms_since(start), 500 + 300);
  EXPECT_NE(refused.error().find("cannot reach the database"), std::string::npos)
      << refused.error();
}

}  // namespace
}  // namespace dlock::test
