// A cluster's slot map as CLUSTER SLOTS describes it: which master serves each slot, and
// every node (masters and replicas) that can carry pub/sub.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "redis/crc16.hpp"
#include "redis/reply.hpp"

namespace dlock::internal {

/// Which master serves each slot, as one node saw it.
struct SlotMap {
  std::vector<Endpoint> masters;
  std::vector<Endpoint> nodes;  ///< masters and replicas: anyone can carry pub/sub
  std::array<std::int16_t, kClusterSlots> owner{};  ///< index into masters; -1: nobody
};

/// The map in a CLUSTER SLOTS reply from `asked`; null if the reply is not one.
std::shared_ptr<SlotMap> parse_slots(const Reply& reply, const Endpoint& asked);

}  // namespace dlock::internal
