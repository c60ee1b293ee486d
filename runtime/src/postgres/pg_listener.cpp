#include "postgres/pg_listener.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "log.hpp"

namespace dlock::internal {
namespace {

constexpr Millis kIdleCheck{10000};
constexpr Millis kFirstRetry{50};
constexpr Millis kLongestRetry{1000};

}  // namespace

PgListener::PgListener(BackendConfig config, std::shared_ptr<const PgStatements> statements,
                       std::shared_ptr<Metrics> metrics)
    : config_(std::move(config)), statements_(std::move(statements)), metrics_(std::move(metrics)) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
}

PgListener::~PgListener() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (wake_[1] >= 0) {
    const char byte = 0;
    [[maybe_unused]] const auto ignored = ::write(wake_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

std::unique_ptr<ReleaseWatch> PgListener::watch(const std::string& id) {
  auto watch = signals_.watch(id);
  std::unique_lock lock(mutex_);
  if (!started_ && wake_[0] >= 0) {
    started_ = true;
    thread_ = std::thread([this] { run(); });
    // The first waiter waits for the LISTEN, until the first attempt has failed at most;
    // later ones take what there is.
    changed_.wait_for(lock, config_.connect_timeout + config_.command_timeout,
                      [&] { return listening_ || stopping_ || failed_once_; });
  }
  return watch;
}

void PgListener::set_listening(bool listening) {
  {
    std::lock_guard lock(mutex_);
    listening_ = listening;
  }
  changed_.notify_all();
}

bool PgListener::pause_unless_stopped(Millis pause) {
  std::unique_lock lock(mutex_);
  return !changed_.wait_for(lock, pause, [&] { return stopping_; });
}

void PgListener::run() {
  Millis retry = kFirstRetry;
  bool heard_before = false;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    std::string error;
    const auto now = Clock::now();
    auto conn = PgConnection::open(config_, *statements_, later(now, config_.connect_timeout), error);
    if (conn) {
      PgResult listen = conn->run_text(statements_->listen(), later(now, config_.command_timeout));
      if (listen.status == PgResult::Status::kOk) {
        set_listening(true);
        // Releases made while nobody listened went unheard: every waiter tries again.
        if (heard_before) {
          for (const std::string& id : signals_.channels()) signals_.notify(id);
        }
        heard_before = true;
        retry = kFirstRetry;
        serve(*conn);
        set_listening(false);
        bump(metrics_->subscriber_reconnects);
        continue;
      }
      error = listen.error;
    }
    // Once per outage at warning level; the retries that follow at debug level.
    log(retry == kFirstRetry ? LogLevel::kWarn : LogLevel::kDebug,
        "backend {}: cannot listen for releases ({}); waiters poll meanwhile", config_.name,
        error);
    {
      std::lock_guard lock(mutex_);
      failed_once_ = true;
    }
    changed_.notify_all();
    if (!pause_unless_stopped(retry)) return;
    retry = std::min(retry * 2, kLongestRetry);
  }
}

// "<service> <key digest>" announces a release of that key to all its waiters; with
// " <owner>" after it (owners have a ':', digests are hex), a turn of that owner alone
// (a change of the key's queue, pg_queue_sql.hpp).
void PgListener::announce(const std::string& payload) {
  const auto last = payload.rfind(' ');
  if (last != std::string::npos && payload.find(':', last) != std::string::npos) {
    signals_.notify(payload.substr(0, last), "turn " + payload.substr(last + 1));
    return;
  }
  signals_.notify(payload);
}

void PgListener::serve(PgConnection& conn) {
  std::string payload;
  // Notifications that came with the LISTEN's own answer are already read.
  while (conn.next_notification(payload)) announce(payload);
  for (;;) {
    pollfd fds[2] = {{conn.socket(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(kIdleCheck.count()));
    if (ready < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;  // stopping
    if (ready == 0) {
      // Nothing for a while: make sure the connection is still there.
      if (conn.run_text("SELECT 1", later(Clock::now(), config_.command_timeout)).status !=
          PgResult::Status::kOk) {
        return;
      }
    } else if (fds[0].revents != 0 && !conn.consume_input()) {
      return;
    }
    while (conn.next_notification(payload)) announce(payload);
    if (conn.broken()) return;
  }
}

}  // namespace dlock::internal
