// Per-key release signals shared by waiters: whoever learns of a release (the memory
// store, the Redis subscriber) calls notify(); watches armed on that key wake up.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

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
  void notify(const std::string& channel);
  /// Channels that currently have watchers.
  [[nodiscard]] std::vector<std::string> channels() const;

 private:
  struct Signal {
    std::uint64_t generation = 0;
    int watchers = 0;
  };
  class Watch;

  void drop(const std::string& channel);

  InterestHook hook_;
  // Held across a first watch or a last drop and its hook call, so that the hook sees the
  // changes in the order they happen.
  std::mutex interest_mutex_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Signal> signals_;
};

}  // namespace dlock::internal
