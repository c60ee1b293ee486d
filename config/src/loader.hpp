// The YAML loader, in seven files: load.cpp (the document, scalar values and lock settings),
// load_backends.cpp (the `backends:` section), load_tls.cpp (the `tls:` block of a Redis or
// etcd backend), load_postgres.cpp (a postgres backend's `dsn` and `table`), load_zookeeper.cpp
// (a zookeeper backend's `hosts`, `session_timeout` and `root`), load_etcd.cpp (an etcd
// backend's `endpoints` and `root`) and messages.cpp (the text of its messages). Only these
// files know yaml-cpp.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/common/duration.hpp"
#include "dlock/config.hpp"
#include "values.hpp"

namespace dlock::internal::loading {

using Keys = std::span<const std::string_view>;
using KeyList = std::vector<std::string_view>;

inline constexpr std::string_view kDefaultBackend = "default";
inline constexpr std::string_view kTopologyList =
    "single, sentinel, cluster, redlock, memory, postgres, zookeeper, etcd";
using common::kDurationUnits;
inline constexpr std::size_t kMaxServiceLength = 128;
inline constexpr int kMaxPoolSize = 1024;
inline constexpr int kMaxSpinUs = static_cast<int>(kMaxSpin.count());
inline constexpr double kMaxClockDriftFactor = 0.5;

inline constexpr std::string_view kTopLevelKeys[] = {"service", "backends", "defaults", "policies",
                                                     "locks"};
inline constexpr std::string_view kLockKeys[] = {"lease",    "wait",    "on_busy", "min_hold",
                                                 "max_hold", "backend", "fair",    "permits"};
inline constexpr std::string_view kOnBusyValues[] = {"throw", "skip"};
// The keys of every backend that connects to a server.
inline constexpr std::string_view kConnectionKeys[] = {"connect_timeout", "command_timeout",
                                                       "poll_interval", "pool_size"};
// The keys of every Redis backend besides kConnectionKeys; a postgres backend has all this in
// its dsn, as it has the servers that kRedisServerKeys name.
inline constexpr std::string_view kRedisKeys[] = {"username", "password", "database", "tls"};
inline constexpr std::string_view kRedisServerKeys[] = {"address", "sentinels", "nodes",
                                                        "instances"};
inline constexpr std::string_view kTlsKeys[] = {"ca_file", "cert_file", "key_file", "server_name",
                                                "verify"};
// spin_us: the topologies whose calls share connections (RUNTIME.md, "Connections").
inline constexpr std::string_view kSingleKeys[] = {"address", "spin_us"};
inline constexpr std::string_view kSingleRequired[] = {"address"};
inline constexpr std::string_view kSentinelKeys[] = {"master_name",       "sentinels",
                                                     "wait_replicas",     "spin_us",
                                                     "sentinel_username", "sentinel_password"};
inline constexpr std::string_view kSentinelRequired[] = {"master_name", "sentinels"};
inline constexpr std::string_view kClusterKeys[] = {"nodes", "spin_us"};
inline constexpr std::string_view kClusterRequired[] = {"nodes"};
inline constexpr std::string_view kRedlockKeys[] = {"instances", "clock_drift_factor"};
inline constexpr std::string_view kRedlockRequired[] = {"instances"};
inline constexpr std::string_view kPostgresKeys[] = {"dsn", "table"};
inline constexpr std::string_view kPostgresRequired[] = {"dsn"};
inline constexpr std::string_view kZookeeperKeys[] = {"hosts", "session_timeout", "root"};
inline constexpr std::string_view kZookeeperRequired[] = {"hosts"};
inline constexpr std::string_view kEtcdKeys[] = {"endpoints", "root", "tls"};
inline constexpr std::string_view kEtcdRequired[] = {"endpoints"};

// PostgreSQL names are at most 63 bytes; dlock adds `_runs` and `_audit` to the table's.
inline constexpr std::size_t kMaxIdentifierLength = 63;
inline constexpr std::size_t kMaxTableLength = kMaxIdentifierLength - 6;

// ZooKeeper: the client port, the session timeouts accepted, the longest `root`.
inline constexpr int kZookeeperPort = 2181;
inline constexpr Millis kMinSessionTimeout{1000};
inline constexpr Millis kMaxSessionTimeout{600000};
inline constexpr std::size_t kMaxRootLength = 512;

// etcd: the client port, the longest `root` (a key prefix).
inline constexpr int kEtcdPort = 2379;
inline constexpr std::size_t kMaxEtcdRootLength = 4096;

// What a backend talks to, which decides the keys it takes besides its own.
enum class Server { kRedis, kPostgres, kZookeeper, kEtcd, kNone };

struct TopologySpec {
  Topology topology;
  std::string_view name;
  Keys own_keys;  // besides `topology`, kConnectionKeys (all but pool_size for ZooKeeper
                  // and etcd) and, for Redis, kRedisKeys
  Keys required;
  Server server;
};

inline constexpr TopologySpec kTopologies[] = {
    {Topology::kSingle, "single", kSingleKeys, kSingleRequired, Server::kRedis},
    {Topology::kSentinel, "sentinel", kSentinelKeys, kSentinelRequired, Server::kRedis},
    {Topology::kCluster, "cluster", kClusterKeys, kClusterRequired, Server::kRedis},
    {Topology::kRedlock, "redlock", kRedlockKeys, kRedlockRequired, Server::kRedis},
    {Topology::kMemory, "memory", {}, {}, Server::kNone},
    {Topology::kPostgres, "postgres", kPostgresKeys, kPostgresRequired, Server::kPostgres},
    {Topology::kZookeeper, "zookeeper", kZookeeperKeys, kZookeeperRequired, Server::kZookeeper},
    {Topology::kEtcd, "etcd", kEtcdKeys, kEtcdRequired, Server::kEtcd},
};

// Text for messages (messages.cpp).
bool contains(Keys keys, std::string_view key);
// A key of some backend, of any topology.
bool is_backend_key(std::string_view key);
std::string join(Keys keys);
// `word` after "a" or "an": "a single", "an etcd".
std::string with_article(std::string_view word);
std::string did_you_mean(std::string_view word, Keys candidates);
std::string printable(std::string_view text);
std::string redact_address(std::string_view text);
std::string endpoint_text(const Endpoint& endpoint);
std::string canonical_endpoint(const Endpoint& endpoint);
std::string address_problem(std::string_view text);
std::string server_problem(std::string_view text, int default_port);
std::string_view address_form(std::string_view text, bool tls);
// The scheme that turns TLS on for a backend talking to `server`: rediss:// or https://.
std::string_view tls_scheme(Server server);
// What that scheme is written on, for messages: "rediss:// addresses", "https:// endpoints".
std::string_view tls_addresses(Server server);
// "a:1, b:2" for the text "a:1,b:2", each part redacted: a list written as one string.
std::string comma_list(std::string_view text);
// Why `text` is not valid UTF-8, or "'<text>' holds U+XXXX, <what>" for the first code point
// that `refused` refuses; nullopt when neither.
std::optional<std::string> character_problem(std::string_view text,
                                             bool (*refused)(std::uint32_t point),
                                             std::string_view what);
std::string syntax_hint(const std::string& text, int line);
std::string kind_of(const YAML::Node& node);
bool is_variable_name(std::string_view name);
bool is_service_char(char c);
std::string join_path(std::string_view parent, std::string_view key);
bool before(const YAML::Mark& a, const YAML::Mark& b);

// One `key: value` pair of a YAML map, with what messages need to point at it.
struct Entry {
  std::string key;
  YAML::Mark key_mark;
  YAML::Node value;
  std::string path;

