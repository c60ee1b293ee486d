#include "postgres/pg_statements.hpp"

#include <fmt/format.h>

#include "postgres/pg_queue_sql.hpp"

namespace dlock::internal {
namespace {

// `schema.name` as quoted identifiers, with `suffix` added to the name; `name` alone is in
// `public`. Always qualified: an unqualified name would be looked up through each session's
// search_path, and two roles with schemas of their own would lock in two tables.
std::string quoted(std::string_view table, std::string_view suffix) {
  const auto dot = table.find('.');
  if (dot == std::string_view::npos) return fmt::format("\"public\".\"{}{}\"", table, suffix);
  return fmt::format("\"{}\".\"{}{}\"", table.substr(0, dot), table.substr(dot + 1), suffix);
}

// What a lock row tells admin, for `l` and the clock `n`: key, owner, host, pid, thread,
// name, token, acquired (ms), lease (ms), time left (ms), released (kept for min_hold).
constexpr std::string_view kLockColumns =
    "encode(l.key, 'hex'), l.owner, encode(l.host, 'hex'), l.pid, l.thread, "
    "encode(l.name, 'hex'), l.token, (extract(epoch FROM l.acquired_at) * 1000)::int8, "
    "l.lease_ms, greatest(1, ceil(extract(epoch FROM (l.expires_at - n.t)) * 1000))::int8, "
    "l.released";

// The same for a run record `r`: key, name, label, owner, token, host, pid, started (ms),
// finished (ms, 0 while running), outcome, time left (ms).
constexpr std::string_view kRunColumns =
    "encode(r.key, 'hex'), encode(r.name, 'hex'), encode(r.label, 'hex'), r.owner, r.token, "
    "encode(r.host, 'hex'), r.pid, (extract(epoch FROM r.started_at) * 1000)::int8, "
    "coalesce((extract(epoch FROM r.finished_at) * 1000)::int8, 0), encode(r.outcome, 'hex'), "
    "greatest(1, ceil(extract(epoch FROM (r.expires_at - n.t)) * 1000))::int8";

// $1 service, $2 key (hex), $3 owner, $4 lease ms, $5 not-after (server µs, 0: none), $6 host
// (hex), $7 pid, $8 thread, $9 name (hex).
// Answers (token, lease ms) when granted; no row when the key is busy or the request arrived
// after its caller gave up (then nothing was taken; kBusy tells which), and while the key's
// queue has live entries (pg_queue_sql.hpp): those come first. A
// retry of an owner that already holds the key keeps its token and gets a full lease, like
// a renewal.
// The token is max(last + 1, the queue's last + 1, the clock in µs): it keeps increasing
// when a swept row comes back. Every statement on the fast path (this one, kRelease) is a single INSERT or UPDATE
// without a WITH: each WITH, UNION or subquery costs every call its set-up (about 15 µs
// apiece, measured with pgbench), which doubled these statements' cost over the bare floor.
constexpr std::string_view kAcquire = R"(
INSERT INTO {t} AS l (service, key_hash, key, owner, token, expires_at, released, lease_ms,
                      name, host, pid, thread, acquired_at)
SELECT $1::text, sha256(decode($2::text, 'hex')), decode($2::text, 'hex'), $3::text,
       (extract(epoch FROM c.t) * 1000000)::int8, c.t + $4::int8 * interval '1 millisecond',
       false, $4::int8, decode($9::text, 'hex'), decode($6::text, 'hex'), $7::int8, $8::int8, c.t
FROM (SELECT clock_timestamp() AS t) c
WHERE $5::int8 = 0 OR (extract(epoch FROM c.t) * 1000000)::int8 <= $5::int8
ON CONFLICT (service, key_hash) DO UPDATE SET
  token = CASE WHEN l.owner = excluded.owner AND l.expires_at > excluded.acquired_at
               THEN l.token ELSE greatest(l.token + 1, coalesce(l.queue_token, 0) + 1, excluded.token) END,
  acquired_at = CASE WHEN l.owner = excluded.owner AND l.expires_at > excluded.acquired_at
                     THEN l.acquired_at ELSE excluded.acquired_at END,
  owner = excluded.owner, expires_at = excluded.expires_at, released = false,
  lease_ms = excluded.lease_ms, name = excluded.name, host = excluded.host, pid = excluded.pid,
  thread = excluded.thread
WHERE ((l.owner IS NULL OR l.expires_at <= excluded.acquired_at)
       AND (l.queue_until IS NULL OR l.queue_until <= excluded.acquired_at))
   OR (l.owner = excluded.owner AND NOT l.released)
RETURNING l.token, $4::int8)";

// What a refused kAcquire met. $1 service, $2 key (hex), $3 not-after (as kAcquire's $5).
// Answers one row: (late, last token, ms left, permits of the queue's first entry): late 1
// when the request arrived after its caller gave up; ms left that of the key's holder, else
// of its queue (pg_queue_sql.hpp), 0 when the key is free (released since) or has no row;
// the permits 0 unless the queue's first entry is a permit.
constexpr std::string_view kBusy = R"(
SELECT ($3::int8 > 0 AND c.us > $3::int8)::int, coalesce(l.token, 0),
       CASE WHEN l.owner IS NOT NULL AND l.expires_at > c.t
            THEN greatest(1, ceil(extract(epoch FROM (l.expires_at - c.t)) * 1000))::int8
            WHEN l.queue_until > c.t
            THEN greatest(1, ceil(extract(epoch FROM (l.queue_until - c.t)) * 1000))::int8
            ELSE 0 END,
       CASE WHEN l.owner IS NOT NULL AND l.expires_at > c.t THEN 0
            ELSE coalesce((SELECT x.n FROM jsonb_to_recordset(l.queue) AS x(n int, t int8, e int8)
                           WHERE x.e > c.us ORDER BY x.t LIMIT 1), 0) END
FROM (SELECT n.t, (extract(epoch FROM n.t) * 1000000)::int8 AS us
      FROM (SELECT clock_timestamp() AS t) n) c
LEFT JOIN {t} l ON l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex')))";

// $1 service, $2 keys (hex), $3 owners, $4 ttls (ms), $5 tokens: arrays, one item each.
// Answers (item, outcome) per item, items from 1: 0 renewed, 1 gone, 2 taken. A renewal
// raises the key's token counter to the lease's token.
constexpr std::string_view kRenew = R"(
WITH n AS (SELECT clock_timestamp() AS t),
req AS (SELECT r.i, sha256(decode(r.k, 'hex')) AS key_hash, r.o AS owner, r.ttl, r.tok
        FROM unnest($2::text[], $3::text[], $4::int8[], $5::int8[]) WITH ORDINALITY
             AS r(k, o, ttl, tok, i)),
renewed AS (
  UPDATE {t} l SET expires_at = n.t + req.ttl * interval '1 millisecond', lease_ms = req.ttl,
                   token = greatest(l.token, req.tok)
  FROM req, n
  WHERE l.service = $1::text AND l.key_hash = req.key_hash AND l.owner = req.owner AND NOT l.released
    AND l.expires_at > n.t
  RETURNING req.i)
SELECT req.i,
       CASE WHEN EXISTS (SELECT 1 FROM renewed WHERE renewed.i = req.i) THEN 0
            WHEN l.owner IS NOT NULL AND l.owner <> req.owner AND l.expires_at > n.t THEN 2
            ELSE 1 END
FROM req CROSS JOIN n LEFT JOIN {t} l ON l.service = $1::text AND l.key_hash = req.key_hash)";

