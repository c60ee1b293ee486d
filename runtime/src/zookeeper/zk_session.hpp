// One ZooKeeper session of a backend, over the multi-threaded C client (libzookeeper-mt), and
// calls on it bounded by deadlines.
//
//   ZkSession session(config, on_event);
//   ZkBatch batch;                          // requests sent together, answered in order
//   auto handle = session.handle(deadline, error);   // null: no session within the deadline
//   batch.create(*handle, path, data, ZOO_EPHEMERAL_SEQUENTIAL);
//   batch.children(*handle, dir);
//   batch.wait(deadline);                   // every answer, or kNoAnswer for the late ones
//
// The C client keeps the session alive (heartbeats at a third of its timeout) and moves it
// to another server of the ensemble when a connection breaks; requests of one session are
// applied in the order they were sent. An expired session cannot come back: handle() then
// opens a new one, and every znode of the old one is gone. Watches are one-shot; the C
// client also calls them on every change of the connection's state (ZkSession::arm_watch).
#pragma once

#include <zookeeper/zookeeper.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "steady.hpp"

namespace dlock::internal {

/// A `rc` of ZkBatch for a request whose answer did not come before the deadline.
inline constexpr int kNoAnswer = -10001;

/// One zhandle_t: closed (the session ended, its ephemeral znodes deleted) when the last
/// holder lets it go.
class ZkHandle {
 public:
  ZkHandle(zhandle_t* zh, std::uint64_t generation) : zh_(zh), generation_(generation) {}
  ~ZkHandle();
  ZkHandle(const ZkHandle&) = delete;
  ZkHandle& operator=(const ZkHandle&) = delete;

  [[nodiscard]] zhandle_t* get() const { return zh_; }
  [[nodiscard]] std::uint64_t generation() const { return generation_; }
  /// The session's id once established (0 before).
  [[nodiscard]] std::int64_t session_id() const;

 private:
  zhandle_t* zh_;
  std::uint64_t generation_;
};

/// The answer to one request of a batch.
struct ZkAnswer {
  int rc = kNoAnswer;
  std::string value;                  ///< create: the path made; get: the data
  struct Stat stat {};                ///< create2, exists, get
  std::vector<std::string> children;  ///< children
  std::vector<int> results;           ///< multi: each operation's rc
};

/// One operation of a transaction (ZkBatch::multi): all are applied, or none.
struct ZkOp {
  enum class Kind { kCheck, kCreate, kRemove, kSet };
  Kind kind;
  std::string path;
  std::string data;  ///< kCreate, kSet
  int version = -1;  ///< kCheck, kRemove, kSet: -1 for any
  int flags = 0;     ///< kCreate
};

/// Requests sent together and waited for together. Answers arrive on the C client's
/// completion thread; one that arrives after wait() gave up is dropped.
class ZkBatch {
 public:
  ZkBatch();
  /// Each returns the index of its answer.
  std::size_t create(const ZkHandle& handle, const std::string& path, std::string_view data,
                     int flags);
  std::size_t remove(const ZkHandle& handle, const std::string& path);
  std::size_t exists(const ZkHandle& handle, const std::string& path);
  std::size_t get(const ZkHandle& handle, const std::string& path);
  std::size_t children(const ZkHandle& handle, const std::string& path);
  /// The new stat is the answer's: its mtime is the ensemble leader's clock.
  std::size_t set(const ZkHandle& handle, const std::string& path, std::string_view data,
                  int version = -1);
  std::size_t multi(const ZkHandle& handle, std::vector<ZkOp> ops);
  std::size_t sync(const ZkHandle& handle, const std::string& path);
  /// Waits for every answer until `deadline`; returns false if some did not come.
  bool wait(Clock::time_point deadline);
  [[nodiscard]] const ZkAnswer& answer(std::size_t index) const;

  struct State;