  // A missing value (`lease:`) has no useful mark of its own, so point at its key.
  [[nodiscard]] YAML::Mark value_mark() const {
    if (value.IsNull() || value.Mark().is_null()) return key_mark;
    return value.Mark();
  }
};

const Entry* find_entry(const std::vector<Entry>& entries, std::string_view key);
// Item `index` of the list `list`, as an entry named `<list path>[<index>]` that points at
// the item (or at the list's key, for an empty item).
Entry list_item(const Entry& list, const YAML::Node& node, std::size_t index);

// The endpoints of a list of addresses, and whether they are rediss:// (https:// for etcd).
struct AddressList {
  std::vector<Endpoint> endpoints;
  bool tls = false;
};

// One entry of an etcd backend's `endpoints`, and how it was written: "http://", "https://"
// or "host:port" (plain http).
struct EtcdEndpoint {
  Endpoint endpoint;
  bool tls = false;
  std::string_view form;
};

// The entries of a lock-settings block that checks across its keys look at.
struct OverrideEntries {
  const Entry* lease = nullptr;
  const Entry* min_hold = nullptr;
  const Entry* max_hold = nullptr;
};

class Loader {
 public:
  // `base_dir`: what relative file paths in the file are relative to; empty leaves them as
  // written (relative to the current directory).
  Loader(std::string source, std::string base_dir)
      : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  [[noreturn]] void fail(const YAML::Mark& mark, std::string_view path,
                         std::string_view message) const;
  // The same error kept for load() to report with the others, without stopping.
  void report(const YAML::Mark& mark, std::string_view path, std::string_view message) const;

