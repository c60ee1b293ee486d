#include "redis/sentinel_backend.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "log.hpp"
#include "redis/master_backend.hpp"
#include "redis/reply.hpp"
#include "redis/subscriber.hpp"

namespace dlock::internal {
namespace {

constexpr std::string_view kSwitchMaster = "+switch-master";

class SentinelLocator final : public MasterLocator {
 public:
  explicit SentinelLocator(const BackendConfig& config)
      : config_(config), sentinel_config_(config) {
    sentinel_config_.username = config.sentinel_username;
    sentinel_config_.password = config.sentinel_password;
    sentinel_config_.database = 0;
  }

  ~SentinelLocator() override {
    stopping_ = true;
    if (monitor_feed_) monitor_feed_->notify(std::string(kSwitchMaster));
    if (monitor_.joinable()) monitor_.join();
  }

  Master current(Clock::time_point deadline) override {
    start_monitor();
    {
      std::lock_guard lock(state_mutex_);
      if (pool_) return {pool_, generation_, {}};
    }
    return relocate(generation(), deadline);
  }

  std::shared_ptr<ConnectionPool> known() override {
    std::lock_guard lock(state_mutex_);
    return pool_;
  }

  Master relocate(std::uint64_t seen, Clock::time_point deadline) override {
    const std::uint64_t lookups_before = lookups_.load();
    std::lock_guard resolving(resolve_mutex_);
    {
      std::lock_guard lock(state_mutex_);
      // Somebody else looked while we waited our turn: take their answer rather than queue
      // one more lookup (each may cost a connect timeout per sentinel).
      if ((generation_ != seen && pool_) || lookups_.load() != lookups_before) {
        return {pool_, generation_, pool_ && generation_ != seen ? std::string() : last_error_};
      }
    }
    std::string error;
    const auto found = resolve(deadline, error);
    ++lookups_;
    Listener listener;
    Master out;
    {
      std::lock_guard lock(state_mutex_);
      if (found && (!pool_ || !(pool_->endpoint() == *found))) {
        if (pool_) {
          log(LogLevel::kInfo, "sentinel: master '{}' of backend '{}' moved from {} to {}",
              config_.master_name, config_.name, to_string(pool_->endpoint()), to_string(*found));
        }
        // A fresh pool: connections to the old master go with the old one.
        pool_ = std::make_shared<ConnectionPool>(*found, config_, sharing_for(config_));
        ++generation_;
        listener = listener_;
      }
      last_error_ = found ? std::string() : error;
      out = {pool_, generation_, last_error_};
    }
    if (listener) listener(*found);
    return out;
  }

  void set_listener(Listener listener) override {
    std::lock_guard lock(state_mutex_);
    listener_ = std::move(listener);
  }

 private:
  std::uint64_t generation() {
    std::lock_guard lock(state_mutex_);
    return generation_;
  }

  // Asks the sentinels, starting with the one that answered last, for the master's address
  // and confirms with ROLE that the server there is a master.
  std::optional<Endpoint> resolve(Clock::time_point deadline, std::string& error) {
    const std::size_t count = config_.endpoints.size();
    std::vector<std::string> problems;
    for (std::size_t k = 0; k < count; ++k) {
      if (k > 0 && Clock::now() >= deadline) break;
      const std::size_t i = (preferred_ + k) % count;
      const Endpoint& sentinel = config_.endpoints[i];
      std::string problem;
      auto conn = Connection::open(sentinel, sentinel_config_, problem, ServerKind::kSentinel);
      if (!conn) {
        problems.push_back(problem);
        continue;
      }
      Reply reply = conn->command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", config_.master_name});
      const ReplyView address(reply);
      if (!answered(reply) || address.size() < 2) {
        problems.push_back(fmt::format(
            "sentinel {} does not know master '{}'{}", to_string(sentinel), config_.master_name,
            reply.ok() ? (reply.is_error() ? ": " + std::string(reply.text()) : "")
                       : ": " + reply.error()));
        continue;
      }
      Endpoint master{std::string(address[0].text()),
                      std::atoi(std::string(address[1].text()).c_str())};
      if (!is_master(master, problem)) {
        problems.push_back(fmt::format("sentinel {} named {}, but {}", to_string(sentinel),
                                       to_string(master), problem));
        continue;
      }
      preferred_ = i;
      warn_if_too_few_replicas(*conn);
      return master;
    }
    error = problems.empty() ? "no sentinel could be asked in time" : problems.front();
    for (std::size_t p = 1; p < problems.size(); ++p) error += "; " + problems[p];
    return std::nullopt;
  }

