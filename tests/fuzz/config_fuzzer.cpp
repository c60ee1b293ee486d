// Fuzz target: the YAML configuration loader, dlock::parse_config().
//
// Any text must give either a Config that keeps the promises of docs/CONFIG.md or a
// dlock::ConfigError naming the file. Another exception, a crash, a hang, a leak, undefined
// behaviour or runaway memory (run with -rss_limit_mb) is a bug. Every lock name and policy
// of an accepted file is resolved as well, which must again give settings or a ConfigError.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "fuzz_check.hpp"

namespace {

constexpr std::string_view kSource = "fuzz.yaml";

bool is_service_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '/';
}

// `name` or `schema.name` in lower case, the name short enough for dlock's suffixes.
bool is_table_name(std::string_view table) {
  const std::size_t dot = table.find('.');
  const std::string_view name = dot == std::string_view::npos ? table : table.substr(dot + 1);
  const auto part = [](std::string_view text, std::size_t longest) {
    if (text.empty() || text.size() > longest || (text[0] >= '0' && text[0] <= '9')) return false;
    for (char c : text) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
  };
  return part(name, 57) && (dot == std::string_view::npos || part(table.substr(0, dot), 63));
}

// An absolute znode path ZooKeeper takes and dlock may create: no empty, '.' or '..'
// component, not under /zookeeper, at most 512 bytes, no control bytes (the loader's UTF-8
// and code point checks are not repeated here).
bool is_znode_root(std::string_view root) {
  if (root.size() < 2 || root.size() > 512 || root.front() != '/' || root.back() == '/') {
    return false;
  }
  for (char c : root) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  for (std::size_t start = 1; start <= root.size();) {
    std::size_t slash = root.find('/', start);
    if (slash == std::string_view::npos) slash = root.size();
    const std::string_view component = root.substr(start, slash - start);
    if (component.empty() || component == "." || component == "..") return false;
    if (start == 1 && component == "zookeeper") return false;
    start = slash + 1;
  }
  return true;
}

// An etcd key prefix: starts with '/', does not end in '/', at most 4096 bytes, no control
// bytes (the loader's UTF-8 and C1 checks are not repeated here).
bool is_etcd_root(std::string_view root) {
  if (root.size() < 2 || root.size() > 4096 || root.front() != '/' || root.back() == '/') {
    return false;
  }
  for (char c : root) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// No server twice in one list.
bool all_different(const std::vector<dlock::Endpoint>& endpoints) {
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (endpoints[i] == endpoints[j]) return false;
    }
  }
  return true;
}

void check_error(const dlock::ConfigError& error) {
  const std::string_view what = error.what();
  // FILE:LINE:COL: error: ..., or FILE: error: ... when there is no position.
  DLOCK_FUZZ_CHECK(what.substr(0, kSource.size()) == kSource &&
                       what.size() > kSource.size() && what[kSource.size()] == ':' &&
                       what.find(": error: ") != std::string_view::npos,
                   "malformed message: {}", what);
}

void check_overrides(const dlock::Config& config, const dlock::LockOverrides& o) {
  using dlock::Millis;
  if (o.lease) DLOCK_FUZZ_CHECK(*o.lease > Millis{0}, "lease {}", o.lease->count());
  if (o.max_hold) DLOCK_FUZZ_CHECK(*o.max_hold > Millis{0}, "max_hold {}", o.max_hold->count());
  if (o.wait) DLOCK_FUZZ_CHECK(*o.wait >= Millis{0}, "wait {}", o.wait->count());
  if (o.min_hold) DLOCK_FUZZ_CHECK(*o.min_hold >= Millis{0}, "min_hold {}", o.min_hold->count());
  if (o.min_hold && o.max_hold) {
    DLOCK_FUZZ_CHECK(*o.min_hold <= *o.max_hold, "min_hold {} > max_hold {}", o.min_hold->count(),
                     o.max_hold->count());
  }
  if (o.backend) {
    DLOCK_FUZZ_CHECK(config.backends.count(*o.backend) == 1, "unknown backend '{}'", *o.backend);
  }
}