  // A setting that works but is probably not what was meant, logged where it was written
  // once the file has loaded.
  void warn(const YAML::Mark& mark, std::string_view path, std::string_view message) const;

  // Refuses a stream of several documents. yaml-cpp 0.7 can also get stuck on a stray ','
  // outside brackets and report empty documents at that spot forever (jbeder/yaml-cpp#1040):
  // YAML::LoadAll then fills memory and YAML::Load passes the garbage off as an empty file.
  void check_single_document(const std::string& text) const;

  /// The configuration in `root`. Independent mistakes (different keys, backends, policies)
  /// are all reported in one ConfigError, a line each in document order; a mistake that
  /// would make later checks of the same block meaningless ends that block only.
  [[nodiscard]] Config load(const YAML::Node& root) const;

 private:
  // The pairs of a map in document order; a null node is an empty map. A key given twice
  // is refused here because yaml-cpp keeps both and a lookup would silently take the first.
  std::vector<Entry> entries(const YAML::Node& node, const YAML::Mark& mark,
                             const std::string& path, std::string_view what) const;

  [[noreturn]] void unknown_key(const Entry& item, Keys allowed, std::string_view hint = {}) const;

  std::string scalar(const Entry& item, std::string_view expected) const;

  // `${NAME}` from the environment; `$${` is a literal `${`. Messages never quote the text,
  // which may be a password.
  std::string expand(std::string_view text, const YAML::Mark& mark, const std::string& path) const;

