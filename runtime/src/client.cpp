#include <cstdlib>
#include <pthread.h>

#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "client_core.hpp"
#include "settler.hpp"
#include "dlock/dlock.hpp"

namespace dlock {

Client::Client(Config config) : core_(std::make_shared<internal::ClientCore>(std::move(config))) {}

Lease Client::acquire(const Key& key, const LockSettings& settings, std::string_view name) {
  return core_->acquire(key, settings, name);
}

Lease Client::try_acquire(const Key& key, LockSettings settings, std::string_view name) {
  settings.wait = Millis{0};
  return core_->acquire(key, settings, name);
}

Lease Client::acquire(const std::vector<Key>& keys, const LockSettings& settings,
                      std::string_view name) {
  return core_->acquire(keys, settings, name);
}

Lease Client::try_acquire(const std::vector<Key>& keys, LockSettings settings,
                          std::string_view name) {
  settings.wait = Millis{0};
  return core_->acquire(keys, settings, name);
}

const Config& Client::config() const { return core_->config(); }

MetricsSnapshot Client::metrics() const { return core_->metrics().snapshot(); }

namespace {

std::mutex g_client_mutex;
std::optional<Client> g_client;
std::optional<Config> g_inherited_config;  // a forked child's: its parent's configuration

// A forked child has none of the parent's threads (watchdog, subscriber), so the inherited
// process-wide client cannot work there. The child leaves it behind, never destroyed
// (destroying it would join threads that do not exist, and close sockets the parent still
// uses), and its next dlock::client() builds a fresh one.
void lock_before_fork() { g_client_mutex.lock(); }
void unlock_in_parent() { g_client_mutex.unlock(); }
void reset_in_child() {
  if (g_client) {
    static auto* abandoned = new std::vector<Client>;
    g_inherited_config = g_client->config();
    abandoned->push_back(std::move(*g_client));
    g_client.reset();
  }
  g_client_mutex.unlock();
}
[[maybe_unused]] const int g_fork_handlers =
    ::pthread_atfork(lock_before_fork, unlock_in_parent, reset_in_child);

Config config_from_environment() {
  const char* path = std::getenv("DLOCK_CONFIG");
  if (path != nullptr && *path != '\0') return load_config(path);
  return Config::builtin();
}

}  // namespace

void init(const std::string& path) { init(load_config(path)); }

void init() { init(config_from_environment()); }

void init(Config config) {
  Client fresh(std::move(config));
  std::optional<Client> old;  // dropped after the lock is released
  std::lock_guard lock(g_client_mutex);
  g_inherited_config.reset();
  old = std::exchange(g_client, std::move(fresh));
}

Client client() {
  std::lock_guard lock(g_client_mutex);
  if (!g_client) {
    if (g_inherited_config) {
      g_client.emplace(std::move(*g_inherited_config));
      g_inherited_config.reset();
    } else {
      g_client.emplace(config_from_environment());
    }
  }
  return *g_client;
}

void shutdown() {
  {
    std::optional<Client> old;
    std::lock_guard lock(g_client_mutex);
    g_inherited_config.reset();
    old = std::exchange(g_client, std::nullopt);
  }
  // Releases sent without waiting (a lease's destructor) are answered or given up first.
  (void)internal::settler::flush();
}

LeaseView current_lease() {
  return internal::current_lease_view();
}

}  // namespace dlock
