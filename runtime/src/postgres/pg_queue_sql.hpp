// The SQL of a key's queue (pg_statements.hpp has the rest): the holds and waiting requests
// of the lock kinds (shared, fair, permits) and of exclusive requests that wait.
//
// A key's queue is a jsonb array in its lock row (`queue`), one object per entry in arrival
// order (by token):
//   o owner, k kind (0 exclusive, 1 shared, 2 permit), n permits (0 unless a permit),
//   f fair, t token, e expiry (server µs), r released (kept for min_hold), w tries after the
//   first, a arrived (server µs), ls lease (ms), h host (hex), p pid, th thread, nm name (hex)
// `queue_until` is the latest expiry among them (NULL: none), and `queue_token` the token of
// the newest entry: a token is above the key's `token` (its own holder's) and
// `queue_token`, and kAcquire's above both too, so that tokens increase across the key's
// holders, whichever way they came. Whether an entry holds is
// the rule of queue_standing.hpp, applied by the client to the queue a statement returns,
// with the row's own holder (owner, taken by kAcquire) counted as an exclusive entry before
// the queue. kAcquire takes the row only while no entry lives, and no entry holds while the
// row's holder does.
//
// Why one row: every statement on a key's queue updates that row, so PostgreSQL applies them
// one after another, each to the queue the one before left (ON CONFLICT DO UPDATE and UPDATE
// see the newest version of the row they lock). Entries kept in a table of their own would
// be read from the statement's snapshot, taken before it waited for the lock: two requests
// could each miss the other's entry and both hold.
#pragma once

#include <string_view>

namespace dlock::internal::queue_sql {

// The statement's clock `c`: its time `t`, and `us`, the same in µs since the epoch.
#define DLOCK_QUEUE_CLOCK \
  "c AS (SELECT n.t, (extract(epoch FROM n.t) * 1000000)::int8 AS us " \
  "FROM (SELECT clock_timestamp() AS t) n)"

// Each statement rebuilds the queue in one pass over its live entries `x` (one aggregate:
// every sub-select costs each call its set-up), and sets queue_until to the latest expiry
// left, or to now when none is (the time the queue was last used: the sweep keeps the row,
// and its token counter, 7 days from then).
#define DLOCK_QUEUE_UNTIL(expiry, kept)                                                      \
  "coalesce(timestamptz 'epoch' + max(" expiry ") FILTER (WHERE " kept ") * "              \
  "interval '1 microsecond', clock_timestamp())"

// $1 service, $2 key (hex), $3 owner, $4 lease ms, $5 not-after (server µs, 0: none), $6 host
// (hex), $7 pid, $8 thread, $9 name (hex), $10 kind, $11 permits, $12 fair.
// Puts the request in the key's queue (a new entry at its end, or its own entry's expiry
// renewed to the lease) and drops the entries that expired. Answers the queue, one row per
// entry in order: (row held by kAcquire's holder, that holder's ms left, owner, kind,
// permits, token, tries, ms left). No row when the request arrived after its caller gave up
// (nothing was written).
constexpr std::string_view kAcquire = R"(
WITH mine AS (
INSERT INTO {t} AS l (service, key_hash, key, owner, token, expires_at, released, lease_ms,
                      acquired_at, queue_token, queue, queue_until)
SELECT $1::text, sha256(decode($2::text, 'hex')), decode($2::text, 'hex'), NULL, c.us, c.t, false, 0,
       c.t, c.us, jsonb_build_array(jsonb_build_object(
         'o', $3::text, 'k', $10::int, 'n', $11::int, 'f', $12::bool, 't', c.us,
         'e', c.us + $4::int8 * 1000, 'r', false, 'w', 0, 'a', c.us, 'ls', $4::int8,
         'h', $6::text, 'p', $7::int8, 'th', $8::int8, 'nm', $9::text)),
       c.t + $4::int8 * interval '1 millisecond'
FROM (SELECT n.t, (extract(epoch FROM n.t) * 1000000)::int8 AS us
      FROM (SELECT clock_timestamp() AS t) n) c
WHERE $5::int8 = 0 OR c.us <= $5::int8
ON CONFLICT (service, key_hash) DO UPDATE SET (queue_token, queue, queue_until) = (
  SELECT CASE WHEN q.had THEN l.queue_token ELSE q.token END,
         q.kept || CASE WHEN q.had THEN '[]'::jsonb
                        ELSE jsonb_build_array(excluded.queue->0 || jsonb_build_object('t', q.token)) END,
         timestamptz 'epoch' + greatest(q.latest, (excluded.queue->0->>'e')::int8) * interval '1 microsecond'
  FROM (SELECT coalesce(jsonb_agg(CASE WHEN x->>'o' = $3::text
                                       THEN x || jsonb_build_object('e', excluded.queue->0->'e',
                                                 'ls', $4::int8, 'w', (x->>'w')::int8 + 1)
                                       ELSE x END ORDER BY (x->>'t')::int8), '[]'::jsonb) AS kept,
               coalesce(bool_or(x->>'o' = $3::text), false) AS had,
               coalesce(max((x->>'e')::int8), 0) AS latest,
               greatest(l.token + 1, coalesce(l.queue_token, 0) + 1,
                        (excluded.queue->0->>'a')::int8) AS token
        FROM jsonb_array_elements(l.queue) x
        WHERE (x->>'e')::int8 > (excluded.queue->0->>'a')::int8) q)
RETURNING l.owner IS NOT NULL AND l.expires_at > clock_timestamp() AS held,
          greatest(0, ceil(extract(epoch FROM (l.expires_at - clock_timestamp())) * 1000))::int8 AS held_ms,
          l.queue)
SELECT m.held::int, m.held_ms, x.o, x.k, x.n, x.t, x.w,
       greatest(1, ceil((x.e - (extract(epoch FROM clock_timestamp()) * 1000000)) / 1000.0))::int8
FROM mine m, jsonb_to_recordset(m.queue) AS x(o text, k int, n int, t int8, w int8, e int8)
ORDER BY x.t)";