 private:
  std::size_t add();
  void refused(std::size_t index, int rc);
  /// Adds an answer and runs `call(data)`, the C client's asynchronous call with `data` as
  /// its completion's; a refusal fills the answer at once.
  template <typename Call>
  std::size_t send(Call call);

  std::shared_ptr<State> state_;
  std::vector<ZkAnswer> answers_;  // copied from state_ by wait()
};

/// Sends one delete and calls `done` with its rc on the settler's thread (settler.hpp), which
/// also destroys it: `done` may hold the last reference to what owns the session, which must
/// not be closed from the C client's own thread.
void zk_remove_later(const ZkHandle& handle, const std::string& path,
                     std::function<void(int)> done);

/// A one-shot flag that a watch sets; waiters sleep on it.
class ZkSignal {
 public:
  /// Waits until set or `until`; clears it and returns whether it was set.
  bool wait_until(Clock::time_point until);
  void set();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

class ZkSession {
 public:
  enum class Event { kConnected, kSuspended, kExpired };

  /// Opens the session at once (in the background). `on_event` runs on the C client's
  /// threads or a caller's and must not block or call back into the session.
  ZkSession(const BackendConfig& config, std::function<void(Event, Millis)> on_event);
  ~ZkSession();
  ZkSession(const ZkSession&) = delete;
  ZkSession& operator=(const ZkSession&) = delete;

  /// The connected session's handle, waiting for a connection until `deadline`; after an
  /// expiry, a new session. Null with `error` set when none is connected in time.
  std::shared_ptr<ZkHandle> handle(Clock::time_point deadline, std::string& error);
  /// The generation of the current handle (0 before the first).
  [[nodiscard]] std::uint64_t generation() {
    std::lock_guard lock(mutex_);
    return handle_ ? handle_->generation() : 0;
  }
  /// The session timeout the ensemble granted, or the one asked for before it answered.
  [[nodiscard]] Millis timeout() const { return Millis{timeout_ms_.load()}; }
  /// Wakes every call waiting for a connection, and refuses new ones: the backend is going.
  void shut_down();

  /// Sets `signal` when `path` changes or is deleted, when the connection's state changes,
  /// or at once when `path` does not exist (or the request fails).
  void arm_watch(const ZkHandle& handle, const std::string& path,
                 const std::shared_ptr<ZkSignal>& signal);
  /// Sets `signal` when a child of `dir` is made or deleted, when the connection's state
  /// changes, or at once when its lock znodes (zk::queue_of) are no longer `seen`.
  void arm_children_watch(const ZkHandle& handle, const std::string& dir,
                          std::vector<std::string> seen, const std::shared_ptr<ZkSignal>& signal);
  /// The ensemble's addresses as the C client takes them.
  [[nodiscard]] const std::string& hosts() const { return hosts_; }

 private:
  static void on_session(zhandle_t* zh, int type, int state, const char* path, void* context);
  /// A watch's callback: sets the signal registered under `context`.
  static void on_fire(zhandle_t* zh, int type, int state, const char* path, void* context);
  std::uintptr_t register_watch(const std::shared_ptr<ZkSignal>& signal);
  /// Whether the client took the watch registered under `id` (`rc`); if not, forgets it and
  /// sets its signal.
  bool armed(int rc, std::uintptr_t id, const std::shared_ptr<ZkSignal>& signal);
  std::shared_ptr<ZkHandle> open_locked(std::string& error);
  void fire_all_watches();

  const BackendConfig& config_;
  std::function<void(Event, Millis)> on_event_;  // with the session timeout
  std::string hosts_;
  std::atomic<int> timeout_ms_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<ZkHandle> handle_;
  std::uint64_t generation_ = 0;
  int state_ = 0;  // the C client's state of handle_
  bool closing_ = false;

  std::mutex watches_mutex_;
  std::uint64_t next_watch_ = 1;
  std::map<std::uint64_t, std::weak_ptr<ZkSignal>> watches_;
};

/// Text for a C client error code.
[[nodiscard]] std::string zk_error(int rc);

}  // namespace dlock::internal
