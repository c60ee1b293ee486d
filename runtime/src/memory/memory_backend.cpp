#include "memory/memory_backend.hpp"

#include <chrono>
#include <map>
#include <mutex>

#include "release_signals.hpp"

namespace dlock::internal {
namespace {

class MemoryStore {
 public:
  GrantReply acquire(const GrantRequest& request) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    auto& entry = locks_[request.key.str()];
    if (entry.owner.empty() || entry.expires_at <= now) {
      // Same rule as the Redis scripts: strictly increasing, seeded from the clock so that
      // tokens keep growing even if the counter is forgotten.
      const auto clock_us = static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(
              std::chrono::system_clock::now().time_since_epoch()).count());
      auto& fence = fences_[request.key.str()];
      fence = std::max(fence + 1, clock_us);
      entry = Entry{std::string(request.owner), fence, later(now, request.lease)};
      return GrantReply{GrantReply::Kind::kAcquired, fence, Millis{0}, false, {}};
    }
    if (entry.owner == request.owner) {
      return GrantReply{GrantReply::Kind::kAcquired, entry.token, Millis{0}, false, {}};
    }
    return GrantReply{GrantReply::Kind::kBusy, 0,
                      std::chrono::ceil<Millis>(entry.expires_at - now), false, {}};
  }

  void renew(std::vector<RenewItem>& items) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    for (auto& item : items) {
      auto* entry = live(item.key->str(), now);
      if (entry == nullptr) {
        item.outcome = RenewOutcome::kGone;
      } else if (entry->owner != item.owner) {
        item.outcome = RenewOutcome::kTaken;
      } else {
        entry->expires_at = later(now, item.ttl);
        item.outcome = RenewOutcome::kRenewed;
      }
    }
  }

  ReleaseOutcome release(const Key& key, std::string_view owner, Millis keep_for) {
    {
      std::lock_guard lock(mutex_);
      const auto now = Clock::now();
      auto* entry = live(key.str(), now);
      if (entry == nullptr) return ReleaseOutcome::kGone;
      if (entry->owner != owner) return ReleaseOutcome::kTaken;
      if (keep_for > Millis{0}) {
        entry->expires_at = later(now, keep_for);
        return ReleaseOutcome::kKept;
      }
      locks_.erase(key.str());
    }
    signals_.notify(key.str());
    return ReleaseOutcome::kReleased;
  }

  ReleaseSignals& signals() { return signals_; }

 private:
  struct Entry {
    std::string owner;
    std::uint64_t token = 0;
    Clock::time_point expires_at;
  };

  Entry* live(const std::string& key, Clock::time_point now) {
    auto it = locks_.find(key);
    if (it == locks_.end()) return nullptr;
    if (it->second.expires_at <= now) {
      locks_.erase(it);
      return nullptr;
    }
    return &it->second;
  }

  std::mutex mutex_;
  std::map<std::string, Entry> locks_;
  std::map<std::string, std::uint64_t> fences_;
  ReleaseSignals signals_;
};

std::shared_ptr<MemoryStore> shared_store(const std::string& service, const std::string& backend) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, std::weak_ptr<MemoryStore>> stores;
  std::lock_guard lock(mutex);
  auto& slot = stores[{service, backend}];
  auto store = slot.lock();
  if (!store) {
    store = std::make_shared<MemoryStore>();
    slot = store;
  }
  return store;
}

class MemoryBackend final : public Backend {
 public:
  MemoryBackend(BackendConfig config, std::shared_ptr<MemoryStore> store)
      : config_(std::move(config)), store_(std::move(store)) {}

  GrantReply acquire(const GrantRequest& request) override { return store_->acquire(request); }
  void renew(std::vector<RenewItem>& items) override { store_->renew(items); }
  ReleaseOutcome release(const Key& key, std::string_view owner, Millis keep_for) noexcept override {
    try {
      return store_->release(key, owner, keep_for);
    } catch (...) {
      return ReleaseOutcome::kUnavailable;
    }
  }
  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return store_->signals().watch(key.str());
  }
  const BackendConfig& config() const override { return config_; }

 private:
  BackendConfig config_;
  std::shared_ptr<MemoryStore> store_;
};

}  // namespace

std::shared_ptr<Backend> make_memory_backend(const BackendConfig& config, const std::string& service) {
  return std::make_shared<MemoryBackend>(config, shared_store(service, config.name));
}

}  // namespace dlock::internal
