// A stand-in for the runtime's dlock/guard.hpp with the fields of GuardSite and
// LockOverrides in reverse order: woven code must set them by name, so the golden files
// compile against it as they do against the real header (tests/golden/CMakeLists.txt).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

using Millis = std::chrono::milliseconds;
enum class OnBusy { kThrow, kSkip };
enum class LockMode { kShared, kExclusive };
using Key = std::string;

struct LockOverrides {
  std::optional<int> permits;
  std::optional<bool> fair;
  std::optional<LockMode> mode;
  std::optional<std::string> backend;
  std::optional<Millis> max_hold;
  std::optional<Millis> min_hold;
  std::optional<OnBusy> on_busy;
  std::optional<Millis> wait;
  std::optional<Millis> lease;
};

struct GuardSite {
  int line = 0;
  std::string_view file;
  bool skippable = false;
  LockOverrides attribute;
  std::string_view policy;
  std::string_view name;
};

class Guard {
 public:
  Guard(const GuardSite& site, Key key) : site_(site), keys_{std::move(key)} {}
  Guard(const GuardSite& site, std::vector<Key> keys) : site_(site), keys_(std::move(keys)) {}
  bool entered() const { return !keys_.empty() && !site_.name.empty(); }

 private:
  const GuardSite& site_;
  std::vector<Key> keys_;
};

}  // namespace dlock
