#include "corpus/probe.hpp"

#include <dlock/dlock.hpp>

#include <chrono>

namespace corpus {

bool held_elsewhere(const std::string& key) {
  const dlock::LeaseView lease = dlock::current_lease();
  if (!lease || lease.key().str().find(key) == std::string::npos) return false;
  static dlock::Client other(dlock::client().config());
  dlock::LockSettings once;
  once.wait = std::chrono::milliseconds(0);
  return other.try_acquire(lease.key(), once).status() == dlock::AcquireStatus::kBusy;
}

}  // namespace corpus
