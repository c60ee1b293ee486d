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

// The lease is built in place: a moved lease cannot be entered again by nested guards.
Guard::Guard(const GuardSite& site, const Key& key, const Resolved& resolved)
    : lease_(resolved.client.acquire(key, resolved.settings, resolved.name)) {
  Client& client = resolved.client;
  const std::string& name = resolved.name;
  const LockSettings& settings = resolved.settings;
  switch (lease_.status()) {
    case AcquireStatus::kAcquired:
      return;
    case AcquireStatus::kUnavailable:
      throw BackendUnavailable(fmt::format("{}: lock '{}': backend '{}' unavailable: {}", name,
                                           internal::printable(key.str()), settings.backend,
                                           lease_.error()));
    case AcquireStatus::kBusy:
      if (settings.on_busy == OnBusy::kSkip && site.skippable) {
        internal::bump(client.core()->metrics().for_name(name)->skipped);
        internal::log(LogLevel::kInfo, "event=skipped name={} key={} on_busy=skip",
                      internal::name_field(name), internal::printable(key.str()));
        return;
      }
      if (settings.on_busy == OnBusy::kSkip) {
        internal::log(
            LogLevel::kWarn,
            "event=skip_impossible name={} key={} detail=\"on_busy: skip, but the return type "
            "cannot be skipped; throwing\"",
            internal::name_field(name), internal::printable(key.str()));
      }
      throw LockNotAcquired(fmt::format("{}: lock '{}' not acquired within {}ms: {}", name,
                                        internal::printable(key.str()), settings.wait.count(),
                                        lease_.error()));
  }
}

}  // namespace dlock
