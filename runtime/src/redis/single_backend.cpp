#include "redis/single_backend.hpp"

#include "redis/master_backend.hpp"

namespace dlock::internal {

Engine make_single_backend(const BackendConfig& config, const std::string& service,
                           std::shared_ptr<Metrics> metrics) {
  return make_master_backend(config, service, std::move(metrics),
                             std::make_unique<FixedMaster>(config.endpoints.at(0), config));
}

}  // namespace dlock::internal
