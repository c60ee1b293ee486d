// "127.0.0.1:PORT" strings of the harness (RedisServer::endpoint(), the groups'
// endpoint lists) as dlock Endpoints, for building configurations in code. Header-only; the
// including target links dlock::runtime.
#pragma once

#include <string>
#include <vector>

#include "dlock/config.hpp"

namespace dlock::test {

inline std::vector<Endpoint> endpoints_of(const std::vector<std::string>& host_ports) {
  std::vector<Endpoint> out;
  for (const auto& hp : host_ports) {
    const auto colon = hp.rfind(':');
    out.push_back(Endpoint{hp.substr(0, colon), std::stoi(hp.substr(colon + 1))});
  }
  return out;
}

}  // namespace dlock::test
