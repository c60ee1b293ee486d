#include "release_signals.hpp"

namespace dlock::internal {

class ReleaseSignals::Watch final : public ReleaseWatch {
 public:
  Watch(ReleaseSignals& owner, std::string channel, std::uint64_t seen)
      : owner_(owner), channel_(std::move(channel)), seen_(seen) {}
  ~Watch() override { owner_.drop(channel_); }

  bool wait_until(Clock::time_point until) override {
    std::unique_lock lock(owner_.mutex_);
    auto& signal = owner_.signals_[channel_];
    const bool fired =
        owner_.changed_.wait_until(lock, until, [&] { return signal.generation != seen_; });
    seen_ = signal.generation;
    return fired;
  }

 private:
  ReleaseSignals& owner_;
  std::string channel_;
  std::uint64_t seen_;
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

void ReleaseSignals::notify(const std::string& channel) {
  {
    std::lock_guard lock(mutex_);
    auto it = signals_.find(channel);
    if (it == signals_.end()) return;
    ++it->second.generation;
  }
  changed_.notify_all();
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
