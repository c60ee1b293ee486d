// dlock: distributed locks for C++ on Redis.
//
//   #include <dlock/dlock.hpp>
//
//   int main() {
//     dlock::init();                                   // $DLOCK_CONFIG, else 127.0.0.1:6379
//     dlock::LockSettings s = dlock::client().config().resolve("nightly", "", {});
//     dlock::Lease lease = dlock::client().acquire("report:nightly", s, "nightly");
//     if (lease) { run_report(lease.token()); }
//   }
//
// Functions tagged `[[dlock::guard("order:<id>", lease=30s)]]` and woven by dlock_weave()
// use the same client; inside them `dlock::current_lease()` describes the lock held.
#pragma once

#include <string>

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "dlock/errors.hpp"
#include "dlock/guard.hpp"
#include "dlock/key.hpp"
#include "dlock/lease.hpp"
#include "dlock/log.hpp"
#include "dlock/metrics.hpp"
#include "dlock/schedule.hpp"

namespace dlock {

/// Configures the process-wide client from a YAML file. Throws ConfigError.
void init(const std::string& path);

/// Configures it from `$DLOCK_CONFIG` if set, else the built-in defaults.
void init();

/// Configures it from a Config value.
void init(Config config);

/// The process-wide client, as a handle (cheap to copy). The first call without init()
/// behaves as init(). A handle taken before init() or shutdown() keeps working with the
/// configuration it had: replacing the process-wide client never pulls it from under a
/// call in progress.
[[nodiscard]] Client client();

/// Drops the process-wide client (held leases stay valid until released), then waits until
/// every release sent without waiting has its answer, for at most twice the longest
/// connect_timeout + command_timeout of those releases' backends. Process exit waits the same
/// way.
void shutdown();

/// The innermost lease held by this thread (acquired on it and not yet released), or an
/// empty view.
[[nodiscard]] LeaseView current_lease();

}  // namespace dlock
