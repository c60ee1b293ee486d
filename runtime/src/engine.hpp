// What one `backends:` entry offers: the lock seam (backend.hpp) always, scheduled runs
// (run_store.hpp) and admin (admin_backend.hpp) where the engine can do them. The lock
// core holds only the lock seam; schedule.cpp and admin.cpp reach the others through
// runs_of() and admin_of(), which name the topology when it lacks the capability.
//
//   Engine engine = make_engine(config, service, metrics);
//   GrantReply grant = engine.lock->acquire(request);
//   std::int64_t now_ms = runs_of(engine).server_time_ms();   // or throws NotSupported
#pragma once

#include <memory>
#include <string>

#include "admin_backend.hpp"
#include "backend.hpp"
#include "metrics.hpp"
#include "run_store.hpp"

namespace dlock::internal {

struct Engine {
  std::shared_ptr<Backend> lock;
  std::shared_ptr<RunStore> runs;       ///< null: the topology keeps no run records
  std::shared_ptr<AdminBackend> admin;  ///< null: the topology has no admin operations

  /// An engine whose one object `impl` implements all three seams.
  template <typename Impl>
  static Engine of(const std::shared_ptr<Impl>& impl) {
    return Engine{impl, impl, impl};
  }
};

/// Builds the engine for one configuration entry. Throws ConfigError for a topology this
/// build does not support yet, or TLS files that cannot be used ("backends.X.tls: ...").
Engine make_engine(const BackendConfig& config, const std::string& service,
                   std::shared_ptr<Metrics> metrics);

/// The engine's scheduled runs; throws NotSupported ("... not supported by <topology>").
RunStore& runs_of(const Engine& engine);
/// The engine's admin operations; throws AdminNotSupported ("... not supported by
/// <topology>").
AdminBackend& admin_of(const Engine& engine);

}  // namespace dlock::internal
