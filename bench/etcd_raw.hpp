// Requests over etcd's gRPC stubs for the etcd benchmark (etcd_bench.cpp): the floor's and
// dlock's own (as runtime/src/etcd/etcd_backend.cpp builds them), a client with a connection
// and a lease of its own, and a member's count of watchers. The stubs are those generated into
// dlock_runtime (dlock_runtime_internals brings their headers; compiled again, protobuf would
// register the file twice).
#pragma once

#include <arpa/inet.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "etcd/etcd_api.grpc.pb.h"

namespace dlock::bench::etcd {

namespace pb = ::etcdserverpb;
using namespace std::chrono_literals;

/// The TTL of a Raw client's lease: granted once, never renewed, it outlives any run.
constexpr std::int64_t kRawLeaseSeconds = 3600;

inline std::string failure(const char* what, const grpc::Status& status) {
  return fmt::format("{}: gRPC status {}: {}", what, static_cast<int>(status.error_code()),
                     status.error_message());
}

inline void must(const grpc::Status& status, const char* what) {
  if (!status.ok()) throw std::runtime_error(failure(what, status));
}

inline void within_2s(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + 2s);
}

// The end of the keys under `prefix`, which ends in '/'.
inline std::string end_of(const std::string& prefix) {
  return prefix.substr(0, prefix.size() - 1) + static_cast<char>(prefix.back() + 1);
}

// The keys under `prefix` in the order they were created, names only (`limit` 0: all).
inline pb::RangeRequest queue_of(const std::string& prefix, std::int64_t limit) {
  pb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(end_of(prefix));
  range.set_sort_order(pb::RangeRequest::ASCEND);
  range.set_sort_target(pb::RangeRequest::CREATE);
  range.set_keys_only(true);
  range.set_limit(limit);
  return range;
}

// Puts `key` on `lease` unless it exists.
inline pb::TxnRequest put_if_absent(const std::string& key, std::int64_t lease,
                             const std::string& value = {}) {
  pb::TxnRequest txn;
  auto* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(pb::Compare::CREATE);
  compare->set_result(pb::Compare::EQUAL);
  compare->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  return txn;
}

// dlock's acquire that does not wait: the owner's key put if nothing is under the lock's
// prefix, else the first key there listed.
inline pb::TxnRequest dlock_acquire(const std::string& prefix, const std::string& mine,
                             std::int64_t lease, const std::string& value) {
  pb::TxnRequest txn = put_if_absent(mine, lease, value);
  txn.mutable_compare(0)->set_key(prefix);
  txn.mutable_compare(0)->set_range_end(end_of(prefix));
  *txn.add_failure()->mutable_request_range() = queue_of(prefix, 1);
  return txn;
}

// dlock's waiter's Txn: its key put unless there already, the queue listed either way.
inline pb::TxnRequest dlock_queue(const std::string& prefix, const std::string& mine,
                           std::int64_t lease) {
  pb::TxnRequest txn = put_if_absent(mine, lease);
  *txn.add_success()->mutable_request_range() = queue_of(prefix, 0);
  *txn.add_failure()->mutable_request_range() = queue_of(prefix, 0);
  return txn;
}

// dlock's release: a Txn deleting the owner's key.
inline pb::TxnRequest delete_txn(const std::string& key) {
  pb::TxnRequest txn;
  txn.add_success()->mutable_request_delete_range()->set_key(key);
  return txn;
}

/// A client over the generated stubs: a connection of its own to the member, and a lease of
/// its own that the keys it puts live on.
class Raw {
 public:
  explicit Raw(int port) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(fmt::format("127.0.0.1:{}", port),
                                         grpc::InsecureChannelCredentials(), args);
    kv_ = pb::KV::NewStub(channel_);
    watch_ = pb::Watch::NewStub(channel_);
    pb::LeaseGrantRequest request;
    request.set_ttl(kRawLeaseSeconds);
    pb::LeaseGrantResponse reply;
    grpc::ClientContext context;
    within_2s(context);
    context.set_wait_for_ready(true);
    must(pb::Lease::NewStub(channel_)->LeaseGrant(&context, request, &reply), "LeaseGrant");
    lease_ = reply.id();
  }

  [[nodiscard]] std::int64_t lease() const { return lease_; }
  pb::Watch::Stub& watch() { return *watch_; }

  grpc::Status txn(const pb::TxnRequest& request, pb::TxnResponse& reply) {
    grpc::ClientContext context;
    within_2s(context);
    return kv_->Txn(&context, request, &reply);
  }
  grpc::Status range(const pb::RangeRequest& request, pb::RangeResponse& reply) {
    grpc::ClientContext context;
    within_2s(context);
    return kv_->Range(&context, request, &reply);
  }
  grpc::Status remove(const std::string& key) {
    pb::DeleteRangeRequest request;
    request.set_key(key);
    pb::DeleteRangeResponse reply;
    grpc::ClientContext context;
    within_2s(context);
    return kv_->DeleteRange(&context, request, &reply);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Watch::Stub> watch_;
  std::int64_t lease_ = 0;
};

/// The watchers the member holds (etcd_debugging_mvcc_watcher_total on its /metrics), or -1
/// when it does not say.
inline long watchers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const timeval second{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof second);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buffer[65536];
    for (ssize_t got; (got = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) text.append(buffer, got);
  }
  ::close(fd);
  const std::string name = "\netcd_debugging_mvcc_watcher_total ";
  const auto at = text.find(name);
  return at == std::string::npos ? -1 : std::strtol(text.c_str() + at + name.size(), nullptr, 10);
}

}  // namespace dlock::bench::etcd