  // With wait_replicas above the number of replicas the sentinels know, no acquisition can
  // ever be confirmed. Said once per replica count (under resolve_mutex_).
  void warn_if_too_few_replicas(Connection& sentinel) {
    if (config_.wait_replicas == 0) return;
    const Reply replicas = sentinel.command({"SENTINEL", "REPLICAS", config_.master_name});
    const ReplyView list(replicas);
    if (!answered(replicas) || !list.is_array()) return;
    const auto known = static_cast<long long>(list.size());
    if (known >= config_.wait_replicas || known == warned_replicas_) return;
    warned_replicas_ = known;
    log(LogLevel::kWarn,
        "sentinel: backend '{}' has wait_replicas {} but master '{}' has {} replicas: no "
        "acquisition can be confirmed until more replicas exist",
        config_.name, config_.wait_replicas, config_.master_name, known);
  }

  bool is_master(const Endpoint& endpoint, std::string& problem) {
    auto conn = Connection::open(endpoint, config_, problem);
    if (!conn) return false;
    Reply role = conn->command({"ROLE"});
    if (!answered(role)) {
      problem = describe(role);
      return false;
    }
    const std::string_view kind = ReplyView(role)[0].text();
    if (kind != "master") {
      problem = fmt::format("its role is {}", kind);
      return false;
    }
    return true;
  }

  // Follows +switch-master on the sentinels. A lost subscription also wakes the watch
  // (a switch may have been missed meanwhile), which costs one more lookup.
  void start_monitor() {
    std::call_once(monitor_once_, [this] {
      // "+switch-master <master-name> <old-ip> <old-port> <new-ip> <new-port>": only our
      // master's switches call for a lookup.
      const std::string ours = config_.master_name + " ";
      monitor_feed_ = std::make_unique<ReleaseFeed>(
          std::vector<std::vector<Endpoint>>{config_.endpoints}, sentinel_config_,
          std::make_shared<Metrics>(), ServerKind::kSentinel,
          [ours](std::string_view, std::string_view payload) {
            return payload.substr(0, ours.size()) == ours;
          });
      monitor_ = std::thread([this] {
        auto watch = monitor_feed_->watch(std::string(kSwitchMaster));
        while (!stopping_) {
          if (watch->wait_until(Clock::now() + std::chrono::seconds(1)) ==
                  ReleaseWatch::Wake::kTimeout ||
              stopping_) {
            continue;
          }
          log(LogLevel::kDebug, "sentinel: {} or a lost sentinel link; looking up master '{}'",
              kSwitchMaster, config_.master_name);
          relocate(generation(), Clock::now() + config_.connect_timeout + config_.command_timeout);
        }
      });
    });
  }

  const BackendConfig config_;
  BackendConfig sentinel_config_;  // the sentinels' own credentials, no database

  std::mutex resolve_mutex_;  // one lookup at a time
  std::size_t preferred_ = 0;  // under resolve_mutex_
  long long warned_replicas_ = -1;  // under resolve_mutex_

  std::atomic<std::uint64_t> lookups_{0};

  std::mutex state_mutex_;
  std::shared_ptr<ConnectionPool> pool_;
  std::uint64_t generation_ = 0;
  std::string last_error_;  // of the last lookup that found no master
  Listener listener_;

  std::once_flag monitor_once_;
  std::unique_ptr<ReleaseFeed> monitor_feed_;
  std::atomic<bool> stopping_{false};
  std::thread monitor_;
};

}  // namespace

Engine make_sentinel_backend(const BackendConfig& config, const std::string& service,
                             std::shared_ptr<Metrics> metrics) {
  return make_master_backend(config, service, std::move(metrics),
                             std::make_unique<SentinelLocator>(config));
}

}  // namespace dlock::internal
