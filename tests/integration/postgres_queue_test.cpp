// A key's queue on PostgreSQL (runtime/src/postgres/pg_queue_sql.hpp) against the real server
// of postgres_test.cpp: what the contract suite's kinds tests do not show (the table of an
// earlier version, the sweep, tokens across the row's holder and its queue, notifications).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <thread>

#include "dlock/dlock.hpp"
#include "postgres_fixture.hpp"

namespace dlock::test {
namespace {

LockSettings kind(Millis lease, Millis wait, LockMode mode, int permits = 0) {
  LockSettings s = settings(lease, wait);
  s.mode = mode;
  s.permits = permits;
  return s;
}

// The tables as the version before queues made them (waited_until, no queue columns).
constexpr const char* kEarlierTables = R"(
CREATE TABLE dlock_locks (
  service text NOT NULL, key_hash bytea NOT NULL, key bytea NOT NULL, owner text, token bigint NOT NULL,
  expires_at timestamptz NOT NULL, released boolean NOT NULL DEFAULT false,
  lease_ms bigint NOT NULL DEFAULT 0, name bytea NOT NULL DEFAULT '', host bytea NOT NULL DEFAULT '',
  pid bigint NOT NULL DEFAULT 0, thread bigint NOT NULL DEFAULT 0, acquired_at timestamptz,
  waited_until timestamptz, PRIMARY KEY (service, key_hash)) WITH (fillfactor = 70);
CREATE TABLE dlock_locks_runs (
  service text NOT NULL, key_hash bytea NOT NULL, key bytea NOT NULL, owner text NOT NULL, token bigint NOT NULL,
  name bytea NOT NULL, label bytea NOT NULL, host bytea NOT NULL, pid bigint NOT NULL,
  started_at timestamptz NOT NULL, finished_at timestamptz, outcome bytea NOT NULL,
  expires_at timestamptz NOT NULL, PRIMARY KEY (service, key_hash));
CREATE TABLE dlock_locks_audit (
  seq bigserial PRIMARY KEY, id text NOT NULL, service text NOT NULL, at timestamptz NOT NULL,
  "user" bytea NOT NULL, host bytea NOT NULL, pid bigint NOT NULL, note bytea NOT NULL,
  key bytea NOT NULL, owner text NOT NULL, token bigint NOT NULL, owner_host bytea NOT NULL,
  owner_pid bigint NOT NULL, owner_name bytea NOT NULL))";

TEST(PostgresQueue, AnEarlierVersionsTableGetsTheQueueColumnsAndKeepsItsHolders) {
  server().create_database("earlier");
  server().exec(kEarlierTables, "earlier");
  server().exec(
      "INSERT INTO dlock_locks (service, key_hash, key, owner, token, expires_at) VALUES "
      "('s', sha256('held'), 'held', 'someone', 5, now() + interval '1 minute')",
      "earlier");
  Config c = config_for(server().dsn("earlier"));
  c.service = "s";
  Client a(c), b(c);
  Lease read = a.acquire("doc", kind(10s, 0ms, LockMode::kShared));
  ASSERT_TRUE(read) << read.error();
  EXPECT_TRUE(b.acquire("doc", kind(10s, 0ms, LockMode::kShared)));
  EXPECT_EQ(b.try_acquire("held", settings(10s)).status(), AcquireStatus::kBusy)
      << "the earlier version's holder still holds";
  const PostgresRows columns = server().exec(
      "SELECT count(*) FROM information_schema.columns WHERE table_name = 'dlock_locks' "
      "AND column_name IN ('queue_token', 'queue', 'queue_until')",
      "earlier");
  EXPECT_EQ(columns[0][0], "3");
  // Gone, so that a process of the earlier version refuses the table instead of taking keys
  // that only a queue holds.
  const PostgresRows dropped = server().exec(
      "SELECT count(*) FROM information_schema.columns WHERE table_name = 'dlock_locks' "
      "AND column_name = 'waited_until'",
      "earlier");
  EXPECT_EQ(dropped[0][0], "0");
}

// A role that may only read and write the tables cannot add the columns: the error says
// what the table's owner must run.
TEST(PostgresQueue, AnEarlierTableARoleMayNotAlterNamesTheAlterToRun) {
  server().create_database("earlier_locked");
  server().exec(kEarlierTables, "earlier_locked");
  server().exec(
      "CREATE ROLE queue_app LOGIN; GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_locks, "
      "dlock_locks_runs, dlock_locks_audit TO queue_app",
      "earlier_locked");
  const std::string dsn =
      fmt::format("postgresql://queue_app@127.0.0.1:{}/earlier_locked", server().port());
  Lease refused = Client(config_for(dsn)).try_acquire("k", settings(10s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(refused.error().find("made by an earlier version of dlock"), std::string::npos)
      << refused.error();
  EXPECT_NE(refused.error().find("ALTER TABLE \"public\".\"dlock_locks\" ADD COLUMN"),
            std::string::npos)
      << refused.error();
}

// A key held only by its queue keeps its row's own expiry from long ago: the sweep must look
// at the queue's too.
TEST(PostgresQueue, ARowWhoseQueueLivesIsNotSwept) {
  server().create_database("queue_swept");
  const Config c = config_for(server().dsn("queue_swept"));
  Client a(c);
  Lease permit = a.acquire("export", kind(30s, 0ms, LockMode::kExclusive, 2));
  ASSERT_TRUE(permit) << permit.error();
  server().exec("UPDATE dlock_locks SET expires_at = now() - interval '8 days'", "queue_swept");
  // A new client's first release sweeps, in the background.
  Client(config_for(server().dsn("queue_swept"))).acquire("k", settings(10s)).release();
  std::this_thread::sleep_for(500ms);
  const PostgresRows left = server().exec(
      "SELECT count(*) FROM dlock_locks WHERE key = 'export'::bytea", "queue_swept");
  EXPECT_EQ(left[0][0], "1");
  EXPECT_EQ(permit.release(), ReleaseStatus::kReleased);
}

// Tokens increase across holders whichever way they came: the row's own (an exclusive try)
// and the queue's (shared holds, a waiting writer).
TEST(PostgresQueue, TokensIncreaseAcrossTheRowsHolderAndItsQueue) {
  Client a(config()), b(config());
  Lease first = a.acquire("doc", settings(10s));
  ASSERT_TRUE(first);
  const std::uint64_t t1 = first.token();
  Lease reader;
  std::thread waiting([&] { reader = b.acquire("doc", kind(10s, 5s, LockMode::kShared)); });
  ASSERT_TRUE(wait_until([&] { return b.metrics().waits == 1; }, 2s, 5ms));
  first.release();
  waiting.join();
  ASSERT_TRUE(reader) << reader.error();
  EXPECT_GT(reader.token(), t1);
  const std::uint64_t t2 = reader.token();
  reader.release();
  Lease next = a.acquire("doc", settings(10s));
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), t2);
}

// A release from a queue names the owners whose turn it may be; the listener tells those from
// a plain release by the ':' of an owner, whatever the service's name holds.
TEST(PostgresQueue, ATurnReachesItsWaiterWhenTheServiceHasSpacesAndColons) {
  Config c = config();
  c.service += " shop:floor 1";
  c.backends["default"].poll_interval = 5s;
  Client a(c), b(c);
  LockSettings fair = settings(10s, 4s);
  fair.fair = true;
  Lease held = a.acquire("ticket", fair);
  ASSERT_TRUE(held);
  Lease got;
  std::thread waiter([&] { got = b.acquire("ticket", fair); });
  ASSERT_TRUE(wait_until([&] { return b.metrics().contention >= 1; }, 2s, 5ms));
  std::this_thread::sleep_for(100ms);
  const auto released = Clock::now();
  held.release();
  waiter.join();
  ASSERT_TRUE(got) << got.error();
  EXPECT_LT(ms_since(released), 1000) << "woken by the turn, not by a poll";
  EXPECT_EQ(b.metrics().wakeups, 1u);
}

}  // namespace
}  // namespace dlock::test
