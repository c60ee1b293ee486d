#include "memory/memory_backend.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

#include "log.hpp"
#include "memory/lock_entry.hpp"
#include "owner.hpp"
#include "queue_standing.hpp"
#include "release_signals.hpp"

namespace dlock::internal {
namespace {

using memory::Entry;
using memory::Holder;
using memory::Waiter;
using memory::grantable;
using memory::holder_of;
using memory::keep_place;
using memory::next_turns;
using memory::prune;
using memory::refresh_expiry;

// What a held entry is, for the refusal's text.
Queued queued_of(const Entry& entry) {
  return {entry.kind, entry.kind == LockKind::kPermit ? entry.permits : 0};
}

// A key's holders and waiters, by the rules of DESIGN §7, on the steady clock of this
// process: one exclusive holder, or shared holders, or up to `permits` permit holders; a
// waiter keeps its place in the queue while it tries again in time.
class MemoryStore {
 public:
  GrantReply acquire(const GrantRequest& request) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    prune_if_grown(now);
    Entry& entry = locks_[request.key.str()];
    prune(entry, now);
    if (const Holder* mine = holder_of(entry, request.owner)) {
      return granted(mine->token);
    }
    const bool other_size = entry.kind == LockKind::kPermit &&
                            request.kind == LockKind::kPermit && entry.permits != request.permits;
    if (!entry.holders.empty() &&
        ((entry.kind == LockKind::kPermit) != (request.kind == LockKind::kPermit) || other_size)) {
      GrantReply refused;
      refused.kind = GrantReply::Kind::kRefused;
      refused.error = held_as(queued_of(entry));
      drop_if_empty(request.key.str(), entry);
      return refused;
    }
    if (grantable(entry, request.owner, request.kind, request.permits, request.fair)) {
      return granted(take(entry, request, now));
    }
    if (request.place > Millis{0}) keep_place(entry, request, later(now, request.place));
    Millis ttl{0};
    for (const Holder& holder : entry.holders) {
      const Millis left = std::chrono::ceil<Millis>(holder.expires_at - now);
      ttl = ttl == Millis{0} ? left : std::min(ttl, left);
    }
    drop_if_empty(request.key.str(), entry);
    GrantReply busy;
    busy.kind = GrantReply::Kind::kBusy;
    busy.ttl = ttl;
    return busy;
  }

