// Per-key release signals shared by waiters: whoever learns of a release (the memory
// store, the Redis subscriber) calls notify(); watches armed on that key wake up. A message
// "granted <token> <owner>" (release.lua handing the lock to a queued waiter) wakes only the
// watch that expects a grant to that owner; "turn <owner>" (a release of a fair lock, or of a
// shared one a writer waits for) wakes only that owner's watch, as a release.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "backend.hpp"

namespace dlock::internal {

class ReleaseSignals {
 public:
  /// Called with (channel, true) when a channel gains its first watcher and (channel,
  /// false) when it loses its last one, one call at a time and in the order of those
  /// changes, under no lock that notify(), channels() or a waiting watch take. It must not
  /// arm or drop a watch itself.
  using InterestHook = std::function<void(const std::string& channel, bool interested)>;

  explicit ReleaseSignals(InterestHook hook = {}) : hook_(std::move(hook)) {}

  std::unique_ptr<ReleaseWatch> watch(const std::string& channel);
  /// A release of `channel` was announced, with the message's payload (empty: a plain
  /// release, as is any payload that is not a grant).
  void notify(const std::string& channel, std::string_view payload = {});
  /// Channels that currently have watchers.
  [[nodiscard]] std::vector<std::string> channels() const;

 private:
  struct Signal {
    std::uint64_t generation = 0;
    int watchers = 0;
    /// Owners whose watches expect a grant (expect_grant) -> the granted token, 0 while none
    /// has come.
    std::map<std::string, std::uint64_t, std::less<>> grants;
    /// The same owners -> how many turns were announced for each.
    std::map<std::string, std::uint64_t, std::less<>> turns;
    /// The watches of this channel wait here: a message wakes only them, not every waiter
    /// of the process.
    std::condition_variable changed;
  };
  class Watch;

  void drop(const std::string& channel);

  InterestHook hook_;
  // Held across a first watch or a last drop and its hook call, so that the hook sees the
  // changes in the order they happen.
  std::mutex interest_mutex_;
  mutable std::mutex mutex_;
  std::map<std::string, Signal> signals_;
};

}  // namespace dlock::internal
