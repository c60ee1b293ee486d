#include "engine.hpp"

#include <fmt/format.h>

#include "etcd/etcd_backend.hpp"
#include "memory/memory_backend.hpp"
#include "postgres/postgres_backend.hpp"
#include "redis/cluster_backend.hpp"
#include "redis/redlock_backend.hpp"
#include "redis/sentinel_backend.hpp"
#include "redis/single_backend.hpp"
#include "redis/tls.hpp"
#include "zookeeper/zookeeper_backend.hpp"

namespace dlock {

const char* to_string(Topology topology) noexcept {
  switch (topology) {
    case Topology::kSingle: return "single";
    case Topology::kSentinel: return "sentinel";
    case Topology::kCluster: return "cluster";
    case Topology::kRedlock: return "redlock";
    case Topology::kMemory: return "memory";
    case Topology::kPostgres: return "postgres";
    case Topology::kZookeeper: return "zookeeper";
    case Topology::kEtcd: return "etcd";
  }
  return "unknown";
}

namespace internal {
namespace {

std::string not_supported(const Engine& engine, std::string_view what) {
  const BackendConfig& config = engine.lock->config();
  return fmt::format("{} are not supported by {} (backend '{}')", what, to_string(config.topology),
                     config.name);
}

}  // namespace

Engine make_engine(const BackendConfig& config, const std::string& service,
                   std::shared_ptr<Metrics> metrics) {
  const auto require_endpoints = [&](std::string_view what) {
    if (config.endpoints.empty()) {
      throw ConfigError(fmt::format("backends.{}: this backend needs {}", config.name, what));
    }
  };
  // Redis authenticates only with a password: a user name alone would run as 'default'.
  if ((!config.username.empty() && config.password.empty()) ||
      (!config.sentinel_username.empty() && config.sentinel_password.empty())) {
    throw ConfigError(fmt::format(
        "backends.{}: a user name without a password would connect as the 'default' user",
        config.name));
  }
  // Read before any connection is made, so that a bad file fails dlock::init, not each call;
  // the connections find the context in TlsContext's registry.
  std::string why;
  if (config.tls.enabled && config.topology != Topology::kMemory &&
      config.topology != Topology::kPostgres && config.topology != Topology::kZookeeper &&
      config.topology != Topology::kEtcd && !TlsContext::get(config.tls, why)) {
    throw ConfigError(fmt::format("backends.{}.tls: {}", config.name, why));
  }
  switch (config.topology) {
    case Topology::kMemory:
      return make_memory_backend(config, service);
    case Topology::kSingle:
      require_endpoints("an address");
      return make_single_backend(config, service, std::move(metrics));
    case Topology::kSentinel:
      require_endpoints("at least one sentinel");
      if (config.master_name.empty()) {
        throw ConfigError(
            fmt::format("backends.{}: a sentinel backend needs master_name", config.name));
      }
      return make_sentinel_backend(config, service, std::move(metrics));
    case Topology::kCluster:
      require_endpoints("at least one node");
      return make_cluster_backend(config, service, std::move(metrics));
    case Topology::kRedlock:
      require_endpoints("at least one instance");
      return make_redlock_backend(config, service, std::move(metrics));
    case Topology::kPostgres:
      return make_postgres_backend(config, service, std::move(metrics));
    case Topology::kZookeeper:
      return make_zookeeper_backend(config, service, std::move(metrics));
    case Topology::kEtcd:
      require_endpoints("at least one member");
      return make_etcd_backend(config, service, std::move(metrics));
  }
  throw ConfigError(fmt::format("backends.{}: unknown topology", config.name));
}

RunStore& runs_of(const Engine& engine) {
  if (!engine.runs) throw NotSupported(not_supported(engine, "scheduled runs"));
  return *engine.runs;
}

AdminBackend& admin_of(const Engine& engine) {
  if (!engine.admin) throw AdminNotSupported(not_supported(engine, "admin operations"));
  return *engine.admin;
}

}  // namespace internal
}  // namespace dlock
