// The PostgreSQL engine (`topology: postgres`): locks are rows of one table whose expiry,
// order and fencing tokens come from the database (pg_statements.hpp), waiters are woken by
// LISTEN/NOTIFY (pg_listener.hpp), connections come from a bounded pool with deadlines
// (pg_connection.hpp). It offers the lock, scheduled-run and admin seams.
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"

namespace dlock::internal {

/// Throws ConfigError when the backend has no dsn.
Engine make_postgres_backend(const BackendConfig& config, const std::string& service,
                             std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