void check_backend(const std::string& name, const dlock::BackendConfig& b) {
  using dlock::Millis;
  using dlock::Topology;
  DLOCK_FUZZ_CHECK(!name.empty() && b.name == name, "backend '{}' named '{}'", name, b.name);
  if (b.topology == Topology::kMemory) {
    DLOCK_FUZZ_CHECK(b.endpoints.empty(), "memory backend with {} endpoints", b.endpoints.size());
    return;
  }
  if (b.topology == Topology::kPostgres) {
    DLOCK_FUZZ_CHECK(b.endpoints.empty() && !b.dsn.empty(), "postgres: {} endpoints, dsn of {}",
                     b.endpoints.size(), b.dsn.size());
    DLOCK_FUZZ_CHECK(is_table_name(b.table), "postgres table '{}'", b.table);
  } else {
    DLOCK_FUZZ_CHECK(!b.endpoints.empty(), "backend '{}' without endpoints", name);
  }
  if (b.topology == Topology::kZookeeper) {
    DLOCK_FUZZ_CHECK(b.dsn.empty() && b.username.empty() && b.password.empty() && b.database == 0 &&
                         !b.tls.enabled && b.pool_size == 0,
                     "zookeeper backend '{}' with a key of another topology", name);
    DLOCK_FUZZ_CHECK(b.session_timeout >= Millis{1000} && b.session_timeout <= Millis{600000},
                     "zookeeper session_timeout {}", b.session_timeout.count());
    DLOCK_FUZZ_CHECK(b.session_timeout > 2 * b.command_timeout,
                     "zookeeper session_timeout {} not above twice command_timeout {}",
                     b.session_timeout.count(), b.command_timeout.count());
    DLOCK_FUZZ_CHECK(is_znode_root(b.root), "zookeeper root '{}'", b.root);
    DLOCK_FUZZ_CHECK(all_different(b.endpoints), "zookeeper backend '{}' lists a host twice", name);
  } else {
    // The key only a zookeeper backend takes.
    DLOCK_FUZZ_CHECK(b.session_timeout == Millis{10000}, "backend '{}' with session_timeout {}",
                     name, b.session_timeout.count());
  }
  if (b.topology == Topology::kEtcd) {
    DLOCK_FUZZ_CHECK(b.dsn.empty() && b.username.empty() && b.password.empty() && b.database == 0 &&
                         b.pool_size == 0,
                     "etcd backend '{}' with a key of another topology", name);
    DLOCK_FUZZ_CHECK(is_etcd_root(b.root), "etcd root '{}'", b.root);
    DLOCK_FUZZ_CHECK(all_different(b.endpoints), "etcd backend '{}' lists an endpoint twice", name);
  } else if (b.topology != Topology::kZookeeper) {
    // Only zookeeper and etcd backends take a root.
    DLOCK_FUZZ_CHECK(b.root == "/dlock", "backend '{}' with root '{}'", name, b.root);
  }
  if (b.topology == Topology::kSingle) DLOCK_FUZZ_CHECK(b.endpoints.size() == 1, "single: {}", b.endpoints.size());
  if (b.topology == Topology::kSentinel) DLOCK_FUZZ_CHECK(!b.master_name.empty(), "no master_name");
  if (b.topology == Topology::kCluster) DLOCK_FUZZ_CHECK(b.database == 0, "cluster database {}", b.database);
  for (const dlock::Endpoint& e : b.endpoints) {
    DLOCK_FUZZ_CHECK(!e.host.empty() && e.port >= 1 && e.port <= 65535, "endpoint '{}':{}", e.host,
                     e.port);
  }
  DLOCK_FUZZ_CHECK(b.database >= 0 && b.wait_replicas >= 0, "database {} wait_replicas {}",
                   b.database, b.wait_replicas);
  DLOCK_FUZZ_CHECK(b.clock_drift_factor >= 0 && b.clock_drift_factor < 0.5, "drift {}",
                   b.clock_drift_factor);
  DLOCK_FUZZ_CHECK(b.pool_size == 0 || (b.pool_size >= 1 && b.pool_size <= 1024), "pool_size {}",
                   b.pool_size);
  DLOCK_FUZZ_CHECK(b.spin.count() >= 0 && b.spin <= dlock::kMaxSpin, "spin_us {}", b.spin.count());
  DLOCK_FUZZ_CHECK(b.connect_timeout > Millis{0} && b.command_timeout > Millis{0} &&
                       b.poll_interval > Millis{0},
                   "timeouts {} {} {}", b.connect_timeout.count(), b.command_timeout.count(),
                   b.poll_interval.count());
}

