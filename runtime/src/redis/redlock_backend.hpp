// The `redlock` topology: N independent masters asked in parallel, each within a per-node
// timeout well under the lease (min(command_timeout, lease/10)). A lock is held when a
// quorum of N/2+1 granted it before the lease ran out; otherwise it is released on every
// instance. Renewals need the quorum too. See docs/TOPOLOGIES.md for the guarantees,
// including what the fencing token means here. The lock calls are in redlock_backend.cpp,
// scheduled runs and admin in redlock_records.cpp, and how all instances are asked in
// redlock_quorum.cpp.
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"

namespace dlock::internal {

class RedlockQuorum;

Engine make_redlock_backend(const BackendConfig& config, const std::string& service,
                            std::shared_ptr<Metrics> metrics);
/// The same over instances asked through `quorum` (tests share it to hold its connections).
Engine make_redlock_backend(std::shared_ptr<RedlockQuorum> quorum, const std::string& service,
                            std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
