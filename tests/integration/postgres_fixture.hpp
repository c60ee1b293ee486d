// The PostgreSQL server the integration tests of dlock_postgres_test share (started once for
// the program, on first use) and the configurations they make for it.
#pragma once

#include <chrono>
#include <string>

#include "dlock/dlock.hpp"
#include "fixtures.hpp"
#include "postgres_server.hpp"

namespace dlock::test {

inline PostgresServer& server() {
  static PostgresServer& s = *[] {
    static PostgresServer started;
    started.start();
    return &started;
  }();
  return s;
}

inline Config config_for(const std::string& dsn, const std::string& table = "dlock_locks") {
  Config c;
  c.service = unique_service();
  BackendConfig b;
  b.name = "default";
  b.topology = Topology::kPostgres;
  b.dsn = dsn;
  b.table = table;
  b.connect_timeout = std::chrono::milliseconds(500);
  b.command_timeout = std::chrono::milliseconds(500);
  c.backends["default"] = b;
  return c;
}

inline Config config() { return config_for(server().dsn()); }

inline long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace dlock::test
