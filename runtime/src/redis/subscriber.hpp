// Release notifications over Redis pub/sub. A Subscriber is one pub/sub connection on its own
// thread: it subscribes to a lock's release channel while anyone waits for that lock and
// wakes the waiters when a release is published. If the connection drops it reconnects
// (to the next server of its list) and resubscribes; meanwhile waiters fall back to polling.
// A ReleaseFeed is what a backend owns: the waiters' signals and the subscribers feeding them.
//
//   ReleaseFeed feed({{master}}, config, metrics);        // single, sentinel, cluster
//   ReleaseFeed feed({{a}, {b}, {c}}, config, metrics);   // Redlock: any instance wakes
//   auto watch = feed.watch(lock_keys(service, key).channel);
//   watch->wait_until(Clock::now() + poll_interval);
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "metrics.hpp"
#include "redis/connection.hpp"
#include "release_signals.hpp"

namespace dlock::internal {

class Subscriber {
 public:
  /// Listens on the first reachable server of `endpoints` (moving on to the next after a
  /// failed connect) for the channels `signals` has watchers for, and notifies `signals`.
  /// Which messages wake the channel's watchers (all when empty): a sentinel publishes
  /// +switch-master for every master it monitors, the payload names which.
  using MessageFilter = std::function<bool(std::string_view channel, std::string_view payload)>;

  Subscriber(std::vector<Endpoint> endpoints, BackendConfig config, ServerKind kind,
             ReleaseSignals& signals, std::shared_ptr<Metrics> metrics, MessageFilter filter = {});
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  /// Queues a SUBSCRIBE (wanted) or UNSUBSCRIBE; ReleaseSignals' interest hook calls this.
  void interest(const std::string& channel, bool wanted);
  /// Waits until `channel` is subscribed, the server is found unreachable, or `deadline`;
  /// true when the subscription is confirmed. Confirmed means the server answered the last
  /// SUBSCRIBE or UNSUBSCRIBE queued for the channel, and that one was a SUBSCRIBE.
  bool await_subscribed(const std::string& channel, Clock::time_point deadline);
  /// Points the subscriber at another server now (after a failover); resubscribes everything.
  void retarget(Endpoint endpoint);
  /// Replaces the servers to try after a failed connect; a live connection stays.
  void set_endpoints(std::vector<Endpoint> endpoints);

 private:
  void run();
  bool connect();
  void disconnect(std::string why);
  bool flush_pending();
  void read_messages();
  void wake() noexcept;

  const BackendConfig config_;
  const ServerKind kind_;
  ReleaseSignals& signals_;
  const MessageFilter filter_;
  const std::shared_ptr<Metrics> metrics_;
  int wake_fd_ = -1;
  // Owned by the subscriber's thread: whether the connection has brought a reply yet, and
  // whether the last one was dropped before it did (a server that accepts connections and
  // then refuses them: the next connect waits out the back-off).
  bool heard_ = false;
  bool quiet_drop_ = false;

  std::mutex mutex_;
  std::condition_variable confirmed_cv_;
  std::vector<Endpoint> endpoints_;
  std::size_t next_endpoint_ = 0;
  bool retargeted_ = false;
  std::deque<std::pair<std::string, bool>> pending_;  // (channel, subscribe?)
  std::set<std::string> active_;                        // confirmed subscriptions
  // Per channel: SUBSCRIBE/UNSUBSCRIBE commands queued or sent on this connection whose
  // confirmation has not been read. A confirmation counts only when none is owed after it.
  std::map<std::string, std::size_t> owed_;
  bool connected_ = false;
  bool down_ = false;  // the last connection attempt failed: do not wait for confirmations
  bool stopping_ = false;
  bool ever_connected_ = false;

  std::unique_ptr<Connection> conn_;  // used by the subscriber thread only
  std::thread thread_;
};

/// The release notifications of one backend: the waiters' signals, fed by one Subscriber
/// per source. Any source's message wakes the waiters of that channel.
class ReleaseFeed {
 public:
  /// One Subscriber per entry of `sources`, each with the servers it may use, in order.
  ReleaseFeed(const std::vector<std::vector<Endpoint>>& sources, const BackendConfig& config,
              std::shared_ptr<Metrics> metrics, ServerKind kind = ServerKind::kData,
              const Subscriber::MessageFilter& filter = {});
  ~ReleaseFeed();

  /// Arms a watch on `channel` and waits (up to the command timeout) until every reachable
  /// source has subscribed, so that a release published after this returns is not missed.
  std::unique_ptr<ReleaseWatch> watch(const std::string& channel);
  [[nodiscard]] Subscriber& source(std::size_t i) { return *subscribers_.at(i); }
  /// Wakes the watchers of `channel` as if a message had come.
  void notify(const std::string& channel) { signals_.notify(channel); }

 private:
  const Millis confirm_timeout_;
  ReleaseSignals signals_;
  std::vector<std::unique_ptr<Subscriber>> subscribers_;
};

}  // namespace dlock::internal
