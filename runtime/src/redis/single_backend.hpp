// The `single` topology: one Redis server (or a primary managed by other means).
#pragma once

#include <memory>
#include <string>

#include "backend.hpp"

namespace dlock::internal {

std::shared_ptr<Backend> make_single_backend(const BackendConfig& config, const std::string& service,
                                             std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
