#include "redis/subscriber.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <utility>

#include "log.hpp"
#include "redis/reply.hpp"

namespace dlock::internal {
namespace {

constexpr Millis kMaxBackoff{1000};

}  // namespace

Subscriber::Subscriber(std::vector<Endpoint> endpoints, BackendConfig config, ServerKind kind,
                       ReleaseSignals& signals, std::shared_ptr<Metrics> metrics,
                       MessageFilter filter)
    : config_(std::move(config)),
      kind_(kind),
      signals_(signals),
      filter_(std::move(filter)),
      metrics_(std::move(metrics)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      endpoints_(std::move(endpoints)),
      thread_([this] { run(); }) {}

Subscriber::~Subscriber() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Subscriber::wake() noexcept {
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void Subscriber::interest(const std::string& channel, bool wanted) {
  {
    std::lock_guard lock(mutex_);
    pending_.emplace_back(channel, wanted);
    ++owed_[channel];
    if (!wanted) active_.erase(channel);
  }
  wake();
}

void Subscriber::retarget(Endpoint endpoint) {
  {
    std::lock_guard lock(mutex_);
    if (endpoints_.size() == 1 && endpoints_.front() == endpoint) return;
    endpoints_ = {std::move(endpoint)};
    next_endpoint_ = 0;
    retargeted_ = true;
  }
  wake();
}

void Subscriber::set_endpoints(std::vector<Endpoint> endpoints) {
  std::lock_guard lock(mutex_);
  endpoints_ = std::move(endpoints);
  next_endpoint_ = 0;
}

bool Subscriber::await_subscribed(const std::string& channel, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  confirmed_cv_.wait_until(lock, deadline,
                           [&] { return stopping_ || down_ || active_.count(channel) > 0; });
  return active_.count(channel) > 0;
}

bool Subscriber::connect() {
  Endpoint target;
  {
    std::lock_guard lock(mutex_);
    retargeted_ = false;
    if (!endpoints_.empty()) {
      next_endpoint_ %= endpoints_.size();
      target = endpoints_[next_endpoint_];
    }
  }
  std::string error = "no server to subscribe to yet";
  auto conn = target.host.empty() ? nullptr : Connection::open(target, config_, error, kind_);
  if (!conn) {
    log(LogLevel::kDebug, "subscriber: {}", error);
    {
      std::lock_guard lock(mutex_);
      down_ = true;
      ++next_endpoint_;  // try the next server next time
    }
    confirmed_cv_.notify_all();
    return false;
  }
  conn_ = std::move(conn);
  std::lock_guard lock(mutex_);
  if (ever_connected_) {
    bump(metrics_->subscriber_reconnects);
    log(LogLevel::kInfo, "subscriber reconnected to {}", to_string(target));
  }
  ever_connected_ = true;
  connected_ = true;
  down_ = false;
  // Everything wanted now is subscribed afresh; older queued changes are moot.
  pending_.clear();
  active_.clear();
  owed_.clear();
  for (const auto& channel : signals_.channels()) {
    pending_.emplace_back(channel, true);
    ++owed_[channel];
  }
  return true;
}

void Subscriber::disconnect(std::string why) {  // a copy: it may be the connection's own text
  conn_.reset();
  {
    std::lock_guard lock(mutex_);
    // Dropped while its subscriptions went unanswered: the server takes connections and
    // then refuses them (a TLS client certificate it wants), so the next connect backs off.
    quiet_drop_ = !heard_ && !owed_.empty();
    if (connected_)
      log(LogLevel::kWarn, "subscriber lost its connection: {}; waiters poll until it is back",
          why);
    connected_ = false;
    active_.clear();
    owed_.clear();
  }
  confirmed_cv_.notify_all();
  // Anyone waiting may have missed a release: let them all try again now.
  for (const auto& channel : signals_.channels()) signals_.notify(channel);
}

bool Subscriber::flush_pending() {
  std::deque<std::pair<std::string, bool>> batch;
  {
    std::lock_guard lock(mutex_);
    batch.swap(pending_);
  }
  if (batch.empty()) return true;
  for (const auto& [channel, wanted] : batch) {
    conn_->append({wanted ? "SUBSCRIBE" : "UNSUBSCRIBE", channel});
  }
  return conn_->flush(Clock::now() + config_.command_timeout);
}

void Subscriber::read_messages() {
  conn_->read_available();
  for (;;) {
    std::optional<Reply> next = conn_->next_reply();
    if (!next) {
      if (conn_->broken()) disconnect(conn_->error());
      return;
    }
    heard_ = true;
    Reply reply = std::move(*next);
    const ReplyView message(reply);
    const std::string_view kind = message[0].text();
    const std::string channel(message[1].text());
    if (kind == "message") {
      const std::string_view payload = message[2].text();
      if (!filter_ || filter_(channel, payload)) signals_.notify(channel, payload);
    } else if (kind == "subscribe" || kind == "unsubscribe") {
      {
        std::lock_guard lock(mutex_);
        auto owed = owed_.find(channel);
        if (owed != owed_.end() && --owed->second == 0) {
          owed_.erase(owed);
          // The last command queued for the channel has been answered: its state is the
          // server's. (An earlier confirmation says nothing while later commands are owed.)
          if (kind == "subscribe") active_.insert(channel);
          else active_.erase(channel);
        }
      }
      confirmed_cv_.notify_all();
    }
  }
}

void Subscriber::run() {
  Millis backoff{10};
  for (;;) {
    bool retarget_now;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
      retarget_now = retargeted_;
    }
    if (retarget_now && conn_) disconnect("the master moved");
    if (!conn_) {
      if (std::exchange(quiet_drop_, false) || !connect()) {
        // Interruptible back-off: a stop or retarget wakes us through the eventfd.
        pollfd pfd{wake_fd_, POLLIN, 0};
        ::poll(&pfd, 1, static_cast<int>(backoff.count()));
        std::uint64_t drained;
        [[maybe_unused]] auto n = ::read(wake_fd_, &drained, sizeof drained);
        backoff = std::min(backoff * 2, std::min(kMaxBackoff, config_.poll_interval));
        continue;
      }
      heard_ = false;
    }
    if (!flush_pending()) {
      disconnect(conn_->error());
      continue;
    }
    pollfd fds[2] = {{conn_->fd(), conn_->poll_events(), 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, conn_->has_buffered() ? 0 : 1000) < 0) continue;
    if (fds[1].revents & POLLIN) {
      std::uint64_t drained;
      [[maybe_unused]] auto n = ::read(wake_fd_, &drained, sizeof drained);
    }
    if (fds[0].revents != 0 || conn_->has_buffered()) read_messages();
    if (heard_) backoff = Millis{10};
  }
  conn_.reset();
}

ReleaseFeed::ReleaseFeed(const std::vector<std::vector<Endpoint>>& sources,
                         const BackendConfig& config, std::shared_ptr<Metrics> metrics,
                         ServerKind kind, const Subscriber::MessageFilter& filter)
    : confirm_timeout_(config.command_timeout),
      signals_([this](const std::string& channel, bool wanted) {
        for (auto& subscriber : subscribers_) subscriber->interest(channel, wanted);
      }) {
  for (const auto& endpoints : sources) {
    subscribers_.push_back(
        std::make_unique<Subscriber>(endpoints, config, kind, signals_, metrics, filter));
  }
}

// The subscribers' threads end before the signals they notify go.
ReleaseFeed::~ReleaseFeed() { subscribers_.clear(); }

std::unique_ptr<ReleaseWatch> ReleaseFeed::watch(const std::string& channel) {
  auto watch = signals_.watch(channel);
  const auto deadline = Clock::now() + confirm_timeout_;
  for (auto& subscriber : subscribers_) subscriber->await_subscribed(channel, deadline);
  return watch;
}

}  // namespace dlock::internal
