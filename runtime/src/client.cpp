#include <cstdlib>
#include <mutex>

#include "client_core.hpp"
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

const Config& Client::config() const { return core_->config(); }

MetricsSnapshot Client::metrics() const { return core_->metrics().snapshot(); }

namespace {

std::mutex g_client_mutex;
std::unique_ptr<Client> g_client;

Config config_from_environment() {
  const char* path = std::getenv("DLOCK_CONFIG");
  if (path != nullptr && *path != '\0') return load_config(path);
  return Config::builtin();
}

}  // namespace

void init(const std::string& path) { init(load_config(path)); }

void init() { init(config_from_environment()); }

void init(Config config) {
  auto fresh = std::make_unique<Client>(std::move(config));
  std::lock_guard lock(g_client_mutex);
  g_client = std::move(fresh);
}

Client& client() {
  std::lock_guard lock(g_client_mutex);
  if (!g_client) g_client = std::make_unique<Client>(config_from_environment());
  return *g_client;
}

void shutdown() {
  std::unique_ptr<Client> old;
  std::lock_guard lock(g_client_mutex);
  old = std::move(g_client);
}

LeaseView current_lease() {
  return internal::current_lease_view();
}

}  // namespace dlock
