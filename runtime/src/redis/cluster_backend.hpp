// The `cluster` topology: Redis Cluster. Each lock goes to the master of its slot (CRC16 of
// the hash tag that the lock's keys share), from a slot map read with CLUSTER SLOTS and
// refreshed on MOVED. ASK is followed with ASKING; TRYAGAIN, CLUSTERDOWN and unreachable
// nodes are retried with back-off within the call's time bound. One pool per node.
// Release notifications use PUBLISH, which a cluster forwards to every node, so one
// subscriber connection to any node hears them all.
#pragma once

#include <memory>
#include <string>

#include "engine.hpp"

namespace dlock::internal {

Engine make_cluster_backend(const BackendConfig& config, const std::string& service,
                            std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
