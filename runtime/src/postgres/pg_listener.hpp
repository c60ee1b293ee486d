// Release notifications from PostgreSQL: one connection per backend LISTENs on the lock
// table's channel; every release and forced release of the table announces its key
// (pg_notify), and the listener wakes the watches armed on it (release_signals.hpp); a
// change of a key's queue announces the turn of the owners it may concern, and wakes only
// theirs.
//
// The listener starts with the first watch, which waits for it to listen (until the first
// attempt fails, at most connect_timeout + command_timeout), so that the waiter's next try
// cannot miss a release. If the connection breaks,
// watches fall back to polling until it is back; on reconnecting every watched key is
// signalled once, since a release may have gone unheard. An idle connection is checked
// every 10 s so that a silently dead one is replaced.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backend.hpp"
#include "metrics.hpp"
#include "postgres/pg_connection.hpp"
#include "release_signals.hpp"

namespace dlock::internal {

class PgListener {
 public:
  PgListener(BackendConfig config, std::shared_ptr<const PgStatements> statements,
             std::shared_ptr<Metrics> metrics);
  ~PgListener();
  PgListener(const PgListener&) = delete;
  PgListener& operator=(const PgListener&) = delete;

  /// A watch on the notification payload `id` (see PostgresBackend's payload_of).
  std::unique_ptr<ReleaseWatch> watch(const std::string& id);

 private:
  void run();
  /// Reads notifications until the connection breaks or the listener stops.
  void serve(PgConnection& conn);
  /// Wakes the watches a notification's payload is for.
  void announce(const std::string& payload);
  /// Sleeps up to `pause` unless the listener stops; false when it stops.
  bool pause_unless_stopped(Millis pause);
  void set_listening(bool listening);

  BackendConfig config_;
  std::shared_ptr<const PgStatements> statements_;
  std::shared_ptr<Metrics> metrics_;
  ReleaseSignals signals_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool started_ = false;
  bool listening_ = false;
  bool stopping_ = false;
  bool failed_once_ = false;  ///< an attempt to listen has failed (the first waiter stops waiting)
  int wake_[2] = {-1, -1};  ///< a pipe: written to stop the thread's poll()
  std::thread thread_;
};

}  // namespace dlock::internal
