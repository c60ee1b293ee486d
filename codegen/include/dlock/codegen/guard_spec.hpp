// What one [[dlock::guard(...)]] asks for, after parsing and before any look at the function.
//
//   [[dlock::guard("order:<id>", lease=30s, on_busy=skip)]]
//   -> GuardSpec{keys = {"order:{}" <id>}, lease = 30000ms, on_busy = kSkip}
//
//   [[dlock::guard("account:<from>", "account:<to>", mode=shared)]]
//   -> GuardSpec{keys = {"account:{}" <from>, "account:{}" <to>}, mode = kShared}
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dlock/codegen/duration.hpp"
#include "dlock/codegen/key_template.hpp"
// The runtime's option types, not twins of them: a header of the standard library only, so
// the generator includes it without linking the runtime.
#include "dlock/config.hpp"

namespace dlock::codegen {

/// `on_busy=`: what to do when the lock is not acquired within `wait`.
using BusyAction = ::dlock::OnBusy;

/// The lock settings an attribute may give; unset ones fall through to the configuration at
/// run time (built-in, `defaults`, the policy), and `locks.<name>` in YAML overrides them all.
/// An attribute never sets `backend`: that is a policy's.
using LockOptions = ::dlock::LockOverrides;

/// The attribute's arguments.
struct GuardSpec {
  /// The key templates, in the order written; at least one once the arguments parse.
  std::vector<KeyTemplate> keys;
  LockOptions options;
  std::optional<std::string> policy;
  std::optional<std::string> name;
  /// Where the `on_busy` value is written, for the return-type check of `skip`.
  std::size_t on_busy_offset = 0;
  std::size_t on_busy_length = 0;
};

}  // namespace dlock::codegen
