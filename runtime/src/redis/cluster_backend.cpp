#include "redis/cluster_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "background_job.hpp"
#include "log.hpp"
#include "redis/backend_admin.hpp"
#include "redis/crc16.hpp"
#include "redis/fan_out.hpp"
#include "redis/keys.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/pool.hpp"
#include "redis/renewal_round.hpp"
#include "redis/reply.hpp"
#include "redis/routed_backend.hpp"
#include "redis/slot_map.hpp"
#include "redis/subscriber.hpp"

namespace dlock::internal {
namespace {

constexpr int kMaxRedirects = 16;
constexpr Millis kFirstBackoff{2};
constexpr Millis kMaxBackoff{50};
void pause_until(Clock::time_point deadline, Millis& backoff) {
  const auto now = Clock::now();
  if (now < deadline)
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
  backoff = std::min(backoff * 2, kMaxBackoff);
}

class ClusterBackend final : public RoutedBackend {
 public:
  ClusterBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics)
      : RoutedBackend(std::move(config), std::move(service)), metrics_(std::move(metrics)) {}

  GrantReply acquire(const GrantRequest& request) override {
    const LockKeys keys = lock_keys(service_, request.key.str());
    shortest_.granted(request.lease, Clock::now());
    return grant_of(
        routed(key_slot(keys.lock), request.give_up_at, [&](Connection& conn, bool asking) {
          return run_acquisition(conn, request.give_up_at, asking, [&](std::int64_t not_after) {
            return acquire_call(keys, request, request.lease, not_after);
          });
        }));
  }

  // Keys of one slot (keys that share a hash tag, keys.hpp) are taken in one request.
  [[nodiscard]] bool takes_together(const std::vector<Key>& keys) const override {
    if (keys.empty()) return false;
    const int slot = key_slot(lock_keys(service_, keys.front().str()).lock);
    return std::all_of(keys.begin() + 1, keys.end(), [&](const Key& key) {
      return key_slot(lock_keys(service_, key.str()).lock) == slot;
    });
  }

  GrantReply acquire_together(const std::vector<Key>& keys, const GrantRequest& request) override {
    std::vector<LockKeys> all;
    all.reserve(keys.size());
    for (const Key& key : keys) all.push_back(lock_keys(service_, key.str()));
    shortest_.granted(request.lease, Clock::now());
    return together_grant_of(
        routed(key_slot(all.front().lock), request.give_up_at,
               [&](Connection& conn, bool asking) {
                 return run_acquisition(conn, request.give_up_at, asking, [&](std::int64_t at) {
                   return acquire_together_call(all, request, request.lease, at);
                 });
               }),
        keys.size());
  }