// $1 service, $2 key (hex), $3 owner, $4 keep for (ms, 0: free it now), $5 channel,
// $6 payload. Answers one row when it was $3's: (0 released or 1 kept until keep-for,
// notifications sent); a release notifies only while the key's queue has entries (its
// waiters): an uncontended release sends no notification (NOTIFY serialises the commits of
// every notifying transaction in the database). No row when it was not: kReleaseMissed
// tells why.
constexpr std::string_view kRelease = R"(
UPDATE {t} l SET owner = CASE WHEN $4::int8 > 0 THEN l.owner END, released = $4::int8 > 0,
                 expires_at = clock_timestamp() + $4::int8 * interval '1 millisecond'
WHERE l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex')) AND l.owner = $3::text
  AND NOT l.released AND l.expires_at > clock_timestamp()
RETURNING (CASE WHEN $4::int8 > 0 THEN 1 ELSE 0 END),
          (CASE WHEN $4::int8 = 0 AND l.queue_until > clock_timestamp()
                THEN length(pg_notify($5::text, $6::text)::text) + 1 ELSE 0 END))";

// Why a kRelease of $3 found nothing to release. $1 service, $2 key (hex), $3 owner.
// Answers one row: 3 when another owner holds the key, else 2 (gone: expired or freed).
constexpr std::string_view kReleaseMissed = R"(
SELECT CASE WHEN l.owner IS NOT NULL AND l.owner <> $3::text AND l.expires_at > clock_timestamp()
            THEN 3 ELSE 2 END
