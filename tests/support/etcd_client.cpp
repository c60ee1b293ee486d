// EtcdClient: a small synchronous client of one etcd member on the gRPC stubs generated from
// runtime/src/etcd/etcd_api.proto (etcd_cluster.hpp). The generated code is compiled into
// dlock_runtime only: compiled again here, protobuf would register the file twice.
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "etcd/etcd_api.grpc.pb.h"
#include "etcd_cluster.hpp"

namespace dlock::test {

namespace pb = etcdserverpb;
using std::chrono::milliseconds;

namespace {

std::string code_name(grpc::StatusCode code) {
  static constexpr std::array<const char*, 17> kNames = {"OK",
                                                         "CANCELLED",
                                                         "UNKNOWN",
                                                         "INVALID_ARGUMENT",
                                                         "DEADLINE_EXCEEDED",
                                                         "NOT_FOUND",
                                                         "ALREADY_EXISTS",
                                                         "PERMISSION_DENIED",
                                                         "RESOURCE_EXHAUSTED",
                                                         "FAILED_PRECONDITION",
                                                         "ABORTED",
                                                         "OUT_OF_RANGE",
                                                         "UNIMPLEMENTED",
                                                         "INTERNAL",
                                                         "UNAVAILABLE",
                                                         "DATA_LOSS",
                                                         "UNAUTHENTICATED"};
  const auto index = static_cast<std::size_t>(code);
  return index < kNames.size() ? kNames[index] : fmt::format("code {}", index);
}

// "http://HOST:PORT", "https://HOST:PORT" (with `tls` only) or "HOST:PORT" to gRPC's
// "HOST:PORT".
std::string target_of(const std::string& endpoint, bool tls) {
  std::string scheme = "http://";
  if (endpoint.rfind("https://", 0) == 0) {
    if (!tls) {
      throw std::invalid_argument("EtcdClient: " + endpoint +
                                  " needs TLS: construct it with an EtcdClientTls");
    }
    scheme = "https://";
  }
  std::string target = endpoint.rfind(scheme, 0) == 0 ? endpoint.substr(scheme.size()) : endpoint;
  while (!target.empty() && target.back() == '/') target.pop_back();
  return target;
}

// The first key after every key that starts with `prefix` ("\0", every key, for "").
std::string prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

EtcdKeyValue to_key_value(const pb::KeyValue& kv) {
  return {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()};
}

std::string read_pem(const std::string& file, const char* what) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    throw std::runtime_error(fmt::format("EtcdClient: cannot read the {} '{}'", what, file));
  }
  return text.str();
}

// SslCredentials, or, without verification, the experimental TlsCredentials with a verifier
// that accepts anything (SslCredentials always checks the chain).
std::shared_ptr<grpc::ChannelCredentials> credentials_of(const std::optional<EtcdClientTls>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  const std::string roots = tls->ca_file.empty() ? "" : read_pem(tls->ca_file, "CA file");
  std::string cert, key;
  if (!tls->cert_file.empty()) {
    cert = read_pem(tls->cert_file, "certificate");
    key = read_pem(tls->key_file, "key");
  }
  if (tls->verify) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = roots;
    options.pem_cert_chain = cert;
    options.pem_private_key = key;
    return grpc::SslCredentials(options);
  }
  namespace ex = grpc::experimental;
  ex::TlsChannelCredentialsOptions options;
  std::vector<ex::IdentityKeyCertPair> identity;
  if (!cert.empty()) identity.push_back({key, cert});
  options.set_certificate_provider(
      std::make_shared<ex::StaticDataCertificateProvider>(roots, identity));
  if (!roots.empty()) options.watch_root_certs();
  if (!identity.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(false);
  options.set_certificate_verifier(std::make_shared<ex::NoOpCertificateVerifier>());
  options.set_check_call_host(false);
  return ex::TlsCredentials(options);
}

// A channel of its own (no subchannel shared with other clients of the same member), which
// tries again soon after a member comes back: at most 1 s between attempts, not 2 minutes.
std::shared_ptr<grpc::Channel> make_channel(const std::string& target,
                                            const std::optional<EtcdClientTls>& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (tls && !tls->server_name.empty()) args.SetSslTargetNameOverride(tls->server_name);
  return grpc::CreateCustomChannel(target, credentials_of(tls), args);
}

}  // namespace

struct EtcdClient::Impl {
  std::string target;
  milliseconds timeout;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Maintenance::Stub> maintenance;

  Impl(std::string target_in, milliseconds timeout_in, const std::optional<EtcdClientTls>& tls)
      : target(std::move(target_in)),
        timeout(timeout_in),
        channel(make_channel(target, tls)),
        kv(pb::KV::NewStub(channel)),
        lease(pb::Lease::NewStub(channel)),
        maintenance(pb::Maintenance::NewStub(channel)) {}

  // Runs one call with the deadline; throws EtcdError unless it succeeds. The wait for a
  // connection comes first: gRPC 1.51 fails a call at once while its channel is not connected,
  // and moves a connection attempt on only while some thread polls for the channel (a
  // background poller looks every 5 s, after the 1 s attempt has been given up): waiting for
  // the connection is that polling. A call still unconnected at the deadline gets 20 ms more,
  // so that it fails with the channel's last error (e.g. connection refused) where there is one.
  void call(const char* what, const std::function<grpc::Status(grpc::ClientContext&)>& rpc) {
    auto deadline = std::chrono::system_clock::now() + timeout;
    if (channel->GetState(true) != GRPC_CHANNEL_READY && !channel->WaitForConnected(deadline)) {
      deadline = std::chrono::system_clock::now() + milliseconds(20);
    }
    grpc::ClientContext context;
    context.set_deadline(deadline);
    const grpc::Status status = rpc(context);
    if (status.ok()) return;
    throw EtcdError(fmt::format("etcd {} {}: {} ({})", target, what, status.error_message(),
                                code_name(status.error_code())),
                    static_cast<int>(status.error_code()));
  }