  void renew(std::vector<RenewItem>& items) override {
    // Every master is asked at once and the round is bounded by a third of the shortest
    // lease renewed lately (this round's or one due soon), and by the first validity among
    // its items: a master that stopped answering fails its own items together, and never
    // makes the leases on the others late (renewal_round.hpp).
    const auto now = Clock::now();
    const RoundEnd end =
        RoundEnd::of(items, shortest_.note(items, now), config_.command_timeout, now);
    const auto deadline = end.deadline;
    std::vector<ScriptCall> calls;
    std::vector<int> slots;
    calls.reserve(items.size());
    for (const auto& item : items) {
      const LockKeys keys = lock_keys(service_, item.key->str());
      slots.push_back(key_slot(keys.lock));
      calls.push_back(renew_call(keys, item.owner, item.ttl, item.token));
    }
    // One pipeline per master for the items its slots hold, as the map says.
    std::map<std::size_t, std::vector<std::size_t>> by_master;
    std::vector<std::size_t> unrouted;
    const auto map = slot_map(deadline);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const int owner = map ? map->owner[static_cast<std::size_t>(slots[i])] : -1;
      if (owner < 0) {
        unrouted.push_back(i);
      } else {
        by_master[static_cast<std::size_t>(owner)].push_back(i);
      }
    }
    if (!by_master.empty()) renew_on_masters(items, calls, *map, by_master, end, unrouted);
    for (std::size_t i : unrouted) {
      // Past the round's deadline the rest are retried with the next round, not now.
      if (Clock::now() >= deadline) {
        items[i].outcome = RenewOutcome::kUnavailable;
        continue;
      }
      items[i].outcome =
          renew_outcome_of(routed(slots[i], deadline, [&](Connection& conn, bool asking) {
            return calls[i].run(conn, asking);
          }));
    }
  }

  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return feed().watch(lock_keys(service_, key.str()).channel);
  }

  [[nodiscard]] bool hands_off() const override { return true; }
  // Every kind (holders.lua).
  [[nodiscard]] bool supports(LockKind /*kind*/, bool /*fair*/) const override { return true; }

 private:
  Reply on_server_of(std::string_view redis_key, Clock::time_point deadline,
                     const ServerCall& call) override {
    return routed(redis_key.empty() ? 0 : key_slot(redis_key), deadline, call);
  }

  std::shared_ptr<ConnectionPool> known_pool_of(std::string_view redis_key) override {
    std::shared_ptr<const SlotMap> map;
    {
      std::lock_guard lock(map_mutex_);
      map = map_;
    }
    const auto node = map ? master_in(*map, key_slot(redis_key)) : std::nullopt;
    return node ? pool_for(*node) : nullptr;
  }

  // Sends every master its items' pipeline (fan_out.hpp) on its renewal connection and
  // reads the replies until the round's end. Items a master refused or moved go to
  // `unrouted`.
  void renew_on_masters(std::vector<RenewItem>& items, const std::vector<ScriptCall>& calls,
                        const SlotMap& map,
                        const std::map<std::size_t, std::vector<std::size_t>>& by_master,
                        RoundEnd end, std::vector<std::size_t>& unrouted) {
    std::vector<std::shared_ptr<ConnectionPool>> pools;
    std::vector<ConnectionPool::Handle> handles;
    std::vector<FanOutRequest> requests;
    std::vector<std::size_t> in_hand;
    std::vector<std::size_t> opening;
    for (const auto& [master, on_master] : by_master) {
      pools.push_back(pool_for(map.masters[master]));
      pools.back()->open_renewal();  // all opens at once; none waits for another
      handles.push_back(pools.back()->take_idle(ConnectionPool::Lane::kRenewal));
      (handles.back() ? in_hand : opening).push_back(requests.size());
      FanOutRequest& request = requests.emplace_back();
      for (std::size_t i : on_master) request.calls.push_back(&calls[i]);
    }
    // Masters with a connection in hand are asked at once, not after the opens of the
    // others: a lease on a healthy master is renewed when it is due even while the round
    // waits for a stopped one. The others are asked once their opens (running meanwhile)
    // finish.
    ask_servers(requests, handles, in_hand, end.deadline);
    for (std::size_t m : opening) {
      std::string error;
      handles[m] = pools[m]->take_renewal(end.takes_until(), error);
    }
    ask_servers(requests, handles, opening, end.after_takes());
    std::optional<Endpoint> answering;
    bool any_silent = false;
    std::size_t m = 0;
    for (const auto& [master, on_master] : by_master) {
      const Heard heard =
          settle_server(items, on_master, requests[m].replies, *pools[m], !handles[m], unrouted);
      if (heard == Heard::kAnswered && !answering) answering = map.masters[master];
      any_silent = any_silent || heard == Heard::kSilent;
      ++m;
    }
    handles.clear();  // broken ones are dropped by their pools
    // A stopped master may be failed over meanwhile: read the map again (from one that
    // answered, else from any node not silent), so that its leases follow the new master
    // next round. Not on this thread: a node stopped since it last answered, and not asked
    // in this round, would hold the next round for a command timeout.
    if (any_silent) refresh_in_background(answering);
  }

  // Reads the slot map (refresh(), skipping silent nodes) on a thread of its own, unless one
  // such read runs already.
  void refresh_in_background(std::optional<Endpoint> first) {
    refresher_.start([this, first] {
      refresh(Clock::now() + config_.command_timeout, first, Nodes::kSkipSilent);
    });
  }

  // SCAN on every master of the slot map.
  std::vector<std::string> scan_all(const std::string& match) override {
    const auto deadline = Clock::now() + config_.command_timeout;
    const auto map = slot_map(deadline);
    if (!map || map->masters.empty()) {
      throw BackendUnavailable(
          fmt::format("backend '{}': no slot map: {}", config_.name, last_refresh_error()));
    }
    std::vector<std::string> found;
    for (const auto& master : map->masters) {
      std::vector<std::string> here;
      require(pool_for(master)->run([&](Connection& conn) {
        here.clear();
        return admin::scan_lock_keys(conn, match, here);
      }), config_.name, fmt::format("SCAN on {}", to_string(master)));
      found.insert(found.end(), here.begin(), here.end());
    }
    std::sort(found.begin(), found.end());
    found.erase(std::unique(found.begin(), found.end()), found.end());
    return found;
  }

  // What a call gets when no node serves `slot` by its deadline, after `earlier`.
  Reply no_node_for(int slot, const Reply& earlier) {
    Reply none = Reply::failed(Reply::Status::kNotSent,
                               fmt::format("no node of backend '{}' serves slot {}: {}",
                                           config_.name, slot, last_refresh_error()));
    none.follow(earlier);
    return none;
  }

  // Runs `call` on the master of `slot`, following MOVED and ASK, and retrying TRYAGAIN,
  // CLUSTERDOWN and unreachable nodes with back-off until `deadline`. Every script is
  // idempotent for one owner, so running it again is safe.
  template <typename Call>
  Reply routed(int slot, Clock::time_point deadline, const Call& call) {
    std::optional<Endpoint> target = master_of(slot, deadline);
    bool asking = false;
    int redirects = 0;
    Millis backoff = kFirstBackoff;
    Reply earlier = Reply::failed(Reply::Status::kNotSent, {});  // what the last attempt got
    for (;;) {
      if (!target) {
        if (Clock::now() >= deadline) return no_node_for(slot, earlier);
        pause_until(deadline, backoff);
        refresh(deadline, std::nullopt);
        target = master_of(slot, deadline);
        continue;
      }
      const Endpoint here = *target;
      Reply reply = run_on(here, call, asking);
      reply.follow(earlier);
      const bool asked = std::exchange(asking, false);
      if (reply.status() == Reply::Status::kTimeout) return reply;  // may have been applied
      const ServerError error = reply.ok() ? reply.server_error() : ServerError::kNone;
      const bool unreachable = !reply.ok();
      if (!unreachable && (error == ServerError::kNone || error == ServerError::kOther ||
                           error == ServerError::kNoScript)) {
        return reply;
      }
      if (Clock::now() >= deadline) return reply;
      log(LogLevel::kDebug, "cluster: slot {} on {}: {}", slot, to_string(here),
          unreachable ? reply.error() : std::string(reply.text()));
      switch (error) {
        case ServerError::kMoved:
        case ServerError::kAsk: {
          const auto redirect = reply.redirect(here);
          if (!redirect || ++redirects > kMaxRedirects) return reply;
          target = redirect->target;
          if (error == ServerError::kAsk) {
            asking = true;
          } else {
            note_moved(redirect->slot, redirect->target);
          }
          break;
        }
        case ServerError::kTryAgain:  // migrating, keys split: that node again, as asked
          pause_until(deadline, backoff);
          asking = asked;
          break;
        default:  // CLUSTERDOWN, READONLY, LOADING, unreachable: the map may be stale
          pause_until(deadline, backoff);
          refresh(deadline, unreachable ? std::nullopt : std::optional<Endpoint>(here));
          target = master_of(slot, deadline);
          break;
      }
      earlier = std::move(reply);
    }
  }

  // `call` on `node`. After a timeout, the node may be stopped, and failed over meanwhile:
  // it is noted silent and the slot map is read again in the background, without it, so
  // that later calls follow the new master (a renewal round may never ask that node).
  template <typename Call>
  Reply run_on(const Endpoint& node, const Call& call, bool asking) {
    const auto pool = pool_for(node);
    Reply reply = pool->run([&](Connection& conn) { return call(conn, asking); });
    if (reply.status() == Reply::Status::kTimeout) {
      pool->note_silence();
      refresh_in_background(std::nullopt);
    }
    return reply;
  }

  std::shared_ptr<const SlotMap> slot_map(Clock::time_point deadline) {
    {
      std::lock_guard lock(map_mutex_);
      if (map_) return map_;
    }
    refresh(deadline, std::nullopt);
    std::lock_guard lock(map_mutex_);
    return map_;
  }

  std::optional<Endpoint> master_of(int slot, Clock::time_point deadline) {
    const auto map = slot_map(deadline);
    return map ? master_in(*map, slot) : std::nullopt;
  }

  static std::optional<Endpoint> master_in(const SlotMap& map, int slot) {
    const int owner = map.owner[static_cast<std::size_t>(slot)];
    if (owner < 0) return std::nullopt;
    return map.masters[static_cast<std::size_t>(owner)];
  }

  // MOVED is authoritative for its slot: patch the map at once, then read the whole map
  // again (a MOVED rarely comes alone: a reshard or a failover moved many slots).
  void note_moved(int slot, const Endpoint& target) {
    {
      std::lock_guard lock(map_mutex_);
      if (map_) {
        auto patched = std::make_shared<SlotMap>(*map_);
        auto it = std::find(patched->masters.begin(), patched->masters.end(), target);
        if (it == patched->masters.end()) {
          patched->masters.push_back(target);
          it = patched->masters.end() - 1;
        }
        patched->owner[static_cast<std::size_t>(slot)] =
            static_cast<std::int16_t>(it - patched->masters.begin());
        map_ = std::move(patched);
      }
    }
    refresh(Clock::now() + config_.command_timeout, target);
  }

  // Which nodes refresh() may ask: all, or those that renewals and calls did not find silent
  // (asking one costs a command timeout).
  enum class Nodes { kAll, kSkipSilent };

  // Reads CLUSTER SLOTS from `first`, else the known masters, else the seed nodes. Calls
  // that pile up behind one refresh reuse its result.
  void refresh(Clock::time_point deadline, std::optional<Endpoint> first,
               Nodes nodes = Nodes::kAll) {
    const std::uint64_t seen = refreshes_.load();
    std::lock_guard refreshing(refresh_mutex_);
    if (refreshes_.load() != seen) return;
    std::vector<Endpoint> candidates;
    if (first) candidates.push_back(*first);
    {
      std::lock_guard lock(map_mutex_);
      if (map_) candidates.insert(candidates.end(), map_->masters.begin(), map_->masters.end());
    }
    candidates.insert(candidates.end(), config_.endpoints.begin(), config_.endpoints.end());
    std::string errors;
    std::size_t asked = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (std::find(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(i),
                    candidates[i]) != candidates.begin() + static_cast<std::ptrdiff_t>(i)) {
        continue;  // asked already
      }
      const Endpoint& node = candidates[i];
      if (nodes == Nodes::kSkipSilent && silent(node)) continue;
      if (asked++ > 0 && Clock::now() >= deadline) break;
      Reply reply = pool_for(node)->run([](Connection& conn) {
        return conn.command({"CLUSTER", "SLOTS"});
      });
      std::shared_ptr<SlotMap> map = answered(reply) ? parse_slots(reply, node) : nullptr;
      if (!map) {
        errors +=
            fmt::format("{}{}: {}", errors.empty() ? "" : "; ", to_string(node),
                        reply.ok() ? (reply.is_error() ? std::string(reply.text()) : "no slots")
                                   : reply.error());
        continue;
      }
      std::vector<Endpoint> listeners = config_.endpoints;
      for (const auto& n : map->nodes) {
        if (std::find(listeners.begin(), listeners.end(), n) == listeners.end())
          listeners.push_back(n);
      }
      {
        std::lock_guard lock(map_mutex_);
        map_ = std::move(map);
        refresh_error_.clear();
      }
      ++refreshes_;
      prune_pools(listeners);
      std::lock_guard lock(feed_mutex_);
      if (feed_) feed_->source(0).set_endpoints(std::move(listeners));
      return;
    }
    std::lock_guard lock(map_mutex_);
    refresh_error_ = errors.empty() ? "no node answered in time" : errors;
    ++refreshes_;
  }

  std::string last_refresh_error() {
    std::lock_guard lock(map_mutex_);
    return refresh_error_.empty() ? "the slot is not assigned" : refresh_error_;
  }

  // Drops the pools of nodes that are neither seeds nor in the slot map any more (removed
  // from the cluster, or left without slots), which closes their idle connections; a call
  // still using one keeps it until it returns.
  void prune_pools(const std::vector<Endpoint>& known) {
    std::vector<std::shared_ptr<ConnectionPool>> dropped;  // closed outside the lock
    std::lock_guard lock(pools_mutex_);
    for (auto it = pools_.begin(); it != pools_.end();) {
      // A pool whose renewal connection is being opened is kept until a later refresh:
      // dropping it would wait for the open. A dropped one opens none any more, even for a
      // renewal round that still holds it.
      const bool kept = std::any_of(known.begin(), known.end(),
                                    [&](const Endpoint& e) { return to_string(e) == it->first; }) ||
                        !it->second->retire_unless_opening();
      if (kept) {
        ++it;
      } else {
        dropped.push_back(std::move(it->second));
        it = pools_.erase(it);
      }
    }
  }

  // Whether renewals or calls found `node` silent, or a renewal connection to it is opening.
  bool silent(const Endpoint& node) {
    std::shared_ptr<ConnectionPool> pool;
    {
      std::lock_guard lock(pools_mutex_);
      const auto it = pools_.find(to_string(node));
      if (it == pools_.end()) return false;
      pool = it->second;
    }
    return pool->silent();
  }

  std::shared_ptr<ConnectionPool> pool_for(const Endpoint& node) {
    std::lock_guard lock(pools_mutex_);
    auto& pool = pools_[to_string(node)];
    if (!pool) pool = std::make_shared<ConnectionPool>(node, config_, sharing_for(config_));
    return pool;
  }

  ReleaseFeed& feed() {
    std::lock_guard lock(feed_mutex_);
    if (!feed_) {
      std::vector<Endpoint> listeners = config_.endpoints;
      {
        std::lock_guard map_lock(map_mutex_);
        if (map_) {
          for (const auto& n : map_->nodes) {
            if (std::find(listeners.begin(), listeners.end(), n) == listeners.end())
              listeners.push_back(n);
          }
        }
      }
      feed_ = std::make_unique<ReleaseFeed>(std::vector<std::vector<Endpoint>>{listeners}, config_,
                                            metrics_);
    }
    return *feed_;
  }

  const std::shared_ptr<Metrics> metrics_;
  ShortestLease shortest_;

  std::mutex map_mutex_;
  std::shared_ptr<const SlotMap> map_;
  std::string refresh_error_;
  std::mutex refresh_mutex_;
  std::atomic<std::uint64_t> refreshes_{0};

  std::mutex pools_mutex_;
  std::map<std::string, std::shared_ptr<ConnectionPool>> pools_;

  std::mutex feed_mutex_;
  std::unique_ptr<ReleaseFeed> feed_;

  // Slot-map reads after silent renewal rounds; declared last (see its header).
  BackgroundJob refresher_{"dlock-slots"};
};

}  // namespace

Engine make_cluster_backend(const BackendConfig& config, const std::string& service,
                            std::shared_ptr<Metrics> metrics) {
  return Engine::of(std::make_shared<ClusterBackend>(config, service, std::move(metrics)));
}

}  // namespace dlock::internal