void check_settings(const dlock::Config& config, const dlock::LockSettings& s) {
  using dlock::Millis;
  DLOCK_FUZZ_CHECK(s.lease > Millis{0} && s.wait >= Millis{0} && s.min_hold >= Millis{0},
                   "lease {} wait {} min_hold {}", s.lease.count(), s.wait.count(),
                   s.min_hold.count());
  if (s.max_hold) {
    DLOCK_FUZZ_CHECK(*s.max_hold > Millis{0} && s.min_hold <= *s.max_hold, "min {} max {}",
                     s.min_hold.count(), s.max_hold->count());
  }
  DLOCK_FUZZ_CHECK(config.backends.count(s.backend) == 1, "resolved to unknown backend '{}'",
                   s.backend);
}

void resolve(const dlock::Config& config, const std::string& guard, const std::string& policy) {
  try {
    check_settings(config, config.resolve(guard, policy, {}));
  } catch (const dlock::ConfigError& error) {
    // Only an unknown policy or a min_hold/max_hold clash across levels may be refused.
    const std::string_view what = error.what();
    DLOCK_FUZZ_CHECK(what.find("error: guard '") != std::string_view::npos, "{}", what);
  }
}

void check_config(const dlock::Config& config) {
  DLOCK_FUZZ_CHECK(config.source == kSource, "source '{}'", config.source);
  DLOCK_FUZZ_CHECK(!config.service.empty() && config.service.size() <= 128, "service length {}",
                   config.service.size());
  for (char c : config.service) DLOCK_FUZZ_CHECK(is_service_char(c), "service '{}'", config.service);
  DLOCK_FUZZ_CHECK(!config.backends.empty(), "no backends");
  DLOCK_FUZZ_CHECK(config.defaults.backend || config.backends.count("default") == 1,
                   "no default backend");
  for (const auto& [name, backend] : config.backends) {
    check_backend(name, backend);
  }
  check_overrides(config, config.defaults);
  for (const auto& [name, o] : config.policies) {
    DLOCK_FUZZ_CHECK(!name.empty(), "empty policy name");
    check_overrides(config, o);
  }
  for (const auto& [name, o] : config.locks) {
    DLOCK_FUZZ_CHECK(!name.empty(), "empty guard name");
    check_overrides(config, o);
  }

  resolve(config, "fuzz::unlisted", "");
  resolve(config, "fuzz::unlisted", "no such policy");
  std::size_t budget = 64;  // a file may list thousands of names; a sample is enough
  for (const auto& [guard, o] : config.locks) {
    if (budget-- == 0) break;
    resolve(config, guard, "");
    for (const auto& [policy, p] : config.policies) {
      if (budget-- == 0) break;
      resolve(config, guard, policy);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // For ${NAME} references (see config.dict).
  ::setenv("DLOCK_FUZZ_HOST", "127.0.0.1:6380", 1);
  ::setenv("DLOCK_FUZZ_PASSWORD", "hunter2", 1);
  ::setenv("DLOCK_FUZZ_EMPTY", "", 1);
  ::unsetenv("DLOCK_FUZZ_UNSET");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_config(dlock::parse_config(text, std::string(kSource)));
  } catch (const dlock::ConfigError& error) {
    check_error(error);
  }
  return 0;
}