FROM (SELECT 1) one
LEFT JOIN {t} l ON l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex')))";

constexpr std::string_view kServerTime =
    "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8";

// $1 service, $2 key (hex): its holder and its queue (pg_queue_sql.hpp, kEntryColumns), if
// any.
constexpr std::string_view kInspect = R"(
WITH n AS (SELECT c.t, (extract(epoch FROM c.t) * 1000000)::int8 AS us
           FROM (SELECT clock_timestamp() AS t) c)
SELECT {lock}, {entry} FROM {t} l CROSS JOIN n {entries}
WHERE l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex'))
  AND ((l.owner IS NOT NULL AND l.expires_at > n.t) OR l.queue_until > n.t)
ORDER BY x.t)";

// $1 service: every held key as kInspect, a key's rows together (the caller filters by
// pattern).
constexpr std::string_view kList = R"(
WITH n AS (SELECT c.t, (extract(epoch FROM c.t) * 1000000)::int8 AS us
           FROM (SELECT clock_timestamp() AS t) c)
SELECT {lock}, {entry} FROM {t} l CROSS JOIN n {entries}
WHERE l.service = $1::text AND ((l.owner IS NOT NULL AND l.expires_at > n.t) OR l.queue_until > n.t)
ORDER BY l.key_hash, x.t)";

// $1 service, $2 key (hex), $3 channel, $4 payload, $5 audit id, $6 user (hex), $7 host
// (hex), $8 pid, $9 note (hex). Frees the key whoever holds it, notifies its waiters and
// records who did it; answers the lock as it was (with the audit time appended), or no row.
// The audit list keeps the newest 1,000 entries of the service.
constexpr std::string_view kForceRelease = R"(
WITH n AS (SELECT clock_timestamp() AS t),
old AS (SELECT l.* FROM {t} l, n
        WHERE l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex')) AND l.owner IS NOT NULL
          AND l.expires_at > n.t FOR UPDATE),
freed AS (UPDATE {t} l SET owner = NULL, released = false, expires_at = n.t FROM old, n
          WHERE l.service = old.service AND l.key_hash = old.key_hash RETURNING pg_notify($3::text, $4::text)),
audited AS (
  INSERT INTO {audit} (id, service, at, "user", host, pid, note, key, owner, token, owner_host,
                       owner_pid, owner_name)
  SELECT $5::text, $1::text, n.t, decode($6::text, 'hex'), decode($7::text, 'hex'), $8::int8,
         decode($9::text, 'hex'), old.key, old.owner, old.token, old.host, old.pid, old.name
  FROM old, n RETURNING at),
