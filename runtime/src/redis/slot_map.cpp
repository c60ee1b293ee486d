#include "redis/slot_map.hpp"

#include <algorithm>
#include <optional>
#include <string>

namespace dlock::internal {
namespace {

// One node entry of CLUSTER SLOTS: [host, port, id, ...]. An empty or '?' host means the
// node did not know its own address: it is the one we asked.
std::optional<Endpoint> node_of(ReplyView entry, const Endpoint& asked) {
  const std::optional<long long> port = entry[1].integer();
  if (entry.size() < 2 || !port) return std::nullopt;
  Endpoint node{std::string(entry[0].text()), static_cast<int>(*port)};
  if (node.host.empty() || node.host == "?") node.host = asked.host;
  return node;
}

}  // namespace

std::shared_ptr<SlotMap> parse_slots(const Reply& reply, const Endpoint& asked) {
  const ReplyView ranges(reply);
  if (ranges.size() == 0) return nullptr;
  auto map = std::make_shared<SlotMap>();
  map->owner.fill(-1);
  auto index_of = [](std::vector<Endpoint>& list, const Endpoint& e) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i] == e) return i;
    }
    list.push_back(e);
    return list.size() - 1;
  };
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const ReplyView range = ranges[r];
    const std::optional<long long> first = range[0].integer(), last = range[1].integer();
    if (range.size() < 3 || !first || !last) return nullptr;
    const auto master = node_of(range[2], asked);
    if (!master) return nullptr;
    const auto index = static_cast<std::int16_t>(index_of(map->masters, *master));
    index_of(map->nodes, *master);
    for (std::size_t n = 3; n < range.size(); ++n) {
      if (auto replica = node_of(range[n], asked)) index_of(map->nodes, *replica);
    }
    for (long long slot = std::max(0LL, *first);
         slot <= std::min<long long>(*last, kClusterSlots - 1); ++slot) {
      map->owner[static_cast<std::size_t>(slot)] = index;
    }
  }
  return map;
}


}  // namespace dlock::internal