// The owners whose turn a change of the queue `up.queue` may have brought: the first entry,
// the readers right behind a first reader, the permits of the first semaphore's size within
// its size.
#define DLOCK_QUEUE_TURNS                                                                   \
  "SELECT x.o FROM (SELECT x.o, row_number() OVER w AS i, bool_and(x.k = 1) OVER w AS readers, " \
  "bool_and(x.k = 2 AND x.n = (up.queue->0->>'n')::int) OVER w AS permits "                  \
  "FROM jsonb_to_recordset(up.queue) AS x(o text, k int, n int, t int8) WINDOW w AS (ORDER BY x.t)) x " \
  "WHERE x.i = 1 OR x.readers OR (x.permits AND x.i <= (up.queue->0->>'n')::int)"

// $1 service, $2 key (hex), $3 owner, $4 keep for (ms, 0: leave now), $5 channel, $6 payload.
// Takes $3's live entry out of the key's queue (or, keep-for > 0, marks it released and
// shortens it to keep-for), and tells each owner whose turn it may be ("<payload> <owner>").
// Answers one row, (0 released or 1 kept, notifications), when the entry was there; none
// when it was not.
constexpr std::string_view kRelease = R"(
WITH )" DLOCK_QUEUE_CLOCK R"(,
up AS (
  UPDATE {t} l SET (queue, queue_until) = (
    SELECT coalesce(jsonb_agg(CASE WHEN x->>'o' = $3::text
                                   THEN x || jsonb_build_object('e', c.us + $4::int8 * 1000, 'r', true)
                                   ELSE x END ORDER BY (x->>'t')::int8)
                      FILTER (WHERE x->>'o' <> $3::text OR $4::int8 > 0), '[]'::jsonb),
           )" DLOCK_QUEUE_UNTIL(
               "CASE WHEN x->>'o' = $3::text THEN c.us + $4::int8 * 1000 ELSE (x->>'e')::int8 END",
               "x->>'o' <> $3::text OR $4::int8 > 0") R"(
    FROM jsonb_array_elements(l.queue) x WHERE (x->>'e')::int8 > c.us)
  FROM c
  WHERE l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex'))
    AND EXISTS (SELECT 1 FROM jsonb_array_elements(l.queue) x
                WHERE x->>'o' = $3::text AND (x->>'e')::int8 > c.us AND NOT (x->>'r')::bool)
  RETURNING l.queue)
SELECT CASE WHEN $4::int8 > 0 THEN 1 ELSE 0 END,
       CASE WHEN $4::int8 > 0 THEN 0 ELSE coalesce((SELECT sum(length(pg_notify($5::text, $6::text || ' ' || w.o)::text) + 1) FROM ()" DLOCK_QUEUE_TURNS R"() w), 0)::int8 END
FROM up)";

