#include "etcd/etcd_channel.hpp"

#include <fmt/format.h>
#include <grpc/grpc.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "log.hpp"
#include "dlock/errors.hpp"
#include "redis/stream.hpp"
#include "redis/tls.hpp"

namespace dlock::internal {

struct EtcdChannel::Member {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
};

namespace {

std::string read_file(const std::string& name, const std::string& backend, const char* key) {
  std::ifstream in(name, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    throw ConfigError(fmt::format("backends.{}.tls.{}: cannot read '{}'", backend, key,
                                  printable(name)));
  }
  return text.str();
}

std::shared_ptr<grpc::ChannelCredentials> credentials_of(const BackendConfig& config) {
  if (!config.tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  if (!config.tls.ca_file.empty()) {
    options.pem_root_certs = read_file(config.tls.ca_file, config.name, "ca_file");
  }
  if (!config.tls.cert_file.empty()) {
    options.pem_cert_chain = read_file(config.tls.cert_file, config.name, "cert_file");
    options.pem_private_key = read_file(config.tls.key_file, config.name, "key_file");
  }
  return grpc::SslCredentials(options);
}

grpc::ChannelArguments arguments_of(const BackendConfig& config) {
  grpc::ChannelArguments args;
  // A member that comes back is tried again within a second, not after gRPC's two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // etcd refuses pings more often than every 5 s (--grpc-keepalive-min-time).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(std::max<std::int64_t>(config.command_timeout.count(), 1000)));
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // Each backend its own connections, so that one backend's trouble is its own.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (config.tls.enabled && !config.tls.server_name.empty()) {
    args.SetSslTargetNameOverride(config.tls.server_name);
  }
  return args;
}

std::string target_of(const Endpoint& endpoint) {
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  return v6 ? fmt::format("ipv6:[{}]:{}", endpoint.host, endpoint.port)
            : fmt::format("{}:{}", endpoint.host, endpoint.port);
}

// etcd's own flag (its clients' WithRequireLeader): a member without a leader refuses the
// call, or ends the watch, at once instead of waiting or staying silent.
void require_leader(grpc::ClientContext& context) { context.AddMetadata("hasleader", "true"); }

void set_deadline(grpc::ClientContext& context, Clock::time_point until) {
  require_leader(context);
  const auto left = std::max<Clock::duration>(until - Clock::now(), Clock::duration::zero());
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
}

// Never sent: the channel had no connection to the member.
bool not_sent(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         status.error_message().find("failed to connect") != std::string::npos;
}

// A watch for one key's deletion, on a stream of its own. It owns itself until gRPC says
// the stream is done.
class DeleteWatch final : public grpc::ClientBidiReactor<pb::WatchRequest, pb::WatchResponse> {
 public:
  struct Control final : EtcdWatchCall {
    std::mutex mutex;
    std::condition_variable done;
    std::shared_ptr<DeleteWatch> live;
    bool cancelled = false;
    // Waits (a bounded while) for gRPC to be done with the call, holding it meanwhile: the
    // call, and the last reference to its channel that it may hold, then go on this thread,
    // never inside gRPC's own callback (where releasing a channel is not safe).
    void cancel() override { stop(true); }
    void stop(bool wait) {
      std::unique_lock lock(mutex);
      cancelled = true;
      std::shared_ptr<DeleteWatch> call = live;
      if (!call) return;
      lock.unlock();
      call->context_.TryCancel();
      lock.lock();
      if (wait) done.wait_for(lock, std::chrono::seconds(2), [&] { return !live; });
      lock.unlock();
    }
    ~Control() override { stop(false); }
  };

