#include <fmt/format.h>

#include "backend.hpp"
#include "memory/memory_backend.hpp"
#include "redis/single_backend.hpp"

namespace dlock::internal {

std::shared_ptr<Backend> make_backend(const BackendConfig& config, const std::string& service,
                                      std::shared_ptr<Metrics> metrics) {
  switch (config.topology) {
    case Topology::kMemory:
      return make_memory_backend(config, service);
    case Topology::kSingle:
      if (config.endpoints.empty()) {
        throw ConfigError(fmt::format("backends.{}: a single backend needs an address", config.name));
      }
      return make_single_backend(config, service, std::move(metrics));
    case Topology::kSentinel:
    case Topology::kCluster:
    case Topology::kRedlock:
      break;
  }
  throw ConfigError(fmt::format(
      "backends.{}: topology sentinel, cluster and redlock are not supported yet by this "
      "release; use single or memory",
      config.name));
}

}  // namespace dlock::internal
