// What the topologies' files share: small random picks, YAML lists and the network faults of
// a proxy (topologies.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "topologies.hpp"

namespace checker {

using namespace std::chrono_literals;

std::string yaml_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

std::size_t pick(std::mt19937& rng, std::size_t n) {
  return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
}

std::chrono::milliseconds between(std::mt19937& rng, std::chrono::milliseconds low,
                                  std::chrono::milliseconds high) {
  return std::chrono::milliseconds(std::uniform_int_distribution<long long>(low.count(), high.count())(rng));
}

// The network faults of a proxy between the clients and one server; every one ends with the
// proxy forwarding again.
const std::vector<std::string> kNetworkFaults{"net-blackhole", "net-delay", "net-reset"};

std::string network_fault(const std::string& kind, dlock::test::TcpProxy& proxy,
                          std::chrono::milliseconds lease, std::mt19937& rng, const std::string& what) {
  if (kind == "net-blackhole") {  // nothing crosses; held bytes cross after it heals
    const auto held = lease + between(rng, 200ms, 1000ms);
    proxy.blackhole();
    std::this_thread::sleep_for(held);
    proxy.pass();
    return fmt::format("connections to {} held (blackhole) for {} ms", what, held.count());
  }
  if (kind == "net-delay") {  // every byte late, for two leases
    const auto late = between(rng, 50ms, lease / 2);
    proxy.delay(late);
    std::this_thread::sleep_for(2 * lease);
    proxy.pass();
    return fmt::format("connections to {} delayed by {} ms for {} ms", what, late.count(), (2 * lease).count());
  }
  if (kind != "net-reset") throw std::logic_error("no network fault " + kind);
  const auto down = between(rng, 100ms, 500ms);
  proxy.reset();
  std::this_thread::sleep_for(down);
  proxy.pass();
  return fmt::format("connections to {} reset (RST), new ones too, for {} ms", what, down.count());
}

bool is_network_fault(const std::string& kind) {
  return std::find(kNetworkFaults.begin(), kNetworkFaults.end(), kind) != kNetworkFaults.end();
}

std::vector<std::string> quorum_group_faults() {
  std::vector<std::string> kinds{"kill-leader", "stop-member", "restart-ensemble",
                                 "net-all-blackhole"};
  kinds.insert(kinds.end(), kNetworkFaults.begin(), kNetworkFaults.end());
  return kinds;
}

}  // namespace checker