// $1 service, $2 keys (hex), $3 owners, $4 ttls (ms): arrays, one item each. Extends each
// live entry of an owner to its ttl. Answers (item, outcome) per item, items from 1:
// 0 renewed, 1 gone.
constexpr std::string_view kRenew = R"(
WITH )" DLOCK_QUEUE_CLOCK R"(,
req AS (SELECT r.i, sha256(decode(r.k, 'hex')) AS key_hash, r.o AS owner, r.ttl
        FROM unnest($2::text[], $3::text[], $4::int8[]) WITH ORDINALITY AS r(k, o, ttl, i)),
per_key AS (SELECT req.key_hash, jsonb_object_agg(req.owner, req.ttl) AS ttls FROM req
            GROUP BY req.key_hash),
-- The rows in one order: holders in several processes renew the same rows, and two
-- statements that locked them in other orders would deadlock.
locked AS (SELECT l.key_hash FROM {t} l
           WHERE l.service = $1::text AND l.key_hash IN (SELECT key_hash FROM per_key)
           ORDER BY l.key_hash FOR UPDATE),
renewed AS (
  UPDATE {t} l SET (queue, queue_until) = (
    SELECT coalesce(jsonb_agg(CASE WHEN p.ttls ? (x->>'o') AND NOT (x->>'r')::bool
                                   THEN x || jsonb_build_object(
                                          'e', c.us + (p.ttls->>(x->>'o'))::int8 * 1000,
                                          'ls', (p.ttls->>(x->>'o'))::int8)
                                   ELSE x END ORDER BY (x->>'t')::int8), '[]'::jsonb),
           )" DLOCK_QUEUE_UNTIL(
               "CASE WHEN p.ttls ? (x->>'o') AND NOT (x->>'r')::bool "
               "THEN c.us + (p.ttls->>(x->>'o'))::int8 * 1000 ELSE (x->>'e')::int8 END",
               "true") R"(
    FROM jsonb_array_elements(l.queue) x WHERE (x->>'e')::int8 > c.us)
  FROM per_key p JOIN locked k ON k.key_hash = p.key_hash, c
  WHERE l.service = $1::text AND l.key_hash = p.key_hash
  RETURNING l.key_hash, l.queue)
SELECT req.i,
       CASE WHEN EXISTS (SELECT 1 FROM renewed r, jsonb_array_elements(r.queue) x
                         WHERE r.key_hash = req.key_hash AND x->>'o' = req.owner
                           AND NOT (x->>'r')::bool) THEN 0 ELSE 1 END
FROM req)";

// $1 service, $2 key (hex), $3 channel, $4 payload, $5 audit id, $6 user (hex), $7 host
// (hex), $8 pid, $9 note (hex), $10 owner, $11 its token, $12 its host (hex), $13 its pid,
// $14 its name (hex). Takes $10's live entry out of the key's queue whoever holds it,
// notifies the key's waiters and records who did it. Answers the audit time (ms), or no
// row when the entry was gone.
constexpr std::string_view kForce = R"(
WITH )" DLOCK_QUEUE_CLOCK R"(,
up AS (
  UPDATE {t} l SET (queue, queue_until) = (
    SELECT coalesce(jsonb_agg(x ORDER BY (x->>'t')::int8) FILTER (WHERE x->>'o' <> $10::text),
                    '[]'::jsonb),
           )" DLOCK_QUEUE_UNTIL("(x->>'e')::int8", "x->>'o' <> $10::text") R"(
    FROM jsonb_array_elements(l.queue) x WHERE (x->>'e')::int8 > c.us)
  FROM c
  WHERE l.service = $1::text AND l.key_hash = sha256(decode($2::text, 'hex'))
    AND EXISTS (SELECT 1 FROM jsonb_array_elements(l.queue) x
                WHERE x->>'o' = $10::text AND (x->>'e')::int8 > c.us)
  RETURNING l.key, pg_notify($3::text, $4::text)),
audited AS (
  INSERT INTO {audit} (id, service, at, "user", host, pid, note, key, owner, token, owner_host,
                       owner_pid, owner_name)
  SELECT $5::text, $1::text, c.t, decode($6::text, 'hex'), decode($7::text, 'hex'), $8::int8,
         decode($9::text, 'hex'), up.key, $10::text, $11::int8, decode($12::text, 'hex'),
         $13::int8, decode($14::text, 'hex')
  FROM up, c RETURNING at),
trimmed AS (DELETE FROM {audit} a WHERE a.service = $1::text AND a.seq <= (
              SELECT b.seq FROM {audit} b WHERE b.service = $1::text
              ORDER BY b.seq DESC OFFSET 999 LIMIT 1))
SELECT (extract(epoch FROM a.at) * 1000)::int8 FROM audited a)";

// The key's own holder and its queue's live entries, one row per entry (one row with NULL
// entry columns when the queue is empty), for `l` and the clock `n` (with `n.us`): the lock
// columns (kLockColumns), then row held (1/0), owner, kind, permits, fair (1/0), token,
// ms left, released (1/0), arrived (ms), lease (ms), host (hex), pid, thread, name (hex).
constexpr std::string_view kEntryColumns =
    "(l.owner IS NOT NULL AND l.expires_at > n.t)::int, x.o, x.k, x.n, x.f::int, x.t, "
    "greatest(1, ceil((x.e - n.us) / 1000.0))::int8, x.r::int, x.a / 1000, x.ls, x.h, x.p, "
    "x.th, x.nm";
constexpr std::string_view kEntries =
    "LEFT JOIN LATERAL (SELECT * FROM jsonb_to_recordset(l.queue) AS x(o text, k int, n int, "
    "f bool, t int8, e int8, r bool, a int8, ls int8, h text, p int8, th int8, nm text) "
    "WHERE x.e > n.us) x ON true";

#undef DLOCK_QUEUE_UNTIL
#undef DLOCK_QUEUE_CLOCK
#undef DLOCK_QUEUE_TURNS

}  // namespace dlock::internal::queue_sql
