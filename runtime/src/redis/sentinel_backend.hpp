// The `sentinel` topology: the master is asked of the sentinels (SENTINEL
// GET-MASTER-ADDR-BY-NAME), confirmed with ROLE, and followed across failovers (the
// sentinels' +switch-master, or a refused connection or READONLY from the old master).
// With wait_replicas, an acquisition counts only once WAIT confirms the replicas.
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"

namespace dlock::internal {

Engine make_sentinel_backend(const BackendConfig& config, const std::string& service,
                             std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