  static std::shared_ptr<EtcdWatchCall> start(pb::Watch::Stub& stub,
                                              std::shared_ptr<grpc::Channel> channel,
                                              const std::string& key, std::int64_t revision,
                                              std::shared_ptr<EtcdSignal> signal,
                                              const std::string& range_end) {
    auto call = std::shared_ptr<DeleteWatch>(new DeleteWatch(std::move(signal)));
    call->channel_ = std::move(channel);
    auto control = std::make_shared<Control>();
    control->live = call;
    call->control_ = control;
    call->self_ = call;
    auto* create = call->request_.mutable_create_request();
    create->set_key(key);
    if (!range_end.empty()) create->set_range_end(range_end);
    create->set_start_revision(revision + 1);
    create->add_filters(pb::WatchCreateRequest::NOPUT);
    require_leader(call->context_);
    stub.async()->Watch(&call->context_, call.get());
    call->StartWrite(&call->request_);
    call->StartRead(&call->reply_);
    call->StartCall();
    return control;
  }

  void OnWriteDone(bool) override {}
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ends: OnDone follows
    bool deleted = reply_.canceled();
    for (const auto& event : reply_.events()) deleted |= event.type() == pb::Event::DELETE;
    if (deleted) fire();
    reply_.Clear();
    StartRead(&reply_);
  }
  void OnDone(const grpc::Status&) override {
    fire();  // a broken watch is worth another look
    if (auto control = control_.lock()) {
      std::lock_guard lock(control->mutex);
      control->live.reset();
      control->done.notify_all();
    }
    self_.reset();  // the last reference only when nobody cancels
  }

 private:
  explicit DeleteWatch(std::shared_ptr<EtcdSignal> signal) : signal_(std::move(signal)) {}
  void fire() {
    auto control = control_.lock();
    if (!control) return;
    std::lock_guard lock(control->mutex);
    if (!control->cancelled) signal_->fire();
  }

  grpc::ClientContext context_;
  pb::WatchRequest request_;
  pb::WatchResponse reply_;
  std::shared_ptr<EtcdSignal> signal_;
  std::weak_ptr<Control> control_;
  std::shared_ptr<DeleteWatch> self_;
  std::shared_ptr<grpc::Channel> channel_;  // outlives the call, whatever goes first
};

// "Date: Fri, 27 Nov 2026 08:25:11 GMT" in an HTTP answer's head: seconds since the epoch.
std::optional<std::int64_t> date_in(const std::string& head) {
  std::size_t at = 0;
  for (;;) {
    at = head.find('\n', at);
    if (at == std::string::npos) return std::nullopt;
    ++at;
    if (head.size() - at > 5 && (head.compare(at, 5, "Date:") == 0 ||
                                 head.compare(at, 5, "date:") == 0)) {
      break;
    }
  }
  std::tm parts{};
  const char* end = strptime(head.c_str() + at + 5, " %a, %d %b %Y %H:%M:%S GMT", &parts);
  if (end == nullptr) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&parts));
}

// The head of the answer to GET /version from `endpoint`, by `until`.
std::optional<std::string> http_head(const Endpoint& endpoint,
                                     std::shared_ptr<const TlsContext> tls,
                                     Clock::time_point until, std::string& error) {
  auto stream = Stream::open(endpoint, std::move(tls), until, error);
  if (!stream) return std::nullopt;
  const std::string request = fmt::format(
      "GET /version HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", endpoint.host);
  std::size_t sent = 0;
  std::string head;
  char buffer[4096];
  while (head.find("\r\n\r\n") == std::string::npos) {
    IoResult result = sent < request.size()
                          ? stream->write_some(request.data() + sent, request.size() - sent)
                          : stream->read_some(buffer, sizeof buffer);
    if (result.what == Io::kDone) {
      if (sent < request.size()) {
        sent += result.bytes;
      } else {
        head.append(buffer, result.bytes);
      }
      if (head.size() > 65536) break;
      continue;
    }
    if (result.what == Io::kClosed || result.what == Io::kError) {
      error = result.what == Io::kClosed ? "the member closed the connection" : result.error;
      return head.empty() ? std::nullopt : std::optional<std::string>(head);
    }
    if (stream->has_buffered()) continue;
    const short events = result.what == Io::kWantRead ? POLLIN : POLLOUT;
    if (!wait_for(stream->fd(), events, until)) {
      error = "no answer in time";
      return std::nullopt;
    }
  }
  return head;
}

