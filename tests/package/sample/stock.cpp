#include "stock.hpp"

#include <dlock/dlock.hpp>

#include <cstdio>

namespace inventory {

bool reserve(const Item& item, int count) {
  const dlock::LeaseView lease = dlock::current_lease();
  // Another client (another instance, as far as the lock server can tell) is refused.
  dlock::Client other(dlock::client().config());
  dlock::LockSettings once;
  once.wait = std::chrono::milliseconds(0);
  const bool refused = other.try_acquire(lease.key(), once).status() == dlock::AcquireStatus::kBusy;
  std::printf("reserve %s x%d: key=%s token>0=%d other-client-refused=%d\n", item.sku.c_str(), count,
              lease.key().str().c_str(), lease.token() > 0, refused);
  return lease && refused;
}

}  // namespace inventory