trimmed AS (DELETE FROM {audit} a WHERE a.service = $1::text AND a.seq <= (
              SELECT b.seq FROM {audit} b WHERE b.service = $1::text
              ORDER BY b.seq DESC OFFSET 999 LIMIT 1))
SELECT {lock}, (extract(epoch FROM a.at) * 1000)::int8, (SELECT count(*) FROM freed)
FROM old l, n, audited a)";

// $1 service, $2 limit: the audit list, newest first.
constexpr std::string_view kHistory = R"(
SELECT a.id, (extract(epoch FROM a.at) * 1000)::int8, encode(a."user", 'hex'),
       encode(a.host, 'hex'), a.pid, encode(a.note, 'hex'), encode(a.key, 'hex'), a.owner,
       a.token, encode(a.owner_host, 'hex'), a.owner_pid, encode(a.owner_name, 'hex')
FROM {audit} a WHERE a.service = $1::text ORDER BY a.seq DESC LIMIT $2::int8)";

// $1 service, $2 key (hex), $3 owner, $4 keep (ms), $5 label (hex), $6 host (hex), $7 pid,
// $8 token. Writes the key's run record if $3 holds the lock (the key's own holder, or an
// entry of its queue: only a holder asks) and no record is kept. Answers
// (1, the new record's columns) or (0, the kept record's columns); no row when the lock is
// not $3's.
constexpr std::string_view kClaimRun = R"(
WITH n AS (SELECT c.t, (extract(epoch FROM c.t) * 1000000)::int8 AS us
           FROM (SELECT clock_timestamp() AS t) c),
held AS (SELECT CASE WHEN l.owner = $3::text THEN l.name ELSE decode(x.nm, 'hex') END AS name
         FROM {t} l CROSS JOIN n
         LEFT JOIN LATERAL (SELECT * FROM jsonb_to_recordset(l.queue) AS x(o text, e int8, r bool, nm text)
                            WHERE x.o = $3::text AND x.e > n.us AND NOT x.r) x ON true
         WHERE l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex'))
           AND ((l.owner = $3::text AND NOT l.released AND l.expires_at > n.t) OR x.o IS NOT NULL)),
claimed AS (
  INSERT INTO {runs} AS r (service, key_hash, key, owner, token, name, label, host, pid,
                           started_at, finished_at, outcome, expires_at)
  SELECT $1::text, sha256(decode($2::text, 'hex')), decode($2::text, 'hex'), $3::text, $8::int8, held.name, decode($5::text, 'hex'),
         decode($6::text, 'hex'), $7::int8, n.t, NULL, 'running'::bytea,
         n.t + $4::int8 * interval '1 millisecond'
  FROM held, n
  ON CONFLICT (service, key_hash) DO UPDATE SET owner = excluded.owner, token = excluded.token,
    name = excluded.name, label = excluded.label, host = excluded.host, pid = excluded.pid,
    started_at = excluded.started_at, finished_at = NULL, outcome = excluded.outcome,
    expires_at = excluded.expires_at
  WHERE r.expires_at <= excluded.started_at
  RETURNING encode(r.key, 'hex'), encode(r.name, 'hex'), encode(r.label, 'hex'), r.owner, r.token,
            encode(r.host, 'hex'), r.pid, (extract(epoch FROM r.started_at) * 1000)::int8,
            0::int8, encode(r.outcome, 'hex'), $4::int8)
SELECT 1, claimed.* FROM claimed
UNION ALL
SELECT 0, {run} FROM {runs} r, n
WHERE NOT EXISTS (SELECT 1 FROM claimed) AND EXISTS (SELECT 1 FROM held)
  AND r.service = $1::text AND r.key_hash = sha256(decode($2::text, 'hex')) AND r.expires_at > n.t)";

