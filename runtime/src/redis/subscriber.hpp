// One pub/sub connection per Redis backend, on its own thread, serving every waiter in the
// process: it subscribes to a lock's release channel while anyone waits for that lock and
// wakes the waiters when a release is published. If the connection drops it reconnects
// and resubscribes; meanwhile waiters fall back to polling.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "metrics.hpp"
#include "redis/connection.hpp"
#include "release_signals.hpp"

namespace dlock::internal {

class Subscriber {
 public:
  Subscriber(Endpoint endpoint, BackendConfig config, std::shared_ptr<Metrics> metrics);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  /// Arms a watch on `channel`; waits (up to the command timeout) until the subscription
  /// is confirmed, so that a release published after this returns is not missed.
  std::unique_ptr<ReleaseWatch> watch(const std::string& channel);

  /// Points the subscriber at another server (after a failover); resubscribes everything.
  void retarget(Endpoint endpoint);

 private:
  void interest(const std::string& channel, bool wanted);
  void run();
  bool connect();
  void disconnect(const std::string& why);
  bool flush_pending();
  void read_messages();
  void wake() noexcept;

  BackendConfig config_;
  const std::shared_ptr<Metrics> metrics_;
  ReleaseSignals signals_;
  int wake_fd_ = -1;

  std::mutex mutex_;
  std::condition_variable confirmed_cv_;
  Endpoint endpoint_;
  bool retargeted_ = false;
  std::deque<std::pair<std::string, bool>> pending_;  // (channel, subscribe?)
  std::set<std::string> active_;                        // confirmed subscriptions
  bool connected_ = false;
  bool down_ = false;  // the last connection attempt failed: do not wait for confirmations
  bool stopping_ = false;
  bool ever_connected_ = false;

  std::unique_ptr<Connection> conn_;  // used by the subscriber thread only
  std::thread thread_;
};

}  // namespace dlock::internal
