#pragma once
#include <dlock/dlock.hpp>

#include <chrono>
#include <cstdio>
#include <string>

namespace inventory {

// Whether another client (another instance, as far as the lock server can tell) is refused
// the lock this thread holds now.
inline bool held_elsewhere(const char* what, int count) {
  const dlock::LeaseView lease = dlock::current_lease();
  dlock::Client other(dlock::client().config());
  dlock::LockSettings once;
  once.wait = std::chrono::milliseconds(0);
  const bool refused = other.try_acquire(lease.key(), once).status() == dlock::AcquireStatus::kBusy;
  std::printf("%s x%d: key=%s token>0=%d other-client-refused=%d\n", what, count,
              lease.key().str().c_str(), lease.token() > 0, refused);
  return lease && refused;
}

/// Guarded functions defined in a header: a member in its class body and a function
/// template. Every woven source that includes this header compiles them with their locks.
class Shelf {
 public:
  explicit Shelf(std::string name) : name_(std::move(name)) {}

  [[dlock::guard("shelf:<this->name_>", lease=5s, wait=2s)]]
  bool restock(int count) { return held_elsewhere("restock", count); }

 private:
  std::string name_;
};

template <typename Count>
[[dlock::guard("bin:<bin>", lease=5s, wait=2s)]]
bool count_bin(long bin, Count count) {
  return held_elsewhere("count_bin", static_cast<int>(count));
}

}  // namespace inventory
