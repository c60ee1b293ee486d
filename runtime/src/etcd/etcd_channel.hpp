// How the etcd backend talks to a cluster: one gRPC channel per member (HTTP/2, every
// thread's calls multiplexed on it), the member in use kept until it fails, then the next.
//
//   EtcdChannel etcd(config);
//   pb::TxnResponse reply;
//   grpc::Status status = etcd.txn(request, reply, until);      // any member, by `until`
//   auto ttls = etcd.keep_alive({lease_a, lease_b}, until);     // one stream, one round trip
//   auto call = etcd.watch_delete(key, after_revision, signal);  // fires once deleted
//   std::int64_t now_ms = etcd.wall_clock_ms(until, error);     // a member's clock
//
// Every call is bounded by `until`; a member that does not answer within half of what is
// left is given up for the next (the last gets the rest). Only transport trouble moves on
// (unreachable, no leader, a timeout): an answer, even a refusal, is the cluster's.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "etcd/etcd_api.grpc.pb.h"
#include "steady.hpp"

namespace dlock::internal {

namespace pb = ::etcdserverpb;

/// Whether `status` says the member could not answer (so another may), rather than the
/// cluster refusing the request.
[[nodiscard]] bool member_trouble(const grpc::Status& status);
/// "UNAVAILABLE: etcdserver: no leader" and the like.
[[nodiscard]] std::string describe(const grpc::Status& status);

/// Wakes a waiter when a watched key goes (or its watch ends, which is worth a look too).
class EtcdSignal {
 public:
  void fire() {
    std::lock_guard lock(mutex_);
    ++fired_;
    changed_.notify_all();
  }
  /// True when fired since the last wait that returned true; false at `until`.
  bool wait_until(Clock::time_point until) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_until(lock, until, [&] { return fired_ != seen_; })) return false;
    seen_ = fired_;
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t fired_ = 0;
  std::uint64_t seen_ = 0;
};

/// A watch for the deletion of one key, open until cancel() (or until the stream ends).
class EtcdWatchCall {
 public:
  virtual ~EtcdWatchCall() = default;
  /// Ends the watch; nothing fires after it returns.
  virtual void cancel() = 0;
};

class EtcdChannel {
 public:
  /// Throws ConfigError when a TLS file cannot be read.
  explicit EtcdChannel(const BackendConfig& config);
  ~EtcdChannel();
  EtcdChannel(const EtcdChannel&) = delete;
  EtcdChannel& operator=(const EtcdChannel&) = delete;

  /// `maybe_applied`, when given, is set when an attempt failed after the request may have
  /// reached a member (it was then sent again, or the call gave up).
  grpc::Status txn(const pb::TxnRequest& request, pb::TxnResponse& reply,
                   Clock::time_point until, bool* maybe_applied = nullptr);
  grpc::Status range(const pb::RangeRequest& request, pb::RangeResponse& reply,
                     Clock::time_point until);
  grpc::Status grant(std::int64_t ttl_seconds, pb::LeaseGrantResponse& reply,
                     Clock::time_point until);
  /// NOT_FOUND when the lease is gone already.
  grpc::Status revoke(std::int64_t lease, Clock::time_point until);
  grpc::Status time_to_live(std::int64_t lease, pb::LeaseTimeToLiveResponse& reply,
                            Clock::time_point until);
  /// Keeps each lease alive: the TTL each now has in seconds (<= 0: gone), in order; nothing
  /// when the round did not complete by `until`.
  std::optional<std::vector<std::int64_t>> keep_alive(const std::vector<std::int64_t>& leases,
                                                      Clock::time_point until);
  /// Fires `signal` when `key` (or, with `range_end`, any key in [key, range_end)) is deleted
  /// after `revision` (or the watch stops, the member going away or the revision compacted).
  /// Cancel it to stop.
  std::shared_ptr<EtcdWatchCall> watch_delete(const std::string& key, std::int64_t revision,
                                              std::shared_ptr<EtcdSignal> signal,
                                              const std::string& range_end = {});
  /// A member's clock, read from the Date of an HTTP answer (whole seconds: the middle of
  /// the second is given). Nothing, with `error` set, when no member answers by `until`.
  std::optional<std::int64_t> wall_clock_ms(Clock::time_point until, std::string& error);

 private:
  struct Member;
  template <typename Call>
  grpc::Status on_members(Clock::time_point until, bool* maybe_applied, Call&& call);
  /// One unary call of `stub`'s `method` on the members, `reply` cleared before each try.
  template <typename Stub, typename Request, typename Reply>
  grpc::Status unary(std::unique_ptr<Stub> Member::*stub,
                     grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Reply*),
                     const Request& request, Reply& reply, Clock::time_point until,
                     bool* maybe_applied = nullptr);
  std::shared_ptr<Member> member(std::size_t index) const { return members_[index]; }

  BackendConfig config_;
  std::vector<std::shared_ptr<Member>> members_;
  std::atomic<std::size_t> current_{0};
};

}  // namespace dlock::internal