// $1 service, $2 key (hex), $3 owner, $4 outcome (hex). Answers one row if it was $3's.
constexpr std::string_view kFinishRun = R"(
UPDATE {runs} r SET finished_at = clock_timestamp(), outcome = decode($4::text, 'hex')
WHERE r.service = $1::text AND r.key_hash = sha256(decode($2::text, 'hex')) AND r.owner = $3::text
  AND r.expires_at > clock_timestamp()
RETURNING 1)";

// $1 service: every kept run record (the caller filters by pattern).
constexpr std::string_view kListRuns = R"(
WITH n AS (SELECT clock_timestamp() AS t)
SELECT {run} FROM {runs} r, n WHERE r.service = $1::text AND r.expires_at > n.t)";

// Drops, a thousand at most per call, lock rows nobody has held or queued for 7 days (their token
// counter is no longer needed: tokens are seeded from the clock) and run records past
// their time. Answers how many went. The condition is repeated in the DELETE itself: a row
// taken again between the scan and the DELETE must stay (servers before the 2025 fix of
// TID-scan rechecks would not test the subquery's condition again).
constexpr std::string_view kSweep = R"(
WITH locks AS (DELETE FROM {t} WHERE ctid = ANY(ARRAY(
                 SELECT ctid FROM {t} WHERE expires_at < clock_timestamp() - interval '7 days'
                   AND (queue_until IS NULL OR queue_until < clock_timestamp() - interval '7 days')
                 LIMIT 1000)) AND expires_at < clock_timestamp() - interval '7 days'
               AND (queue_until IS NULL OR queue_until < clock_timestamp() - interval '7 days')
             RETURNING 1),
runs AS (DELETE FROM {runs} WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM {runs} WHERE expires_at < clock_timestamp() LIMIT 1000))
         AND expires_at < clock_timestamp() RETURNING 1)
SELECT (SELECT count(*) FROM locks) + (SELECT count(*) FROM runs))";

constexpr std::string_view kSchema = R"(
CREATE TABLE IF NOT EXISTS {t} (
  service text NOT NULL, key_hash bytea NOT NULL, key bytea NOT NULL, owner text, token bigint NOT NULL,
  expires_at timestamptz NOT NULL, released boolean NOT NULL DEFAULT false,
  lease_ms bigint NOT NULL DEFAULT 0, name bytea NOT NULL DEFAULT '', host bytea NOT NULL DEFAULT '',
  pid bigint NOT NULL DEFAULT 0, thread bigint NOT NULL DEFAULT 0, acquired_at timestamptz,
  queue_token bigint, queue jsonb, queue_until timestamptz, PRIMARY KEY (service, key_hash))
  WITH (fillfactor = 70);
CREATE TABLE IF NOT EXISTS {runs} (
  service text NOT NULL, key_hash bytea NOT NULL, key bytea NOT NULL, owner text NOT NULL, token bigint NOT NULL,
  name bytea NOT NULL, label bytea NOT NULL, host bytea NOT NULL, pid bigint NOT NULL,
  started_at timestamptz NOT NULL, finished_at timestamptz, outcome bytea NOT NULL,
  expires_at timestamptz NOT NULL, PRIMARY KEY (service, key_hash));
CREATE TABLE IF NOT EXISTS {audit} (
  seq bigserial PRIMARY KEY, id text NOT NULL, service text NOT NULL, at timestamptz NOT NULL,
  "user" bytea NOT NULL, host bytea NOT NULL, pid bigint NOT NULL, note bytea NOT NULL,
  key bytea NOT NULL, owner text NOT NULL, token bigint NOT NULL, owner_host bytea NOT NULL,
  owner_pid bigint NOT NULL, owner_name bytea NOT NULL))";

// A lock table of the version before queues: the queue columns added, and waited_until
// dropped, so that a process of that version refuses the table when it starts (its
// statements would take a key that only the queue holds) and a running one's releases fail
// loudly instead of passing over the queue.
constexpr std::string_view kUpgrade =
    "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS queue_token bigint, "
    "ADD COLUMN IF NOT EXISTS queue jsonb, ADD COLUMN IF NOT EXISTS queue_until timestamptz, "
    "DROP COLUMN IF EXISTS waited_until";

