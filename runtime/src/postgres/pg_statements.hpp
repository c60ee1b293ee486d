// The SQL of the PostgreSQL backend: the tables it creates and the statements it prepares,
// for one configured table name. Every statement is one round trip and takes its time from
// the database's clock (clock_timestamp()), never from the client's.
//
// Tables (`T` is the configured name, `schema.name` or `name`):
//   T         one row per key ever locked, found by (service, SHA-256 of the key): the
//             holder (owner NULL when free), the last fencing token, the expiry, metadata,
//             and the key's queue (pg_queue_sql.hpp).
//             A free row keeps the key's token counter and is swept 7 days after it was
//             freed. An unqualified name is in `public`: never looked up through the
//             session's search_path.
//   T_runs    scheduled-run records, one per key while kept.
//   T_audit   forced releases.
// Bytes that come from users (keys, names, hosts, labels, notes, outcomes) are stored as
// bytea and travel as hex text, so that any bytes survive whatever the database's encoding.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace dlock::internal {

enum class PgStatement {
  kAcquire,
  kBusy,
  kRenew,
  kRelease,
  kReleaseMissed,
  kServerTime,
  kInspect,
  kList,
  kForceRelease,
  kHistory,
  kClaimRun,
  kFinishRun,
  kListRuns,
  kSweep,
  kQueueAcquire,  ///< pg_queue_sql.hpp
  kQueueRelease,
  kQueueRenew,
  kQueueForce,
};
inline constexpr std::size_t kPgStatementCount = 18;

class PgStatements {
 public:
  /// `table` as validated by the configuration: `name` or `schema.name`, lower-case
  /// identifiers (see valid_table).
  explicit PgStatements(std::string_view table);

  /// Whether `table` is `name` or `schema.name` with parts of [a-z_][a-z0-9_]*, the name at
  /// most 57 characters (so that `<name>_audit` fits PostgreSQL's 63).
  [[nodiscard]] static bool valid_table(std::string_view table);

  [[nodiscard]] const std::string& sql(PgStatement statement) const {
    return sql_[static_cast<std::size_t>(statement)];
  }
  /// The name it is prepared under.
  [[nodiscard]] static const char* name(PgStatement statement);
  /// CREATE TABLE IF NOT EXISTS for the three tables, then upgrade().
  [[nodiscard]] const std::string& schema() const { return schema_; }
  /// The ALTER TABLE that brings a lock table of an earlier version up to date (it needs the
  /// table's owner).
  [[nodiscard]] const std::string& upgrade() const { return upgrade_; }
  /// One row: whether all three tables exist ('t' or 'f'), 1 when the lock table has
  /// key_hash, how many of its queue columns it has (3 when current; fewer: made by an
  /// earlier version, which the schema brings up to date), and 1 when the runs table has
  /// key_hash.
  [[nodiscard]] const std::string& exists() const { return exists_; }
  /// The lock table as written in SQL (quoted identifiers).
  [[nodiscard]] const std::string& table() const { return table_; }
  /// The notification channel releases are announced on (the table's own name).
  [[nodiscard]] const std::string& channel() const { return channel_; }
  /// LISTEN on that channel.
  [[nodiscard]] std::string listen() const;

 private:
  std::array<std::string, kPgStatementCount> sql_;
  std::string schema_;
  std::string upgrade_;
  std::string exists_;
  std::string table_;
  std::string channel_;
};

}  // namespace dlock::internal
