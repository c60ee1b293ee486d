// The topologies with one writable master: `single` (a fixed address) and `sentinel` (the
// master is found through the sentinels and followed across failovers). The lock logic is
// shared; where the master is, is the MasterLocator's business.
//
//   auto backend = make_master_backend(config, service, metrics,
//                                      std::make_unique<FixedMaster>(config.endpoints[0], config));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine.hpp"
#include "redis/pool.hpp"

namespace dlock::internal {

/// Finds the master and keeps a connection pool to it.
class MasterLocator {
 public:
  struct Master {
    std::shared_ptr<ConnectionPool> pool;  ///< null when no master is known
    std::uint64_t generation = 0;          ///< changes whenever the master changes
    std::string error;                     ///< why no (new) master was found
  };
  using Listener = std::function<void(const Endpoint& master)>;

  virtual ~MasterLocator() = default;
  /// The master to use now, looked up first if none is known yet (bounded by `deadline`).
  virtual Master current(Clock::time_point deadline) = 0;
  /// The master of `generation` failed as a master (connection refused, READONLY): look
  /// again. The result has a different generation only if another master was found.
  virtual Master relocate(std::uint64_t generation, Clock::time_point deadline) = 0;
  /// The master's pool if one is known now; never looks, never waits.
  virtual std::shared_ptr<ConnectionPool> known() = 0;
  /// `listener` is called (from any thread) whenever the master changes.
  virtual void set_listener(Listener listener) = 0;
};

/// `single`: the master is where the configuration says, always.
class FixedMaster final : public MasterLocator {
 public:
  FixedMaster(const Endpoint& endpoint, const BackendConfig& config)
      : pool_(std::make_shared<ConnectionPool>(endpoint, config, sharing_for(config))) {}
  Master current(Clock::time_point) override { return {pool_, 0, {}}; }
  Master relocate(std::uint64_t, Clock::time_point) override { return {pool_, 0, {}}; }
  std::shared_ptr<ConnectionPool> known() override { return pool_; }
  void set_listener(Listener) override {}

 private:
  const std::shared_ptr<ConnectionPool> pool_;
};

Engine make_master_backend(const BackendConfig& config, const std::string& service,
                           std::shared_ptr<Metrics> metrics,
                           std::unique_ptr<MasterLocator> locator);

}  // namespace dlock::internal
