#include "release_signals.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

namespace dlock::internal {

class ReleaseSignals::Watch final : public ReleaseWatch {
 public:
  Watch(ReleaseSignals& owner, std::string channel, std::uint64_t seen)
      : owner_(owner), channel_(std::move(channel)), seen_(seen) {}
  ~Watch() override {
    if (!expected_.empty()) {
      std::lock_guard lock(owner_.mutex_);
      auto it = owner_.signals_.find(channel_);
      if (it != owner_.signals_.end()) {
        it->second.grants.erase(expected_);
        it->second.turns.erase(expected_);
      }
    }
    owner_.drop(channel_);
  }

  Wake wait_until(Clock::time_point until) override {
    std::unique_lock lock(owner_.mutex_);
    auto& signal = owner_.signals_[channel_];
    const auto granted = [&] {
      if (expected_.empty()) return false;
      auto it = signal.grants.find(expected_);
      return it != signal.grants.end() && it->second > above_;
    };
    const auto turns = [&]() -> std::uint64_t {
      if (expected_.empty()) return 0;
      auto it = signal.turns.find(expected_);
      return it == signal.turns.end() ? 0 : it->second;
    };
    signal.changed.wait_until(lock, until, [&] {
      return signal.generation != seen_ || granted() || turns() != turns_seen_;
    });
    if (granted()) {
      token_ = signal.grants.find(expected_)->second;
      return Wake::kGranted;
    }
    if (signal.generation == seen_ && turns() == turns_seen_) return Wake::kTimeout;
    seen_ = signal.generation;
    turns_seen_ = turns();
    return Wake::kReleased;
  }

  void expect_grant(std::string_view owner, std::uint64_t above) override {
    std::lock_guard lock(owner_.mutex_);
    auto& grants = owner_.signals_[channel_].grants;
    auto& turns = owner_.signals_[channel_].turns;
    if (!expected_.empty() && expected_ != owner) {
      grants.erase(expected_);
      turns.erase(expected_);
    }
    if (expected_ != owner) {
      above_ = 0;
      turns_seen_ = 0;
    }
    expected_ = std::string(owner);
    turns.try_emplace(expected_, 0);
    // Never lowered: a later answer that shows a lower last token (a server that lost the
    // counter) must not make an older grant, since lost, look new.
    above_ = std::max(above_, above);
    grants.try_emplace(expected_, 0);
  }

  [[nodiscard]] std::uint64_t granted_token() const override { return token_; }

 private:
  ReleaseSignals& owner_;
  std::string channel_;
  std::uint64_t seen_;
  std::string expected_;  // the owner a grant is expected for, empty for none
  std::uint64_t above_ = 0;
  std::uint64_t token_ = 0;
  std::uint64_t turns_seen_ = 0;  // turns announced for expected_ that woke this watch
};

std::unique_ptr<ReleaseWatch> ReleaseSignals::watch(const std::string& channel) {
  // Without this, a last drop racing a first watch could call the hook with (true) and then
  // (false), leaving the channel unsubscribed while somebody waits on it.
  std::lock_guard interest(interest_mutex_);
  bool first;
  std::uint64_t seen;
  {
    std::lock_guard lock(mutex_);
    auto& signal = signals_[channel];
    first = signal.watchers++ == 0;
    seen = signal.generation;
  }
  if (first && hook_) hook_(channel, true);
  return std::make_unique<Watch>(*this, channel, seen);
}

namespace {

// "granted <token> <owner>" -> (token, owner); anything else is a plain release.
std::optional<std::pair<std::uint64_t, std::string_view>> grant_in(std::string_view payload) {
  constexpr std::string_view kPrefix = "granted ";
  if (payload.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  payload.remove_prefix(kPrefix.size());
  const auto space = payload.find(' ');
  if (space == std::string_view::npos || space == 0) return std::nullopt;
  std::uint64_t token = 0;
  const auto [end, error] = std::from_chars(payload.data(), payload.data() + space, token);
  if (error != std::errc{} || end != payload.data() + space || token == 0) return std::nullopt;
  return std::pair{token, payload.substr(space + 1)};
}

// "turn <owner>" -> owner; nullopt for anything else.
std::optional<std::string_view> turn_in(std::string_view payload) {
  constexpr std::string_view kPrefix = "turn ";
  if (payload.substr(0, kPrefix.size()) != kPrefix || payload.size() == kPrefix.size()) {
    return std::nullopt;
  }
  return payload.substr(kPrefix.size());
}

}  // namespace

void ReleaseSignals::notify(const std::string& channel, std::string_view payload) {
  // Under the lock: a last watch dropped once it is released takes the condition with it.
  std::lock_guard lock(mutex_);
  auto it = signals_.find(channel);
  if (it == signals_.end()) return;
  if (const auto grant = grant_in(payload)) {
    // The lock went to a queued waiter: only that waiter (if it is one of ours) has
    // anything to do; the others would find the lock busy.
    auto waiter = it->second.grants.find(grant->second);
    if (waiter == it->second.grants.end()) return;
    waiter->second = std::max(waiter->second, grant->first);
  } else if (const auto turn = turn_in(payload)) {
    // Only that waiter may take the lock now; the others would find it busy.
    auto waiter = it->second.turns.find(*turn);
    if (waiter == it->second.turns.end()) return;
    ++waiter->second;
  } else {
    ++it->second.generation;
  }
  it->second.changed.notify_all();
}

std::vector<std::string> ReleaseSignals::channels() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [channel, signal] : signals_) {
    if (signal.watchers > 0) out.push_back(channel);
  }
  return out;
}

void ReleaseSignals::drop(const std::string& channel) {
  std::lock_guard interest(interest_mutex_);
  bool last = false;
  {
    std::lock_guard lock(mutex_);
    auto it = signals_.find(channel);
    if (it != signals_.end() && --it->second.watchers == 0) {
      signals_.erase(it);
      last = true;
    }
  }
  if (last && hook_) hook_(channel, false);
}

}  // namespace dlock::internal
