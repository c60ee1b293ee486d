#include "memory/memory_backend.hpp"

#include <chrono>
#include <map>
#include <mutex>

#include "log.hpp"
#include "owner.hpp"
#include "release_signals.hpp"

namespace dlock::internal {
namespace {

class MemoryStore {
 public:
  GrantReply acquire(const GrantRequest& request) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    prune_if_grown(now);
    auto& entry = locks_[request.key.str()];
    if (entry.owner.empty() || entry.expires_at <= now) {
      // Same rule as the Redis scripts: strictly increasing, seeded from the clock so that
      // tokens keep growing even if the counter is forgotten. One counter for the whole
      // store: increasing across all keys, it increases for each, and needs no entry per key.
      const auto clock_us = static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(
              std::chrono::system_clock::now().time_since_epoch()).count());
      last_token_ = std::max(last_token_ + 1, clock_us);
      entry = Entry{};
      entry.owner = std::string(request.owner);
      entry.token = last_token_;
      entry.expires_at = later(now, request.lease);
      entry.name = std::string(request.name);
      entry.thread = thread_id();
      entry.acquired_at_ms = wall_ms();
      entry.lease = request.lease;
      return GrantReply{GrantReply::Kind::kAcquired, last_token_, Millis{0}, false, {}};
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
      } else if (entry->released) {
        item.outcome = RenewOutcome::kGone;  // kept only until min_hold: not extended
      } else {
        entry->expires_at = later(now, item.ttl);
        entry->lease = item.ttl;
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
        entry->released = true;
        return ReleaseOutcome::kKept;
      }
      locks_.erase(key.str());
    }
    signals_.notify(key.str());
    return ReleaseOutcome::kReleased;
  }

  ReleaseSignals& signals() { return signals_; }

  std::vector<LockInfo> list(std::string_view pattern) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    std::vector<LockInfo> out;
    for (const auto& [key, entry] : locks_) {
      if (entry.owner.empty() || entry.expires_at <= now || !glob_match(pattern, key)) continue;
      out.push_back(info_of(key, entry, now));
    }
    return out;
  }

  std::optional<LockInfo> inspect(const std::string& key) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    const Entry* entry = live(key, now);
    if (entry == nullptr || entry->owner.empty()) return std::nullopt;
    return info_of(key, *entry, now);
  }

  std::optional<LockInfo> force_release(const std::string& key, const AuditEntry& who,
                                        const std::string& backend) {
    std::optional<LockInfo> removed;
    {
      std::lock_guard lock(mutex_);
      const auto now = Clock::now();
      const Entry* entry = live(key, now);
      if (entry == nullptr || entry->owner.empty()) return std::nullopt;
      removed = info_of(key, *entry, now);
      locks_.erase(key);
      AuditEntry record = who;
      record.at_ms = wall_ms();
      record.key = key;
      record.owner = removed->owner;
      record.token = removed->token;
      record.owner_host = removed->host;
      record.owner_pid = removed->pid;
      record.owner_name = removed->name;
      log(LogLevel::kWarn,
          "forced release: backend={} key={} owner={} token={} by {}@{} pid {} note=\"{}\"",
          backend, printable(key), record.owner, record.token, record.user, record.host, record.pid,
          printable(record.note));
      audit_.insert(audit_.begin(), std::move(record));
      if (audit_.size() > 1000) audit_.resize(1000);
    }
    signals_.notify(key);
    return removed;
  }

  std::vector<AuditEntry> history(std::size_t limit) {
    std::lock_guard lock(mutex_);
    return {audit_.begin(),
            audit_.begin() + static_cast<std::ptrdiff_t>(std::min(limit, audit_.size()))};
  }

  RunClaimReply claim_run(const std::string& key, const RunRecord& mine, Millis keep) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    prune_if_grown(now);
    const Entry* entry = live(key, now);
    if (entry == nullptr || entry->owner != mine.owner || entry->released)
      return {ClaimStatus::kNotHeld, {}};
    if (const Run* run = live_run(key, now)) {
      RunClaimReply earlier{ClaimStatus::kAlreadyRan, run->record};
      earlier.record.ttl = std::chrono::ceil<Millis>(run->expires_at - now);
      return earlier;
    }
    Run& run = runs_[key];
    run.record = mine;
    run.record.key = key;
    run.record.name = entry->name;
    run.record.started_at_ms = wall_ms();
    run.record.finished_at_ms = 0;
    run.record.outcome = "running";
    run.expires_at = later(now, std::max(keep, Millis{1}));
    return {ClaimStatus::kClaimed, run.record};
  }

  bool finish_run(const std::string& key, std::string_view owner, std::string_view outcome) {
    std::lock_guard lock(mutex_);
    Run* run = live_run(key, Clock::now());
    if (run == nullptr || run->record.owner != owner) return false;
    run->record.finished_at_ms = wall_ms();
    run->record.outcome = outcome;
    return true;
  }

  std::vector<RunRecord> runs(std::string_view pattern) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    std::vector<RunRecord> out;
    for (const auto& [key, run] : runs_) {
      if (run.expires_at <= now || !glob_match(pattern, key)) continue;
      out.push_back(run.record);
      out.back().ttl = std::chrono::ceil<Millis>(run.expires_at - now);
    }
    return out;
  }

 private:
  struct Run {
    RunRecord record;
    Clock::time_point expires_at;
  };

  Run* live_run(const std::string& key, Clock::time_point now) {
    return unexpired(runs_, key, now);
  }

  struct Entry {
    std::string owner;
    std::uint64_t token = 0;
    Clock::time_point expires_at;
    std::string name;
    long thread = 0;
    std::int64_t acquired_at_ms = 0;
    Millis lease{0};
    bool released = false;
  };

 public:
  static std::int64_t wall_ms() {
    return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:

  static LockInfo info_of(const std::string& key, const Entry& entry, Clock::time_point now) {
    LockInfo info;
    info.key = key;
    info.owner = entry.owner;
    info.host = host_name();
    info.pid = process_id();
    info.thread = entry.thread;
    info.name = entry.name;
    info.token = entry.token;
    info.acquired_at_ms = entry.acquired_at_ms;
    info.lease = entry.lease;
    info.ttl = std::chrono::ceil<Millis>(entry.expires_at - now);
    info.min_hold = entry.released;
    return info;
  }

  Entry* live(const std::string& key, Clock::time_point now) { return unexpired(locks_, key, now); }

  // The value under `key` unless it has expired (then it is dropped, as Redis would).
  template <typename Map>
  static typename Map::mapped_type* unexpired(Map& map, const std::string& key,
                                              Clock::time_point now) {
    auto it = map.find(key);
    if (it == map.end()) return nullptr;
    if (it->second.expires_at <= now) {
      map.erase(it);
      return nullptr;
    }
    return &it->second;
  }

  // Expired locks and runs are otherwise dropped only when their key is looked at again:
  // sweep them whenever the maps have doubled since the last sweep (amortised O(1)).
  void prune_if_grown(Clock::time_point now) {
    if (locks_.size() + runs_.size() < prune_at_) return;
    std::erase_if(locks_, [&](const auto& item) { return item.second.expires_at <= now; });
    std::erase_if(runs_, [&](const auto& item) { return item.second.expires_at <= now; });
    prune_at_ = std::max(kFirstPrune, 2 * (locks_.size() + runs_.size()));
  }

  static constexpr std::size_t kFirstPrune = 1024;

  std::mutex mutex_;
  std::map<std::string, Entry> locks_;
  std::uint64_t last_token_ = 0;
  std::size_t prune_at_ = kFirstPrune;
  ReleaseSignals signals_;
  std::vector<AuditEntry> audit_;
  std::map<std::string, Run> runs_;
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

class MemoryBackend final : public Backend, public RunStore, public AdminBackend {
 public:
  MemoryBackend(BackendConfig config, std::shared_ptr<MemoryStore> store)
      : config_(std::move(config)), store_(std::move(store)) {}

  GrantReply acquire(const GrantRequest& request) override { return store_->acquire(request); }
  void renew(std::vector<RenewItem>& items) override { store_->renew(items); }
  ReleaseOutcome release(const Key& key, std::string_view owner,
                         Millis keep_for) noexcept override {
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

  std::vector<LockInfo> list(std::string_view pattern) override { return store_->list(pattern); }
  std::optional<LockInfo> inspect(const Key& key) override { return store_->inspect(key.str()); }
  std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) override {
    return store_->force_release(key.str(), who, config_.name);
  }
  std::vector<AuditEntry> history(std::size_t limit) override { return store_->history(limit); }

  std::int64_t server_time_ms() override { return MemoryStore::wall_ms(); }
  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override {
    return store_->claim_run(key.str(), mine, keep);
  }
  bool finish_run(const Key& key, std::string_view owner,
                  std::string_view outcome) noexcept override {
    try {
      return store_->finish_run(key.str(), owner, outcome);
    } catch (...) {
      return false;
    }
  }
  std::vector<RunRecord> list_runs(std::string_view pattern) override {
    return store_->runs(pattern);
  }

 private:
  BackendConfig config_;
  std::shared_ptr<MemoryStore> store_;
};

}  // namespace

Engine make_memory_backend(const BackendConfig& config, const std::string& service) {
  return Engine::of(std::make_shared<MemoryBackend>(config, shared_store(service, config.name)));
}

}  // namespace dlock::internal
