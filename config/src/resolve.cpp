// Turning the layered overrides of a Config into the settings of one lock.
#include <fmt/format.h>

#include <string>

#include "values.hpp"

namespace dlock {
namespace internal {
namespace {

constexpr std::string_view kDefaultName = "default";
constexpr std::string_view kBuiltinHost = "127.0.0.1";
constexpr int kBuiltinPort = 6379;

// "(configured: a, b)" for a message that rejects a name.
template <typename Map>
std::string configured_names(const Map& map, std::string_view what) {
  if (map.empty()) return fmt::format("(no {} are configured)", what);
  std::string names;
  for (const auto& [name, value] : map) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return fmt::format("(configured: {})", names);
}

[[noreturn]] void fail(const Config& config, const std::string& guard_name,
                       const std::string& message) {
  throw ConfigError(fmt::format("{}: error: guard '{}': {}", config.source, guard_name, message));
}

// The YAML's permits are checked at load time; the attribute's (or the API's) only here.
void check_kind(const Config& config, const std::string& guard_name,
                const LockSettings& settings) {
  if (settings.permits < 0 || settings.permits > kMaxPermits) {
    fail(config, guard_name,
         fmt::format("permits {} is out of range: a semaphore has 1 to {} permits (0: a lock)",
                     settings.permits, kMaxPermits));
  }
  if (settings.permits > 0 && settings.mode == LockMode::kShared) {
    fail(config, guard_name,
         fmt::format("permits={} cannot be used with mode=shared: every permit is an exclusive "
                     "hold",
                     settings.permits));
  }
}

}  // namespace
}  // namespace internal

Config Config::builtin() {
  Config config;
  config.service = std::string(internal::kDefaultName);
  BackendConfig backend;
  backend.name = std::string(internal::kDefaultName);
  backend.topology = Topology::kSingle;
  backend.endpoints.push_back(
      Endpoint{std::string(internal::kBuiltinHost), internal::kBuiltinPort});
  config.backends.emplace(backend.name, std::move(backend));
  config.source = "<built-in>";
  return config;
}

LockSettings Config::resolve(const std::string& guard_name, const std::string& policy,
                             const LockOverrides& attribute) const {
  LockSettings settings;
  // With on_busy=skip a guard that waits is rarely what anyone means, so skip implies a
  // single try unless some level asked for a wait explicitly.
  bool wait_given = false;
  const auto apply = [&](const LockOverrides& level) {
    if (level.lease) settings.lease = *level.lease;
    if (level.wait) {
      settings.wait = *level.wait;
      wait_given = true;
    }
    if (level.on_busy) settings.on_busy = *level.on_busy;
    if (level.min_hold) settings.min_hold = *level.min_hold;
    if (level.max_hold) settings.max_hold = *level.max_hold;
    if (level.backend) settings.backend = *level.backend;
    if (level.mode) settings.mode = *level.mode;
    if (level.fair) settings.fair = *level.fair;
    if (level.permits) settings.permits = *level.permits;
  };

  apply(defaults);
  if (!policy.empty()) {
    const auto found = policies.find(policy);
    if (found == policies.end()) {
      internal::fail(*this, guard_name,
                     fmt::format("unknown policy '{}' {}", policy,
                                 internal::configured_names(policies, "policies")));
    }
    apply(found->second);
  }
  apply(attribute);
  if (const auto found = locks.find(guard_name); found != locks.end()) apply(found->second);

  if (settings.on_busy == OnBusy::kSkip && !wait_given) settings.wait = Millis(0);

  if (backends.find(settings.backend) == backends.end()) {
    internal::fail(*this, guard_name,
                   fmt::format("backend '{}' is not configured {}", settings.backend,
                               internal::configured_names(backends, "backends")));
  }
  // The file's leases are checked at load time; an attribute's only here.
  if (settings.lease < kMinimumLease) {
    internal::fail(*this, guard_name,
                   fmt::format("lease {} is too short: must be at least {}, as the watchdog "
                               "renews a lease every lease/3",
                               internal::format_millis(settings.lease),
                               internal::format_millis(kMinimumLease)));
  }
  // Each level is checked on its own at load time; only the combination can still clash.
  if (settings.max_hold && settings.min_hold > *settings.max_hold) {
    internal::fail(
        *this, guard_name,
        fmt::format("min_hold {} exceeds max_hold {}", internal::format_millis(settings.min_hold),
                    internal::format_millis(*settings.max_hold)));
  }
  internal::check_kind(*this, guard_name, settings);
  return settings;
}

const char* to_string(LockMode mode) noexcept {
  return mode == LockMode::kShared ? "shared" : "exclusive";
}

}  // namespace dlock
