// A stand-in for the runtime's dlock/guard.hpp with the fields of GuardSite and
// LockOverrides in reverse order: woven code must set them by name, so the golden files
// compile against it as they do against the real header (tests/golden/CMakeLists.txt).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace dlock {

using Millis = std::chrono::milliseconds;
enum class OnBusy { kThrow, kSkip };

struct LockOverrides {
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
  Guard(const GuardSite& site, std::string key) : site_(site), key_(std::move(key)) {}
  bool entered() const { return !key_.empty() && !site_.name.empty(); }

 private:
  const GuardSite& site_;
  std::string key_;
};

}  // namespace dlock
