// The `memory` topology: the lock semantics of the Redis backends inside one process, for
// unit tests and single-process development. It is not distributed: two processes never
// see each other's locks. Clients in one process with the same service and backend name
// share one store, so tests can play several instances.
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"

namespace dlock::internal {

Engine make_memory_backend(const BackendConfig& config, const std::string& service);

}  // namespace dlock::internal
