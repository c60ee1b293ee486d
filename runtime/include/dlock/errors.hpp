// Exceptions that cross into user code. The runtime API reports "not acquired" as a value
// (Lease::status()); only woven guards and explicit helpers throw these.
#pragma once

#include <stdexcept>
#include <string>

namespace dlock {

/// A guard with on_busy=throw did not get its lock within `wait`.
class LockNotAcquired : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The lock server could not be reached within the configured timeouts.
class BackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The backend's topology cannot do what was asked (scheduled runs, admin operations).
/// The message names the topology and the backend.
class NotSupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace dlock
