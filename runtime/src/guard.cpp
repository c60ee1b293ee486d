#include "dlock/guard.hpp"

#include <fmt/format.h>

#include "client_core.hpp"
#include "dlock/dlock.hpp"
#include "log.hpp"

namespace dlock {

Guard::Guard(const GuardSite& site, Key key) {
  Client client = dlock::client();  // a handle: init() elsewhere cannot pull it away
  const std::string name(site.name);
  const LockSettings settings = client.config().resolve(name, std::string(site.policy), site.attribute);
  lease_ = client.acquire(key, settings, name);
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
        internal::log(LogLevel::kInfo, "event=skipped name={} key={} on_busy=skip", internal::name_field(name),
                      internal::printable(key.str()));
        return;
      }
      if (settings.on_busy == OnBusy::kSkip) {
        internal::log(LogLevel::kWarn,
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
