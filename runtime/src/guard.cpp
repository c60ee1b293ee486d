#include "dlock/guard.hpp"

#include <fmt/format.h>

#include "client_core.hpp"
#include "dlock/dlock.hpp"
#include "log.hpp"

namespace dlock {

struct Guard::Resolved {
  explicit Resolved(const GuardSite& site)
      : client(dlock::client()),
        name(site.name),
        settings(client.config().resolve(name, std::string(site.policy), site.attribute)) {}

  mutable Client client;  // a handle: init() elsewhere cannot pull it away
  std::string name;
  LockSettings settings;
};

Guard::Guard(const GuardSite& site, Key key) : Guard(site, key, Resolved(site)) {}

Guard::Guard(const GuardSite& site, std::vector<Key> keys) : Guard(site, keys, Resolved(site)) {}

// The lease is built in place: a moved lease cannot be entered again by nested guards.
Guard::Guard(const GuardSite& site, const Key& key, const Resolved& resolved)
    : lease_(resolved.client.acquire(key, resolved.settings, resolved.name)) {
  if (!lease_.acquired()) settle(site, resolved, internal::printable(key.str()));
}

Guard::Guard(const GuardSite& site, const std::vector<Key>& keys, const Resolved& resolved)
    : lease_(resolved.client.acquire(keys, resolved.settings, resolved.name)) {
  if (lease_.acquired()) return;
  std::string names;
  for (const Key& key : keys) {
    if (!names.empty()) names += "', '";
    names += internal::printable(key.str());
  }
  settle(site, resolved, names);
}

void Guard::settle(const GuardSite& site, const Resolved& resolved,
                   const std::string& keys) const {
  Client& client = resolved.client;
  const std::string& name = resolved.name;
  const LockSettings& settings = resolved.settings;
  switch (lease_.status()) {
    case AcquireStatus::kAcquired:
      return;
    case AcquireStatus::kUnavailable:
      throw BackendUnavailable(fmt::format("{}: lock '{}': backend '{}' unavailable: {}", name,
                                           keys, settings.backend, lease_.error()));
    case AcquireStatus::kRefused:
      throw LockNotAcquired(fmt::format("{}: lock '{}' refused: {}", name, keys, lease_.error()));
    case AcquireStatus::kBusy:
      if (settings.on_busy == OnBusy::kSkip && site.skippable) {
        internal::bump(client.core()->metrics().for_name(name)->skipped);
        internal::log(LogLevel::kInfo, "event=skipped name={} key={} on_busy=skip",
                      internal::name_field(name), keys);
        return;
      }
      if (settings.on_busy == OnBusy::kSkip) {
        internal::log(
            LogLevel::kWarn,
            "event=skip_impossible name={} key={} detail=\"on_busy: skip, but the return type "
            "cannot be skipped; throwing\"",
            internal::name_field(name), keys);
      }
      throw LockNotAcquired(fmt::format("{}: lock '{}' not acquired within {}ms: {}", name, keys,
                                        settings.wait.count(), lease_.error()));
  }
}

}  // namespace dlock