  // Every key or none, exclusive: busy when any is held or has a fair waiter.
  GrantReply acquire_together(const std::vector<Key>& keys, const GrantRequest& request) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    prune_if_grown(now);
    GrantReply reply;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      Entry* entry = live(keys[i].str(), now);
      if (entry == nullptr || holder_of(*entry, request.owner) != nullptr) continue;
      if (!entry->holders.empty() && entry->kind == LockKind::kPermit) {
        // As acquire() answers for that key: a semaphore is not a lock, and waiting won't help.
        reply.kind = GrantReply::Kind::kRefused;
        reply.error = held_as(queued_of(*entry));
        reply.busy_index = i;
        return reply;
      }
      const bool fair_waiters = std::any_of(entry->queue.begin(), entry->queue.end(),
                                            [](const Waiter& w) { return w.fair; });
      if (fair_waiters || !grantable(*entry, request.owner, LockKind::kExclusive, 0, false)) {
        reply.kind = GrantReply::Kind::kBusy;
        reply.busy_index = i;
        return reply;
      }
    }
    reply.kind = GrantReply::Kind::kAcquired;
    for (const Key& key : keys) {
      Entry& entry = locks_[key.str()];
      const Holder* mine = holder_of(entry, request.owner);
      reply.tokens.push_back(mine != nullptr ? mine->token : take(entry, request, now));
    }
    reply.token = reply.tokens.front();
    return reply;
  }

  void renew(std::vector<RenewItem>& items) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    for (auto& item : items) {
      Entry* entry = live(item.key->str(), now);
      Holder* holder = entry != nullptr ? holder_of(*entry, item.owner) : nullptr;
      if (holder == nullptr) {
        item.outcome = entry != nullptr && !entry->holders.empty() ? RenewOutcome::kTaken
                                                                   : RenewOutcome::kGone;
      } else if (holder->released) {
        item.outcome = RenewOutcome::kGone;  // kept only until min_hold: not extended
      } else {
        holder->expires_at = later(now, item.ttl);
        holder->lease = item.ttl;
        refresh_expiry(*entry);
        item.outcome = RenewOutcome::kRenewed;
      }
    }
  }

  // Also how a waiter that gives up leaves the queue.
  ReleaseOutcome release(const Key& key, std::string_view owner, Millis keep_for) {
    std::vector<std::string> turns;
    {
      std::lock_guard lock(mutex_);
      const auto now = Clock::now();
      Entry* entry = live(key.str(), now);
      if (entry == nullptr) return ReleaseOutcome::kGone;
      const auto holder = std::find_if(entry->holders.begin(), entry->holders.end(),
                                       [&](const Holder& h) { return h.owner == owner; });
      if (holder == entry->holders.end()) {
        std::erase_if(entry->queue, [&](const Waiter& w) { return w.owner == owner; });
        const bool held = !entry->holders.empty();
        drop_if_empty(key.str(), *entry);
        return held ? ReleaseOutcome::kTaken : ReleaseOutcome::kGone;
      }
      if (keep_for > Millis{0}) {
        holder->expires_at = later(now, keep_for);
        holder->released = true;
        refresh_expiry(*entry);
        return ReleaseOutcome::kKept;
      }
      entry->holders.erase(holder);
      turns = next_turns(*entry);
      drop_if_empty(key.str(), *entry);
    }
    if (turns.empty()) {
      signals_.notify(key.str());
    } else {
      for (const std::string& owner_next : turns) signals_.notify(key.str(), "turn " + owner_next);
    }
    return ReleaseOutcome::kReleased;
  }

  ReleaseSignals& signals() { return signals_; }

  std::vector<LockInfo> list(std::string_view pattern) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    std::vector<LockInfo> out;
    for (auto& [key, entry] : locks_) {
      prune(entry, now);
      if (entry.holders.empty() || !glob_match(pattern, key)) continue;
      out.push_back(info_of(key, entry, now));
    }
    return out;
  }

  std::optional<LockInfo> inspect(const std::string& key) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    const Entry* entry = live(key, now);
    if (entry == nullptr || entry->holders.empty()) return std::nullopt;
    return info_of(key, *entry, now);
  }

  std::optional<LockInfo> force_release(const std::string& key, const AuditEntry& who,
                                        const std::string& backend) {
    std::optional<LockInfo> removed;
    {
      std::lock_guard lock(mutex_);
      const auto now = Clock::now();
      Entry* entry = live(key, now);
      if (entry == nullptr || entry->holders.empty()) return std::nullopt;
      removed = info_of(key, *entry, now);
      // Every holder goes; the waiters keep their places.
      entry->holders.clear();
      drop_if_empty(key, *entry);
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
    Entry* entry = live(key, now);
    const Holder* holder = entry != nullptr ? holder_of(*entry, mine.owner) : nullptr;
    if (holder == nullptr || holder->released) return {ClaimStatus::kNotHeld, {}};
    if (const Run* run = live_run(key, now)) {
      RunClaimReply earlier{ClaimStatus::kAlreadyRan, run->record};
      earlier.record.ttl = std::chrono::ceil<Millis>(run->expires_at - now);
      return earlier;
    }
    Run& run = runs_[key];
    run.record = mine;
    run.record.key = key;
    run.record.name = holder->name;
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

 public:
  static std::int64_t wall_ms() {
    return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  // Same rule as the Redis scripts: strictly increasing, seeded from the clock so that tokens
  // keep growing even if the counter is forgotten. One counter for the whole store: increasing
  // across all keys, it increases for each, and needs no entry per key.
  static std::uint64_t clock_us() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  }

  static LockInfo info_of(const std::string& key, const Entry& entry, Clock::time_point now) {
    LockInfo info;
    info.key = key;
    info.mode = to_string(entry.kind);
    info.permits = entry.kind == LockKind::kPermit ? entry.permits : 0;
    for (const Holder& holder : entry.holders) {
      HolderInfo one;
      one.owner = holder.owner;
      one.host = host_name();
      one.pid = process_id();
      one.thread = holder.thread;
      one.name = holder.name;
      one.token = holder.token;
      one.acquired_at_ms = holder.acquired_at_ms;
      one.ttl = std::chrono::ceil<Millis>(holder.expires_at - now);
      one.min_hold = holder.released;
      info.holders.push_back(std::move(one));
    }
    for (const Waiter& waiter : entry.queue) {
      info.queue.push_back(WaiterInfo{waiter.owner, to_string(waiter.kind), waiter.fair,
                                      std::chrono::ceil<Millis>(waiter.until - now)});
    }
    describe_by_first_holder(info);
    if (!entry.holders.empty()) info.lease = entry.holders.front().lease;
    return info;
  }

  static GrantReply granted(std::uint64_t token) {
    GrantReply reply;
    reply.kind = GrantReply::Kind::kAcquired;
    reply.token = token;
    return reply;
  }

  // Makes `request.owner` a holder of `entry`, with a new token.
  std::uint64_t take(Entry& entry, const GrantRequest& request, Clock::time_point now) {
    last_token_ = std::max(last_token_ + 1, clock_us());
    Holder holder;
    holder.owner = std::string(request.owner);
    holder.token = last_token_;
    holder.expires_at = later(now, request.lease);
    holder.name = std::string(request.name);
    holder.thread = thread_id();
    holder.acquired_at_ms = wall_ms();
    holder.lease = request.lease;
    entry.holders.push_back(std::move(holder));
    entry.kind = request.kind;
    entry.permits = request.permits;
    std::erase_if(entry.queue, [&](const Waiter& w) { return w.owner == request.owner; });
    entry.expires_at = std::max(entry.expires_at, later(now, request.lease));
    return last_token_;
  }

  void drop_if_empty(const std::string& key, const Entry& entry) {
    if (entry.holders.empty() && entry.queue.empty()) locks_.erase(key);
  }

  // The key's entry with what has run out dropped, or nullptr when nothing is left of it.
  Entry* live(const std::string& key, Clock::time_point now) {
    auto it = locks_.find(key);
    if (it == locks_.end()) return nullptr;
    prune(it->second, now);
    if (it->second.holders.empty() && it->second.queue.empty()) {
      locks_.erase(it);
      return nullptr;
    }
    return &it->second;
  }

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
  // Nothing to wait for in this process: applied now, `done` told at once.
  bool release_later(const Key& key, std::string_view owner, Millis keep_for,
                     std::function<void(ReleaseOutcome)> done) noexcept override {
    done(release(key, owner, keep_for));
    return true;
  }
  bool release_together_later(const std::vector<ReleaseItem>& items,
                              std::function<void(std::vector<ReleaseOutcome>)> done) noexcept
      override {
    done(release_together(items));
    return true;
  }
  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return store_->signals().watch(key.str());
  }
  bool queues() const override { return true; }
  bool takes_together(const std::vector<Key>& /*keys*/) const override { return true; }
  GrantReply acquire_together(const std::vector<Key>& keys, const GrantRequest& request) override {
    return store_->acquire_together(keys, request);
  }
  bool supports(LockKind /*kind*/, bool /*fair*/) const override { return true; }
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
