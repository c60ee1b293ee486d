// The ZooKeeper backend's class, shared by zookeeper_backend.cpp (the lock seam, the reaper)
// and zk_records.cpp (admin and scheduled runs).
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admin_backend.hpp"
#include "backend.hpp"
#include "bytes.hpp"
#include "dlock/errors.hpp"
#include "owner.hpp"
#include "run_store.hpp"
#include "zookeeper/zk_book.hpp"
#include "zookeeper/zk_names.hpp"
#include "zookeeper/zk_session.hpp"

namespace dlock::internal {

class ZookeeperBackend final : public Backend, public RunStore, public AdminBackend {
 public:
  ZookeeperBackend(BackendConfig config, const std::string& service)
      : config_(std::move(config)),
        base_(config_.root + "/" + zk::znode_name(service)),
        locks_(base_ + "/locks"),
        audit_(base_ + "/audit"),
        runs_(base_ + "/runs"),
        clock_(base_ + "/clock"),
        host_(hex(host_name())),
        session_(std::make_unique<ZkSession>(
            config_, [this](ZkSession::Event e, Millis timeout) { on_event(e, timeout); })),
        reaper_([this] { reap(); }) {}

  ~ZookeeperBackend() override {
    book_->stop();
    session_->shut_down();  // the reaper may be waiting for a connection
    reaper_.join();
    session_.reset();  // ends the session: the ensemble deletes this process's znodes
  }

  GrantReply acquire(const GrantRequest& request) override;
  void renew(std::vector<RenewItem>& items) override;
  ReleaseOutcome release(const Key& key, std::string_view owner,
                         Millis keep_for) noexcept override;
  bool release_later(const Key& key, std::string_view owner, Millis keep_for,
                     std::function<void(ReleaseOutcome)> done) noexcept override;
  std::unique_ptr<ReleaseWatch> watch(const Key&) override {
    return std::make_unique<ZkWatch>(book_);
  }
  [[nodiscard]] bool watch_is_free() const override { return true; }
  /// Every kind (zk_names.hpp, standing_of): a request's place in the key's sequence decides,
  /// so waiters are served in the order their znodes were made (fair, with or without `fair`).
  [[nodiscard]] bool supports(LockKind /*kind*/, bool /*fair*/) const override { return true; }
  /// The session timeout the ensemble granted, or the one asked for before the first
  /// connection (acquire() then refuses a lease longer than the one granted after all).
  [[nodiscard]] Millis lease_limit() const override { return session_->timeout(); }
  /// Every sixth of the lease: the C client gives a silent server up after two thirds of the
  /// session timeout, and a renewal at most a sixth old keeps the lease valid for a sixth
  /// more, while the session moves to another server.
  [[nodiscard]] Clock::duration renew_every(Millis lease) const override { return lease / 6; }
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
  /// One renewal round through the session's current connection, for the items still
  /// kUnavailable; those the ensemble answered get their outcome. Returns ZOK, or the error
  /// that ended the round: the sync's, or an item's lost connection (ZCONNECTIONLOSS,
  /// ZOPERATIONTIMEOUT), or kNoAnswer when no connection came up, or no answer came, before
  /// `until`.
  int renew_round(std::vector<RenewItem>& items, Clock::time_point sent, Clock::time_point until);
  bool queue_up(Try& t);
  bool adopt(Try& t, const std::string& own);
  GrantReply place_taken(Try& t, std::size_t place);
  /// The paths of the owner's znodes under the key's directory, when the book does not know
  /// them; nothing with `outcome` set when there are none or they cannot be listed.
  std::vector<std::string> find_by_name(const ZkHandle& handle, const Key& key,
                                        std::string_view owner, Clock::time_point until,
                                        std::optional<ReleaseOutcome>& outcome);
  ReleaseOutcome keep_until(const ZkHandle& handle, std::string_view owner,
                            const std::string& path, Millis keep_for, Clock::time_point until);
  [[nodiscard]] std::string run_of(const Key& key) const {
    return runs_ + "/" + key_digest(key.str());
  }
  std::int64_t server_time_ms(const ZkHandle& handle, Clock::time_point until);
  [[nodiscard]] Clock::time_point deadline() const {
    return later(Clock::now(), config_.command_timeout);
  }
  [[nodiscard]] std::string dir_of(const Key& key) const {
    return locks_ + "/" + key_digest(key.str());
  }
  std::shared_ptr<ZkHandle> handle_or_throw(Clock::time_point deadline);
  /// Creates the directories down to `dir` (the key's, when `key` is given).
  bool make_dirs(const ZkHandle& handle, const std::string& dir, const Key* key,
                 Clock::time_point deadline, std::string& error);
  [[nodiscard]] std::string holder_data(const GrantRequest& request) const;
  GrantReply unavailable(std::string error, bool unknown) const;
  /// What admin and run calls throw when the ensemble answered `rc`.
  [[nodiscard]] BackendUnavailable unreachable(int rc) const {
    return BackendUnavailable(fmt::format("backend {}: {}", config_.name, zk_error(rc)));
  }
  /// The lock on `dir`: its holders (the first znode, or the shared ones before the first
  /// exclusive one) and its queue; nothing when none holds it. `paths` gets the holders'.
  std::optional<LockInfo> holder(const ZkHandle& handle, const std::string& dir,
                                 std::string key, Clock::time_point deadline,
                                 std::vector<std::string>* paths = nullptr);
  void on_event(ZkSession::Event event, Millis timeout);
  void reap();
  /// Sends the delete of `held` now, without waiting; the reaper tries again if it fails.
  void remove_now(const ZkHandle& handle, const Held& held);

  BackendConfig config_;
  std::string base_;
  std::string locks_;
  std::string audit_;
  std::string runs_;
  std::string clock_;
  std::string host_;
  std::shared_ptr<ZkBook> book_ = std::make_shared<ZkBook>();
  std::unique_ptr<ZkSession> session_;
  std::thread reaper_;
};

}  // namespace dlock::internal
