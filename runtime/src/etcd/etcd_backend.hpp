// The etcd engine (`topology: etcd`), over etcd's v3 gRPC API. A lock is the key created
// first under the lock's prefix (each contender puts a key named by its lease), its
// fencing token that key's create revision; each waiter watches the key it waits for (a
// permit, every key of the lock); each hold has a lease of its own, kept alive by the
// watchdog, and goes with it. It offers the lock, admin and scheduled-run seams.
//
//   <root>/<service>/locks/<digest of key>/<lease>   value: the holder (lease ms, pid,
//                                                    thread, host, name, key, owner); on
//                                                    that lease, one hold a lease at a time
//   <root>/<service>/locks/<digest of key>/s<lease>  the same for a shared hold: after the
//                                                    exclusive keys (hex digits) in key order
//   <root>/<service>/locks/<digest of key>/p<N>-<lease>  the same for a permit of N
//
// Where a request stands among the keys, in create order, is standing_of's rule
// (queue_standing.hpp): a shared request holds the lock when only shared keys were created
// before its own, an exclusive one when none was, a permit of N when fewer than N were, all
// permits of N.
//   <root>/<service>/runs/<digest of key>            a scheduled run's record, on a lease of
//                                                    its keep
//   <root>/<service>/audit/<revision>                forced releases, the last 1000 kept
#pragma once

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admin_backend.hpp"
#include "backend.hpp"
#include "bytes.hpp"
#include "engine.hpp"
#include "etcd/etcd_book.hpp"
#include "etcd/etcd_channel.hpp"
#include "etcd/etcd_keys.hpp"
#include "run_store.hpp"

namespace dlock::internal {


class EtcdBackend final : public Backend, public RunStore, public AdminBackend {
 public:
  EtcdBackend(const BackendConfig& config, const std::string& service);
  ~EtcdBackend() override;

  GrantReply acquire(const GrantRequest& request) override;
  void renew(std::vector<RenewItem>& items) override;
  ReleaseOutcome release(const Key& key, std::string_view owner,
                         Millis keep_for) noexcept override;
  // No release_later(): etcd applies the requests of one connection's streams in no
  // particular order, so a release not waited for could come after the thread's next
  // acquire of the same lock.
  std::unique_ptr<ReleaseWatch> watch(const Key&) override {
    return std::make_unique<EtcdWatch>(book_, channel_);
  }
  [[nodiscard]] bool watch_is_free() const override { return true; }
  /// Every kind (etcd_queue.cpp, standing_of); waiters are served in the order of their keys'
  /// create revisions (fair, with or without `fair`).
  [[nodiscard]] bool supports(LockKind /*kind*/, bool /*fair*/) const override { return true; }
  [[nodiscard]] const BackendConfig& config() const override { return config_; }

  std::vector<LockInfo> list(std::string_view pattern) override;
  std::optional<LockInfo> inspect(const Key& key) override;
  std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) override;
  std::vector<AuditEntry> history(std::size_t limit) override;

  std::int64_t server_time_ms() override;
  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override;
  bool finish_run(const Key& key, std::string_view owner,
                  std::string_view outcome) noexcept override;
  std::vector<RunRecord> list_runs(std::string_view pattern) override;

 private:
  struct Try;
  /// The owner's hold on a lease of its own: a free one fresh enough, or a new one.
  std::optional<EtcdHold> new_hold(const GrantRequest& request, const std::string& prefix,
                                   Clock::time_point until, std::string& error);
  [[nodiscard]] pb::TxnRequest acquire_txn(const GrantRequest& request, const EtcdHold& hold,
                                           const std::string& prefix, bool waits) const;
  GrantReply take_place(Try& t);
  GrantReply granted(Try& t, std::int64_t token);
  /// The owner's key waits: it keeps its place and watches `before` (or, with `range_end`,
  /// the keys in [before, range_end)) for a deletion.
  GrantReply queued(Try& t, const std::string& before, std::int64_t before_token,
                    const std::string& range_end = {});
  std::optional<GrantReply> check_place(Try& t);
  /// Where a permit's key stands in its lock's keys, `listed` in create order (standing_of):
  /// granted, queued, or, for a try or a refused request, gone again.
  GrantReply stand(Try& t, const pb::RangeResponse& listed);
  /// Deletes the owner's key from the queue (its lease kept for another lock when that is
  /// done), for a request that leaves without the lock.
  void leave_queue(Try& t);
  std::optional<std::vector<std::int64_t>> created_at(const std::vector<std::string>& keys,
                                                      Clock::time_point until);
  GrantReply unavailable(std::string error, bool unknown) const;
  ReleaseOutcome keep_until(std::string_view owner, const std::string& key,
                            std::optional<EtcdHold> hold, Millis keep_for,
                            Clock::time_point until);
  /// The key holding the lock on `key` (the first created under its prefix), or nothing.
  std::optional<pb::KeyValue> holder_of(const Key& key, Clock::time_point until);
  /// What admin calls say of a holder's key.
  LockInfo info_of(const pb::KeyValue& kv, Clock::time_point until);
  /// Removes the lock's first holder, as force_release() does.
  std::optional<LockInfo> force_release_first(const Key& key, const AuditEntry& who);
  /// What admin calls say of the lock of `keys`, in create order under `prefix`.
  std::optional<LockInfo> lock_of(const google::protobuf::RepeatedPtrField<pb::KeyValue>& keys,
                                  const std::string& prefix, Clock::time_point until);
  [[nodiscard]] BackendUnavailable unreachable(const grpc::Status& status) const {
    return BackendUnavailable(fmt::format("backend {}: {}", config_.name, describe(status)));
  }
  [[nodiscard]] std::string holder_value(const GrantRequest& request) const;
  [[nodiscard]] std::string prefix_of(const Key& key) const {
    return locks_ + key_digest(key.str()) + "/";
  }
  [[nodiscard]] std::string run_of(const Key& key) const { return runs_ + key_digest(key.str()); }
  [[nodiscard]] Clock::time_point deadline() const {
    return later(Clock::now(), config_.command_timeout);
  }
  void keep_and_reap();

  BackendConfig config_;
  std::string base_;   // <root>/<service>/
  std::string locks_;  // ...locks/
  std::string runs_;   // ...runs/
  std::string audit_;  // ...audit/
  std::string host_;
  std::shared_ptr<EtcdChannel> channel_;
  std::shared_ptr<EtcdBook> book_ = std::make_shared<EtcdBook>();
  std::thread keeper_;
};

// One acquire call: what its rounds share.
struct EtcdBackend::Try {
  const GrantRequest& request;
  EtcdWatch* watch;  // set when the caller waits: its key then stays in the queue
  Clock::time_point until;
  std::string prefix;
  EtcdHold hold;
  pb::TxnResponse reply;
};

/// Throws ConfigError when the backend names no member, or a TLS file cannot be read.
Engine make_etcd_backend(const BackendConfig& config, const std::string& service,
                         std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