constexpr std::array<std::string_view, kPgStatementCount> kTexts = {
    kAcquire, kBusy,     kRenew,        kRelease,  kReleaseMissed, kServerTime,
    kInspect, kList,     kForceRelease, kHistory,  kClaimRun,      kFinishRun,
    kListRuns, kSweep,   queue_sql::kAcquire, queue_sql::kRelease, queue_sql::kRenew,
    queue_sql::kForce};

constexpr std::array<const char*, kPgStatementCount> kNames = {
    "dlock_acquire", "dlock_busy",    "dlock_renew",  "dlock_release", "dlock_release_missed",
    "dlock_server_time", "dlock_inspect", "dlock_list", "dlock_force",   "dlock_history",
    "dlock_claim",   "dlock_finish",  "dlock_list_runs", "dlock_sweep", "dlock_queue_acquire",
    "dlock_queue_release", "dlock_queue_renew", "dlock_queue_force"};

}  // namespace

PgStatements::PgStatements(std::string_view table) {
  const std::string t = quoted(table, ""), runs = quoted(table, "_runs"),
                    audit = quoted(table, "_audit");
  const auto fill = [&](std::string_view text) {
    return fmt::format(fmt::runtime(text), fmt::arg("t", t), fmt::arg("runs", runs),
                       fmt::arg("audit", audit), fmt::arg("lock", kLockColumns),
                       fmt::arg("run", kRunColumns), fmt::arg("entry", queue_sql::kEntryColumns),
                       fmt::arg("entries", queue_sql::kEntries));
  };
  for (std::size_t i = 0; i < kPgStatementCount; ++i) sql_[i] = fill(kTexts[i]);
  upgrade_ = fill(kUpgrade);
  schema_ = fill(kSchema) + ";\n" + upgrade_;
  // Whether the three tables exist, whether the lock table has key_hash (a table of another
  // layout is refused by name, not met by failing statements), and its queue columns.
  exists_ = fmt::format(
      "SELECT to_regclass('{0}') IS NOT NULL AND to_regclass('{1}') IS NOT NULL AND "
      "to_regclass('{2}') IS NOT NULL, (SELECT count(*) FROM pg_catalog.pg_attribute "
      "WHERE attrelid = to_regclass('{0}') AND attname = 'key_hash' AND NOT attisdropped), "
      "(SELECT count(*) FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass('{0}') "
      "AND attname IN ('queue_token', 'queue', 'queue_until') AND NOT attisdropped), "
      "(SELECT count(*) FROM pg_catalog.pg_attribute "
      "WHERE attrelid = to_regclass('{1}') AND attname = 'key_hash' AND NOT attisdropped)",
      t, runs, audit);
  table_ = t;
  const auto dot = table.rfind('.');
  channel_ = std::string(dot == std::string_view::npos ? table : table.substr(dot + 1));
}

bool PgStatements::valid_table(std::string_view table) {
  const auto part_ok = [](std::string_view part, std::size_t longest) {
    if (part.empty() || part.size() > longest || (part[0] >= '0' && part[0] <= '9')) return false;
    for (char c : part) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
  };
  const auto dot = table.find('.');
  if (dot == std::string_view::npos) return part_ok(table, 57);
  // pg_temp would give every session a table of its own; pg_catalog is PostgreSQL's.
  return part_ok(table.substr(0, dot), 63) && table.substr(0, 3) != "pg_" &&
         part_ok(table.substr(dot + 1), 57);
}

const char* PgStatements::name(PgStatement statement) {
  return kNames[static_cast<std::size_t>(statement)];
}

std::string PgStatements::listen() const { return fmt::format("LISTEN \"{}\"", channel_); }

}  // namespace dlock::internal
