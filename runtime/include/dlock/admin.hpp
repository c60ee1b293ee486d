// dlock::Admin: what operators and tools (dlockctl) need — which locks are held, by whom,
// and a forced, audited release.
//
//   dlock::Admin admin(dlock::Client(dlock::load_config("dlock.yaml")));
//   for (const dlock::LockInfo& lock : admin.list("order:*")) {
//     fmt::print("{} held by {}@{} pid {}, token {}, {}ms left\n", lock.key, lock.name,
//                lock.host, lock.pid, lock.token, lock.ttl.count());
//   }
//   if (auto removed = admin.force_release("order:7", "stuck after a crash")) { ... }
//
// Every call goes to the lock servers of one backend (default: "default") and is bounded by
// that backend's timeouts. Unreachable servers throw dlock::BackendUnavailable; a backend
// without admin support (none at present) throws dlock::AdminNotSupported.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/errors.hpp"
#include "dlock/key.hpp"
#include "dlock/schedule.hpp"

namespace dlock {

/// The backend cannot do the requested admin operation.
class AdminNotSupported : public NotSupported {
 public:
  using NotSupported::NotSupported;
};

/// One server's view of a lock (redlock: one entry per instance).
struct InstanceLockInfo {
  std::string endpoint;      ///< `host:port`
  bool answered = false;     ///< false: unreachable or failed; see `error`
  bool held = false;         ///< a lock key exists there
  std::string owner;         ///< its owner id, when held
  std::uint64_t token = 0;   ///< its fencing token, when held
  std::chrono::milliseconds ttl{0};  ///< time left on the key there
  std::string error;
};

/// A lock held now, as stored by the lock server (see docs/RUNTIME.md, "Data in Redis").
/// One holder of a key that may have several (shared holds, permits).
struct HolderInfo {
  std::string owner;
  std::string host;
  long long pid = 0;
  long long thread = 0;
  std::string name;
  std::uint64_t token = 0;
  std::int64_t acquired_at_ms = 0;
  std::chrono::milliseconds ttl{0};
  bool min_hold = false;  ///< released, kept until its min_hold ends
};

/// One waiter with a place in a key's queue.
struct WaiterInfo {
  std::string owner;
  std::string mode;  ///< "exclusive", "shared" or "permits": the kind it waits for
  bool fair = false;
  std::chrono::milliseconds ttl{0};  ///< how long its place lasts unless it tries again
};

struct LockInfo {
  std::string key;           ///< the user's key (any bytes), without the service namespace
  std::string owner;         ///< owner id: unique per acquisition
  std::string host;          ///< host name of the holding process
  long long pid = 0;         ///< process id of the holder
  long long thread = 0;      ///< kernel thread id of the acquiring thread
  std::string name;          ///< the lock's name (guard name), may be empty
  std::uint64_t token = 0;   ///< fencing token of the grant
  std::int64_t acquired_at_ms = 0;  ///< grant time, server clock, ms since the Unix epoch
  std::chrono::milliseconds lease{0};  ///< the key's time-to-live when granted or renewed
  std::chrono::milliseconds ttl{0};    ///< time left before the key expires; -1: no expiry
  /// The owner released it, and it is kept until its min_hold ends (nobody else can take it
  /// until `ttl` runs out).
  bool min_hold = false;
  /// redlock only: what every instance holds for this key (empty for other topologies).
  std::vector<InstanceLockInfo> instances;
  /// "exclusive", "shared" or "permits"; the fields above describe the first holder.
  std::string mode = "exclusive";
  int permits = 0;  ///< permits: how many holders the key may have
  /// Every holder (one for an exclusive lock); filled where the engine keeps several.
  std::vector<HolderInfo> holders;
  /// The waiters that keep a place in the key's queue, first first (engines that queue).
  std::vector<WaiterInfo> queue;
};

/// One forced release, as recorded in the lock server (`dlock:{<service>:audit}`, newest
/// first, the last 1000 kept) and logged at warn level.
struct AuditEntry {
  std::string id;                 ///< unique id of the entry
  std::int64_t at_ms = 0;         ///< when, server clock, ms since the Unix epoch
  std::string user;               ///< OS user who forced it
  std::string host;               ///< host it was forced from
  long long pid = 0;              ///< process id of the tool that forced it
  std::string note;               ///< free text given with the release
  std::string key;                ///< the user's key
  std::string owner;              ///< the owner that was removed
  std::uint64_t token = 0;        ///< its fencing token
  std::string owner_host;         ///< its host, pid and name
  long long owner_pid = 0;
  std::string owner_name;
};

class Admin {
 public:
  /// Shares the client's connections. Backends are named as in the configuration.
  explicit Admin(Client client);

  /// Locks held now whose key matches the shell-style `pattern` (`*`, `?`, `[...]`, `\`
  /// escapes; `*` matches everything). Sorted by key. Scans with SCAN, never KEYS.
  [[nodiscard]] std::vector<LockInfo> list(std::string_view pattern = "*",
                                           const std::string& backend = "default") const;
  /// The lock on `key`, or nothing when nobody holds it.
  [[nodiscard]] std::optional<LockInfo> inspect(const Key& key,
                                                const std::string& backend = "default") const;
  /// Deletes the lock on `key` whoever holds it, wakes its waiters, records an AuditEntry
  /// and logs a warning. Returns what was removed, or nothing when there was no lock.
  std::optional<LockInfo> force_release(const Key& key, std::string_view note = {},
                                        const std::string& backend = "default") const;
  /// The recorded forced releases, newest first, at most `limit`.
  [[nodiscard]] std::vector<AuditEntry> history(std::size_t limit = 100,
                                                const std::string& backend = "default") const;

  /// Recorded scheduled runs (dlock::claim_run) whose key matches `pattern`, sorted by key.
  [[nodiscard]] std::vector<RunRecord> runs(std::string_view pattern = "*",
                                            const std::string& backend = "default") const;

  [[nodiscard]] const Client& client() const { return client_; }

 private:
  Client client_;
};

/// Shell-style matching as `list` does it, byte by byte (a NUL byte is an ordinary byte).
[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view text) noexcept;

}  // namespace dlock