// Why gRPC could not connect to `endpoint`: over TLS, the reason the project's own TLS stream
// gives (a handshake and GET /version, as for the clock) when it fails with a TLS error, which
// names the certificate problem, the missing client certificate or the plain-text port that
// gRPC's text does not; gRPC's own reason otherwise.
grpc::Status explained(const grpc::Status& unreached, const BackendConfig& config,
                       const Endpoint& endpoint, Clock::time_point until) {
  if (!config.tls.enabled) return unreached;
  std::string error;
  const auto tls = TlsContext::get(config.tls, error);
  if ((tls && http_head(endpoint, tls, until, error)) || error.rfind("TLS", 0) != 0) {
    return unreached;
  }
  return {grpc::StatusCode::UNAVAILABLE,
          fmt::format("{} (gRPC: {})", error, unreached.error_message())};
}

}  // namespace

bool member_trouble(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

std::string describe(const grpc::Status& status) {
  static constexpr const char* kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",        "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const auto code = static_cast<std::size_t>(status.error_code());
  const char* name = code < std::size(kNames) ? kNames[code] : "status";
  return fmt::format("{}: {}", name, status.error_message());
}

EtcdChannel::EtcdChannel(const BackendConfig& config) : config_(config) {
  const auto credentials = credentials_of(config_);
  const auto args = arguments_of(config_);
  for (const Endpoint& endpoint : config_.endpoints) {
    auto member = std::make_shared<Member>();
    member->channel = grpc::CreateCustomChannel(target_of(endpoint), credentials, args);
    member->kv = pb::KV::NewStub(member->channel);
    member->lease = pb::Lease::NewStub(member->channel);
    member->watch = pb::Watch::NewStub(member->channel);
    members_.push_back(std::move(member));
  }
}

EtcdChannel::~EtcdChannel() = default;

template <typename Call>
grpc::Status EtcdChannel::on_members(Clock::time_point until, bool* maybe_applied, Call&& call) {
  grpc::Status status(grpc::StatusCode::DEADLINE_EXCEEDED, "no member answered in time");
  grpc::Status unreached;  // the first connection failure: the timeouts after it say less
  const std::size_t count = members_.size();
  const std::size_t first = current_.load(std::memory_order_relaxed) % count;
  for (std::size_t tried = 0; tried < 2 * count; ++tried) {
    const auto now = Clock::now();
    if (now >= until) break;
    const std::size_t index = (first + tried) % count;
    // First round: a member whose connection failed is passed over at once (the call fails
    // at once, with gRPC's last connection error). Second round: each is waited for to
    // connect (gRPC reconnects only while a call waits), so that a cluster that comes back
    // serves the next call.
    const bool second_round = tried >= count;
    // Half of what is left, so that one silent member does not use it all; all to the last.
    const bool last = tried + 1 == 2 * count;
    const auto attempt_until = last ? until : now + std::max<Clock::duration>((until - now) / 2,
                                                                              Millis{100});
    grpc::ClientContext context;
    context.set_wait_for_ready(second_round);
    set_deadline(context, std::min(until, attempt_until));
    status = call(*members_[index], context);
    if (!member_trouble(status)) {
      current_.store(index, std::memory_order_relaxed);
      return status;
    }
    if (maybe_applied && !not_sent(status)) *maybe_applied = true;
    if (not_sent(status) && unreached.ok()) {
      unreached = explained(status, config_, config_.endpoints[index],
                            std::min(until, attempt_until));
    }
    current_.store((index + 1) % count, std::memory_order_relaxed);
  }
  if (!unreached.ok() &&
      (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || not_sent(status))) {
    return unreached;
  }
  return status;
}

template <typename Stub, typename Request, typename Reply>
grpc::Status EtcdChannel::unary(std::unique_ptr<Stub> Member::*stub,
                                grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                             Reply*),
                                const Request& request, Reply& reply, Clock::time_point until,
                                bool* maybe_applied) {
  return on_members(until, maybe_applied, [&](Member& m, grpc::ClientContext& context) {
    reply.Clear();
    return ((*(m.*stub)).*method)(&context, request, &reply);
  });
}