  // expand(), with the text around the references passed through `literal` and each value
  // through `value`; nullopt when `literal` refuses a piece.
  template <typename Literal, typename Value = std::identity>
  std::optional<std::string> expand_around(std::string_view text, const YAML::Mark& mark,
                                           const std::string& path, Literal literal,
                                           Value value = {}) const {
    std::string out;
    std::string pending;
    const auto flush = [&] {
      std::optional<std::string> value = literal(pending);
      pending.clear();
      if (value) out += *value;
      return value.has_value();
    };
    for (std::size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "$${") == 0) {
        pending += "${";
        i += 3;
        continue;
      }
      if (text.compare(i, 2, "${") != 0) {
        pending.push_back(text[i++]);
        continue;
      }
      if (!flush()) return std::nullopt;
      const std::size_t close = text.find('}', i + 2);
      const std::string_view name =
          close == std::string_view::npos ? std::string_view() : text.substr(i + 2, close - i - 2);
      if (!is_variable_name(name)) {
        fail(mark, path,
             "'${' must start a reference like ${NAME} (letters, digits and '_'); "
             "write '$${' for a literal '${'");
      }
      const char* set = std::getenv(std::string(name).c_str());
      if (set == nullptr) {
        fail(mark, path, fmt::format("environment variable '{}' is not set", name));
      }
      out += value(std::string_view(set));
      i = close + 1;
    }
    if (!flush()) return std::nullopt;
    return out;
  }

  std::string expanded(const Entry& item, std::string_view expected) const;

  std::string non_empty(const Entry& item, std::string_view expected) const;

  Millis duration(const Entry& item, bool allow_zero) const;

  static std::string duration_problem(std::string_view text);

  int integer(const Entry& item, int minimum, int maximum) const;

  double clock_drift_factor(const Entry& item) const;

  std::string service(const Entry& item) const;

  // A URL is split into its parts before `${NAME}` is expanded in each, so that a value from
  // the environment is taken as it is: never percent-decoded, and a '/' or '@' in it cannot
  // change the split. Without "://" in the file (`${REDIS_URL}`, `${HOST}:6379`) the
  // expanded text is parsed as a whole.
  ParsedAddress address(const Entry& item, std::string_view expected, const YAML::Mark& mark) const;

  // sentinels, nodes, instances: plain addresses that must all differ, all rediss:// or none.
  AddressList endpoint_list(const Entry& item, std::string_view noun,
                            std::string_view credentials_keys) const;

  std::map<std::string, BackendConfig> backends(const Entry& section) const;

  BackendConfig backend(const Entry& entry) const;

  // The topology named by the `topology:` entry.
  const TopologySpec& topology(const Entry& topology_entry) const;

  // Refuses every key that does not belong in a backend of `spec`'s topology (each one
  // reported, see keep_going()).
  void check_backend_keys(const std::vector<Entry>& items, const TopologySpec& spec) const;
  [[noreturn]] void refuse_backend_key(const Entry& item, const TopologySpec& spec,
                                       const KeyList& allowed) const;

  // Reads one backend setting (any but `topology` and `address`) into `backend`.
  void backend_value(const Entry& item, const TopologySpec& spec, BackendConfig& backend) const;

  // A postgres backend's `dsn` (load_postgres.cpp): `${NAME}` expanded, read by libpq as it
  // will be at connection time, with the hosts checked fit for locks.
  std::string dsn(const Entry& item) const;

  // The dsn's text with `${NAME}` expanded. In the user info of a URL each value is
  // percent-encoded, as libpq decodes it: a value from the environment is taken as it is, and
  // a '/' or '@' in a password cannot move the host.
  std::string expanded_dsn(const Entry& item) const;

  // `name` or `schema.name`, in the lower case SQL reads unquoted names in.
  std::string table(const Entry& item) const;

  // A zookeeper backend's `hosts`: a list of host:port (port 2181 when omitted), all
  // different, without a chroot.
  std::vector<Endpoint> zookeeper_hosts(const Entry& item) const;

  // One entry of `hosts`.
  Endpoint zookeeper_host(const Entry& element) const;

  // A zookeeper backend's `session_timeout`, within kMinSessionTimeout..kMaxSessionTimeout.
  Millis session_timeout(const Entry& item) const;

  // A zookeeper backend's `root`: an absolute znode path dlock may create.
  std::string znode_root(const Entry& item) const;

  // A renewal must be able to fail and be retried within the session.
  void check_session_timeout(const std::vector<Entry>& items, const BackendConfig& backend) const;

  // Refuses anything but a non-empty YAML list of servers: `expected` says what the list
  // holds, `noun` names one entry. One comma-separated string (how the servers' own tools
  // take them) is refused with the advice `as_list` gives for its text, `${NAME}` expanded.
  void check_server_list(const Entry& item, std::string_view expected, std::string_view noun,
                         const std::function<std::string(std::string_view)>& as_list) const;

  // Refuses `endpoint` when `seen` already holds it (keyed by canonical_endpoint), else adds
  // it: the same server twice in one list.
  void check_listed_once(std::map<std::string, YAML::Mark>& seen, const Endpoint& endpoint,
                         const Entry& element, std::string_view noun) const;

  // An etcd backend's `endpoints` (load_etcd.cpp): a list of http://host:port,
  // https://host:port or host:port (port 2379 when omitted), all different, all https:// or
  // none.
  AddressList etcd_endpoints(const Entry& item) const;

  // One entry of `endpoints`.
  EtcdEndpoint etcd_endpoint(const Entry& element) const;

  // An etcd backend's `root`: the prefix of every key it writes.
  std::string etcd_root(const Entry& item) const;

  // The backend's connect_timeout bounds a connection, not one given in the dsn.
  void warn_dsn_timeout(const std::vector<Entry>& items, const BackendConfig& backend) const;

  // The `tls:` block of a backend talking to `server` into `tls`, all but `enabled` (which
  // the scheme of the addresses decides, see tls_scheme()).
  void tls_settings(const Entry& item, Server server, TlsConfig& tls) const;

  // A file a `tls:` key names, relative to base_dir_, that must exist and be readable.
  std::string tls_file(const Entry& item) const;

  // true or false.
  bool boolean(const Entry& item) const;

  // A `tls:` block needs rediss:// addresses (https:// endpoints for etcd).
  void check_tls(const std::vector<Entry>& items, const TopologySpec& spec,
                 const BackendConfig& backend) const;

  // What the address URL carries: user name, password, database.
  void merge_url(const ParsedAddress& url, const Entry& address_entry,
                 const std::vector<Entry>& items, BackendConfig& backend) const;

  // Redis authenticates only with a password; a user name alone would silently run as
  // the 'default' user, with whatever rights that one has.
  void check_credentials(const std::vector<Entry>& items, const Entry* address_entry,
                         const BackendConfig& backend) const;

  // An even number of Redlock instances tolerates no more failures than one fewer would.
  void warn_even_instances(const std::vector<Entry>& items, const BackendConfig& backend) const;

  void need_password(const Entry* user_entry, const std::string& username,
                     const std::string& password, std::string_view password_key) const;

  // A value the address URL carries fills its field, unless the field's own key is there too.
  template <typename Fill>
  void merge_from_url(const Entry& address_entry, const std::vector<Entry>& items,
                      std::string_view key, bool in_url, Fill fill) const;

  // `fallback_backend`: the backend these settings use unless they name one.
  LockOverrides overrides(const Entry& section,
                          const std::map<std::string, BackendConfig>& backends,
                          std::string_view fallback_backend) const;

  // `on_busy`: throw or skip.
  OnBusy on_busy(const Entry& item) const;

  // A lease no longer than the backend's command_timeout: a late grant would be refused.
  void warn_short_lease(const Entry& lease_entry, Millis lease, const std::string& backend_name,
                        const std::map<std::string, BackendConfig>& backends) const;

  std::string backend_reference(const Entry& item,
                                const std::map<std::string, BackendConfig>& backends) const;

  // One key of a lock-settings block into `out`.
  void override_value(const Entry& item, const std::map<std::string, BackendConfig>& backends,
                      LockOverrides& out, OverrideEntries& given) const;

  // "FILE:LINE:COL: error: PATH: MESSAGE".
  [[nodiscard]] std::string error_text(const YAML::Mark& mark, std::string_view path,
                                       std::string_view message) const;

  // Every error kept by keep_going() and report(), a line each (the first 20).
  [[nodiscard]] std::string all_errors() const;

  std::map<std::string, LockOverrides> named_overrides(
      const Entry& section, std::string_view noun,
      const std::map<std::string, BackendConfig>& backends,
      std::string_view fallback_backend) const;

  // Runs `check`; a ConfigError it raises is kept for load() to report with the others, and
  // loading goes on. Returns whether it passed.
  template <typename Check>
  bool keep_going(Check&& check) const {
    try {
      check();
      return true;
    } catch (const ConfigError& error) {
      errors_.push_back(KeptError{failed_at_, error.what()});
      return false;
    }
  }

  struct KeptError {
    int pos;  // offset in the file of what it points at; -1: no position
    std::string text;
  };

  std::string source_;
  std::string base_dir_;
  mutable std::vector<KeptError> errors_;      // see keep_going()
  mutable int failed_at_ = -1;                 // the position of the last fail()
  mutable bool backends_unknown_ = false;      // `backends` refused as a whole
  mutable std::vector<std::string> warnings_;  // see warn()
};

// The configuration in `yaml_text`, for parse_config and load_config; `base_dir` as for
// Loader.
[[nodiscard]] Config parse(const std::string& yaml_text, const std::string& source_name,
                           const std::string& base_dir);

}  // namespace dlock::internal::loading