  pb::RangeResponse range(const pb::RangeRequest& request) {
    pb::RangeResponse response;
    call("Range", [&](grpc::ClientContext& c) { return kv->Range(&c, request, &response); });
    return response;
  }

  std::int64_t remove(const std::string& key, const std::string& range_end) {
    pb::DeleteRangeRequest request;
    request.set_key(key);
    request.set_range_end(range_end);
    pb::DeleteRangeResponse response;
    call("DeleteRange",
         [&](grpc::ClientContext& c) { return kv->DeleteRange(&c, request, &response); });
    return response.deleted();
  }

  // LeaseTimeToLive; etcd answers TTL -1 for a lease it does not know (3.4 without an error,
  // later versions with NOT_FOUND).
  pb::LeaseTimeToLiveResponse time_to_live(std::int64_t id) {
    pb::LeaseTimeToLiveRequest request;
    request.set_id(id);
    pb::LeaseTimeToLiveResponse response;
    try {
      call("LeaseTimeToLive",
           [&](grpc::ClientContext& c) { return lease->LeaseTimeToLive(&c, request, &response); });
    } catch (const EtcdError& error) {
      if (error.code() != static_cast<int>(grpc::StatusCode::NOT_FOUND)) throw;
      response.set_ttl(-1);
      response.set_grantedttl(-1);
    }
    if (response.ttl() < 0) response.set_grantedttl(-1);
    return response;
  }
};

EtcdClient::EtcdClient(std::string endpoint, milliseconds timeout)
    : impl_(std::make_unique<Impl>(target_of(endpoint, false), timeout, std::nullopt)) {}
EtcdClient::EtcdClient(std::string endpoint, const EtcdClientTls& tls, milliseconds timeout)
    : impl_(std::make_unique<Impl>(target_of(endpoint, true), timeout, tls)) {}
EtcdClient::~EtcdClient() = default;
EtcdClient::EtcdClient(EtcdClient&&) noexcept = default;
EtcdClient& EtcdClient::operator=(EtcdClient&&) noexcept = default;

std::int64_t EtcdClient::put(const std::string& key, const std::string& value, std::int64_t lease) {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  impl_->call("Put",
              [&](grpc::ClientContext& c) { return impl_->kv->Put(&c, request, &response); });
  return response.header().revision();
}

std::optional<EtcdKeyValue> EtcdClient::get(const std::string& key, bool serializable) {
  pb::RangeRequest request;
  request.set_key(key);
  request.set_serializable(serializable);
  const pb::RangeResponse response = impl_->range(request);
  if (response.kvs_size() == 0) return std::nullopt;
  return to_key_value(response.kvs(0));
}

std::vector<EtcdKeyValue> EtcdClient::range(const std::string& prefix, bool serializable) {
  pb::RangeRequest request;
  request.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  request.set_range_end(prefix_end(prefix));
  request.set_sort_target(pb::RangeRequest::CREATE);
  request.set_sort_order(pb::RangeRequest::ASCEND);
  request.set_serializable(serializable);
  const pb::RangeResponse response = impl_->range(request);
  std::vector<EtcdKeyValue> out;
  for (const auto& kv : response.kvs()) out.push_back(to_key_value(kv));
  return out;
}

std::int64_t EtcdClient::remove(const std::string& key) { return impl_->remove(key, {}); }

std::int64_t EtcdClient::remove_prefix(const std::string& prefix) {
  return impl_->remove(prefix.empty() ? std::string(1, '\0') : prefix, prefix_end(prefix));
}

std::int64_t EtcdClient::grant(std::int64_t ttl_seconds) {
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  pb::LeaseGrantResponse response;
  impl_->call("LeaseGrant", [&](grpc::ClientContext& c) {
    return impl_->lease->LeaseGrant(&c, request, &response);
  });
  if (!response.error().empty()) {
    throw EtcdError(fmt::format("etcd {} LeaseGrant: {}", impl_->target, response.error()),
                    static_cast<int>(grpc::StatusCode::UNKNOWN));
  }
  return response.id();
}

void EtcdClient::revoke(std::int64_t lease) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse response;
  impl_->call("LeaseRevoke", [&](grpc::ClientContext& c) {
    return impl_->lease->LeaseRevoke(&c, request, &response);
  });
}

std::int64_t EtcdClient::time_to_live(std::int64_t lease) {
  return std::max<std::int64_t>(impl_->time_to_live(lease).ttl(), -1);
}

std::int64_t EtcdClient::granted_ttl(std::int64_t lease) {
  return impl_->time_to_live(lease).grantedttl();
}

EtcdMemberStatus EtcdClient::status() {
  pb::StatusRequest request;
  pb::StatusResponse response;
  impl_->call("Status", [&](grpc::ClientContext& c) {
    return impl_->maintenance->Status(&c, request, &response);
  });
  return {response.header().member_id(), response.leader(),
          response.raftterm(),           response.raftindex(),
          response.header().revision(),  response.version()};
}

const std::string& EtcdClient::target() const { return impl_->target; }
milliseconds EtcdClient::timeout() const { return impl_->timeout; }
void EtcdClient::set_timeout(milliseconds timeout) { impl_->timeout = timeout; }

}  // namespace dlock::test
