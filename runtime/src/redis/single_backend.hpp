// The `single` topology: one Redis server (or a primary managed by other means).
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"

namespace dlock::internal {

Engine make_single_backend(const BackendConfig& config, const std::string& service,
                           std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
