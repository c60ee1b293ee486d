// Built as C++17: every public header must compile there. Runs a memory-backend lock so
// the check is more than a compile.
#include <dlock/admin.hpp>
#include <dlock/dlock.hpp>

#include <cstdio>

int main() {
  dlock::Config config;
  dlock::BackendConfig backend;
  backend.name = "default";
  backend.topology = dlock::Topology::kMemory;
  config.backends["default"] = backend;
  dlock::Client client(config);
  dlock::Lease lease = client.acquire("c++17", dlock::LockSettings{});
  if (!lease || dlock::current_lease().key() != dlock::Key("c++17")) return 1;
  {
    dlock::RunClaim run = dlock::claim_run(lease.view(), dlock::RunOptions{"c++17", std::chrono::minutes(1)});
    if (!run || dlock::Admin(client).runs("c++*").size() != 1) return 3;
  }
  if (lease.release() != dlock::ReleaseStatus::kReleased) return 2;
  std::puts("public headers work as C++17");
  return 0;
}