grpc::Status EtcdChannel::txn(const pb::TxnRequest& request, pb::TxnResponse& reply,
                              Clock::time_point until, bool* maybe_applied) {
  return unary(&Member::kv, &pb::KV::Stub::Txn, request, reply, until, maybe_applied);
}

grpc::Status EtcdChannel::range(const pb::RangeRequest& request, pb::RangeResponse& reply,
                                Clock::time_point until) {
  return unary(&Member::kv, &pb::KV::Stub::Range, request, reply, until);
}

grpc::Status EtcdChannel::grant(std::int64_t ttl_seconds, pb::LeaseGrantResponse& reply,
                                Clock::time_point until) {
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  return unary(&Member::lease, &pb::Lease::Stub::LeaseGrant, request, reply, until);
}

grpc::Status EtcdChannel::revoke(std::int64_t lease, Clock::time_point until) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse reply;
  return unary(&Member::lease, &pb::Lease::Stub::LeaseRevoke, request, reply, until);
}

grpc::Status EtcdChannel::time_to_live(std::int64_t lease, pb::LeaseTimeToLiveResponse& reply,
                                       Clock::time_point until) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease);
  return unary(&Member::lease, &pb::Lease::Stub::LeaseTimeToLive, request, reply, until);
}

std::optional<std::vector<std::int64_t>> EtcdChannel::keep_alive(
    const std::vector<std::int64_t>& leases, Clock::time_point until) {
  std::vector<std::int64_t> ttls(leases.size(), 0);
  if (leases.empty()) return ttls;
  const grpc::Status status =
      on_members(until, nullptr, [&](Member& m, grpc::ClientContext& context) {
        auto stream = m.lease->LeaseKeepAlive(&context);
        pb::LeaseKeepAliveRequest request;
        for (const std::int64_t lease : leases) {
          request.set_id(lease);
          if (!stream->Write(request)) break;
        }
        stream->WritesDone();
        pb::LeaseKeepAliveResponse reply;
        // Answers come in the order asked; a lease may be asked twice.
        for (std::size_t i = 0; i < leases.size() && stream->Read(&reply); ++i) {
          ttls[i] = reply.id() == leases[i] ? reply.ttl() : 0;
        }
        return stream->Finish();
      });
  if (!status.ok()) return std::nullopt;
  return ttls;
}

std::shared_ptr<EtcdWatchCall> EtcdChannel::watch_delete(const std::string& key,
                                                         std::int64_t revision,
                                                         std::shared_ptr<EtcdSignal> signal,
                                                         const std::string& range_end) {
  const auto m = member(current_.load(std::memory_order_relaxed) % members_.size());
  return DeleteWatch::start(*m->watch, m->channel, key, revision, std::move(signal), range_end);
}

std::optional<std::int64_t> EtcdChannel::wall_clock_ms(Clock::time_point until,
                                                       std::string& error) {
  std::shared_ptr<const TlsContext> tls;
  if (config_.tls.enabled && !(tls = TlsContext::get(config_.tls, error))) return std::nullopt;
  const std::size_t count = config_.endpoints.size();
  const std::size_t first = current_.load(std::memory_order_relaxed) % count;
  for (std::size_t tried = 0; tried < count; ++tried) {
    const auto now = Clock::now();
    if (now >= until) break;
    const std::size_t index = (first + tried) % count;
    const Endpoint& endpoint = config_.endpoints[index];
    // Half of what is left, so that one silent member does not use it all; all to the last.
    const auto attempt_until =
        tried + 1 == count ? until : now + std::max<Clock::duration>((until - now) / 2, Millis{100});
    const auto head = http_head(endpoint, tls, std::min(until, attempt_until), error);
    if (!head) {
      current_.store((index + 1) % count, std::memory_order_relaxed);
      continue;
    }
    if (const auto seconds = date_in(*head)) return *seconds * 1000 + 500;
    error = fmt::format("{}:{} sent no Date", endpoint.host, endpoint.port);
  }
  if (error.empty()) error = "no member answered in time";
  return std::nullopt;
}

}  // namespace dlock::internal
