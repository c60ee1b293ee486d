// The `backends:` section: each backend's topology, address, servers and credentials (the
// own keys of a zookeeper backend are in load_zookeeper.cpp, those of an etcd backend in
// load_etcd.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/common/text.hpp"
#include "loader.hpp"

namespace dlock::internal::loading {

namespace {

// Why `key`, which a backend of another kind of server takes, does not apply to a zookeeper
// or etcd backend; empty when the generic message says enough.
std::string_view consensus_refusal(Server server, std::string_view key) {
  const bool zookeeper = server == Server::kZookeeper;
  if (key == "pool_size") {
    return zookeeper ? "it holds one ZooKeeper session, not a pool of connections"
                     : "its calls share one gRPC connection per member, not a pool of "
                       "connections";
  }
  if (contains(kRedisServerKeys, key) || key == (zookeeper ? "endpoints" : "hosts")) {
    return zookeeper ? "the ensemble's servers go in 'hosts'"
                     : "the cluster's members go in 'endpoints'";
  }
  if (key == "database") {
    return zookeeper ? "ZooKeeper has no databases; give the backend a 'root' of its own instead"
                     : "etcd has no databases; give the backend a 'root' of its own instead";
  }
  if (zookeeper && contains(kRedisKeys, key)) {
    return "it takes no credentials or TLS settings; the servers go in 'hosts'";
  }
  if (!zookeeper && (key == "username" || key == "password")) {
    return "etcd authentication is not supported by dlock yet; use client certificates over "
           "https:// instead (tls: cert_file, key_file)";
  }
  return {};
}

// Where a Redis backend of `spec` wants its servers, when `key` names another topology's:
// "; a redlock backend's servers go in 'instances'", or empty.
std::string servers_hint(const TopologySpec& spec, std::string_view key) {
  const bool a_server_list = contains(kRedisServerKeys, key) || contains(kEtcdRequired, key) ||
                             contains(kZookeeperRequired, key) || contains(kPostgresRequired, key);
  if (spec.server != Server::kRedis || !a_server_list) return {};
  for (const std::string_view own : spec.required) {
    if (contains(kRedisServerKeys, own)) {
      return fmt::format("; {} backend's {} in '{}'", with_article(spec.name),
                         own == "address" ? "server goes" : "servers go", own);
    }
  }
  return {};
}

// "zookeeper", "zookeeper and etcd" or "single, sentinel and cluster": the topologies whose own
// key `key` is.
std::string owners_of(std::string_view key) {
  std::vector<std::string_view> names;
  for (const TopologySpec& spec : kTopologies) {
    if (contains(spec.own_keys, key)) names.push_back(spec.name);
  }
  std::string owners;
  for (std::size_t i = 0; i < names.size(); ++i) {
    owners += i == 0 ? "" : i + 1 == names.size() ? " and " : ", ";
    owners += names[i];
  }
  return owners;
}

}  // namespace

Entry list_item(const Entry& list, const YAML::Node& node, std::size_t index) {
  Entry element{list.key, list.value_mark(), node, fmt::format("{}[{}]", list.path, index)};
  if (!node.IsNull() && !node.Mark().is_null()) element.key_mark = node.Mark();
  return element;
}

void Loader::check_listed_once(std::map<std::string, YAML::Mark>& seen, const Endpoint& endpoint,
                               const Entry& element, std::string_view noun) const {
  const YAML::Mark mark = element.value_mark();
  const auto [first, inserted] = seen.emplace(canonical_endpoint(endpoint), mark);
  if (!inserted) {
    fail(mark, element.path,
         fmt::format("{} {} is listed twice (first at {}:{})", noun, endpoint_text(endpoint),
                     first->second.line + 1, first->second.column + 1));
  }
}

ParsedAddress Loader::address(const Entry& item, std::string_view expected,
                              const YAML::Mark& mark) const {
  const std::string& path = item.path;
  const std::string raw = scalar(item, expected);
  const std::string text = expand(raw, mark, path);
  if (text.empty()) fail(mark, path, "the address is empty");
  auto parsed = raw.find("://") == std::string::npos
                    ? parse_address(text)
                    : parse_address_parts(raw, [&](std::string_view part, bool user_info) {
                        return expand_around(part, mark, path, [&](std::string_view literal) {
                          return user_info ? common::percent_decode(literal)
                                           : std::optional<std::string>(literal);
                        });
                      });
  if (!parsed) {
    fail(mark, path,
         fmt::format("bad address '{}': {}", redact_address(text), address_problem(text)));
  }
  return *parsed;
}

AddressList Loader::endpoint_list(const Entry& item, std::string_view noun,
                                  std::string_view credentials_keys) const {
  if (item.value.IsNull()) {
    fail(item.key_mark, item.path, "missing value; expected a list of addresses");
  }
  if (!item.value.IsSequence()) {
    fail(item.value_mark(), item.path,
         fmt::format("expected a list of addresses like [host:port, ...], got {}",
                     kind_of(item.value)));
  }
  if (item.value.size() == 0) {
    fail(item.value_mark(), item.path, "the list is empty; give at least one address");
  }
  AddressList list;
  std::string_view first_form;  // TLS or not, every entry must be like the first
  YAML::Mark first_mark;
  std::map<std::string, YAML::Mark> seen;
  std::size_t index = 0;
  for (auto it = item.value.begin(); it != item.value.end(); ++it, ++index) {
    const YAML::Node node = *it;
    const Entry element = list_item(item, node, index);
    const YAML::Mark mark = element.value_mark();
    const ParsedAddress parsed = address(element, "an address like host:port", mark);
    const std::string_view form = address_form(node.Scalar(), parsed.tls);
    if (index == 0) {
      list.tls = parsed.tls;
      first_form = form;
      first_mark = mark;
    } else if (parsed.tls != list.tls) {
      fail(mark, element.path,
           fmt::format("mixes {} (here) and {} (at {}:{}) entries; write every entry as "
                       "rediss:// for TLS, or none",
                       form, first_form, first_mark.line + 1, first_mark.column + 1));
    }
    if (!parsed.username.empty() || !parsed.password.empty()) {
      fail(mark, element.path,
           fmt::format("credentials are not allowed in a list entry; set {} on the backend",
                       credentials_keys));
    }
    if (parsed.database) {
      fail(mark, element.path,
           "a database is not allowed in a list entry; set 'database' on the backend");
    }
    check_listed_once(seen, parsed.endpoint, element, noun);
    list.endpoints.push_back(parsed.endpoint);
  }
  return list;
}

void Loader::check_server_list(const Entry& item, std::string_view expected, std::string_view noun,
                               const std::function<std::string(std::string_view)>& as_list) const {
  if (item.value.IsNull()) {
    fail(item.key_mark, item.path, fmt::format("missing value; expected {}", expected));
  }
  if (const std::string text =
          item.value.IsScalar() ? expand(item.value.Scalar(), item.value_mark(), item.path) : "";
      text.find(',') != std::string::npos) {
    fail(item.value_mark(), item.path,
         fmt::format("expected a list, got one comma-separated string; {}", as_list(text)));
  }
  if (!item.value.IsSequence()) {
    fail(item.value_mark(), item.path,
         fmt::format("expected {}, got {}", expected, kind_of(item.value)));
  }
  if (item.value.size() == 0) {
    fail(item.value_mark(), item.path,
         fmt::format("the list is empty; give at least one {}", noun));
  }
}

std::map<std::string, BackendConfig> Loader::backends(const Entry& section) const {
  std::map<std::string, BackendConfig> out;
  for (const Entry& item :
       entries(section.value, section.value_mark(), section.path, "backends by name")) {
    if (item.key.empty()) {
      report(item.key_mark, section.path, "a backend name must not be empty");
      continue;
    }
    // A refused backend is still known by name, so that references to it raise no errors
    // of their own.
    BackendConfig loaded;
    loaded.name = item.key;
    keep_going([&] { loaded = backend(item); });
    out.emplace(item.key, std::move(loaded));
  }
  return out;
}

BackendConfig Loader::backend(const Entry& entry) const {
  const std::string missing_topology =
      fmt::format("missing required key 'topology' (one of: {})", kTopologyList);
  if (entry.value.IsNull()) fail(entry.key_mark, entry.path, missing_topology);
  const std::vector<Entry> items =
      entries(entry.value, entry.value_mark(), entry.path, "backend settings");
  const Entry* topology_entry = find_entry(items, "topology");
  if (topology_entry == nullptr) fail(entry.value_mark(), entry.path, missing_topology);
  const TopologySpec& spec = topology(*topology_entry);
  // Every key is checked before any value, so a typo is reported before what it causes.
  const std::size_t errors_before = errors_.size();
  check_backend_keys(items, spec);

  BackendConfig backend;
  backend.name = entry.key;
  backend.topology = spec.topology;
  if (errors_.size() != errors_before) return backend;
  for (std::string_view key : spec.required) {  // by the keys alone: reported beside the values
    if (find_entry(items, key) == nullptr) {
      report(entry.value_mark(), entry.path,
             fmt::format("missing required key '{}' for {} backend", key, with_article(spec.name)));
    }
  }
  std::optional<ParsedAddress> url;
  const Entry* address_entry = nullptr;
  for (const Entry& item : items) {
    keep_going([&] {
      if (item.key == "address") {
        address_entry = &item;
        url = address(item, "an address", item.value_mark());
        backend.endpoints = {url->endpoint};
        backend.tls.enabled = url->tls;
      } else {
        backend_value(item, spec, backend);
      }
    });
  }
  // Checks across keys would misread a value that was refused.
  if (errors_.size() != errors_before) return backend;
  if (url) merge_url(*url, *address_entry, items, backend);
  check_credentials(items, address_entry, backend);
  check_tls(items, spec, backend);
  warn_even_instances(items, backend);
  warn_dsn_timeout(items, backend);
  if (spec.topology == Topology::kZookeeper) check_session_timeout(items, backend);
  return backend;
}

const TopologySpec& Loader::topology(const Entry& topology_entry) const {
  const std::string topology_name = scalar(topology_entry, "a topology");
  const TopologySpec* spec = nullptr;
  KeyList topology_names;
  for (const TopologySpec& candidate : kTopologies) {
    topology_names.push_back(candidate.name);
    if (candidate.name == topology_name) spec = &candidate;
  }
  if (spec == nullptr) {
    std::string typo = did_you_mean(topology_name, topology_names);
    fail(topology_entry.value_mark(), topology_entry.path,
         fmt::format("unknown topology '{}'{}{}", printable(topology_name), typo,
                     typo.empty() ? fmt::format(" (expected one of: {})", kTopologyList) : ""));
  }
  return *spec;
}

void Loader::check_backend_keys(const std::vector<Entry>& items, const TopologySpec& spec) const {
  KeyList allowed = {"topology"};
  allowed.insert(allowed.end(), spec.own_keys.begin(), spec.own_keys.end());
  if (spec.server != Server::kNone) {
    allowed.insert(allowed.end(), std::begin(kConnectionKeys), std::end(kConnectionKeys));
  }
  if (spec.server == Server::kZookeeper || spec.server == Server::kEtcd) {
    std::erase(allowed, "pool_size");
  }
  if (spec.server == Server::kRedis) {
    allowed.insert(allowed.end(), std::begin(kRedisKeys), std::end(kRedisKeys));
  }
  for (const Entry& item : items) {
    if (!contains(allowed, item.key)) keep_going([&] { refuse_backend_key(item, spec, allowed); });
  }
}

[[noreturn]] void Loader::refuse_backend_key(const Entry& item, const TopologySpec& spec,
                                             const KeyList& allowed) const {
  if (spec.server == Server::kNone && is_backend_key(item.key)) {
    fail(item.key_mark, item.path,
         "does not apply to a memory backend: it lives in this process and connects to "
         "no server");
  }
  if (spec.server == Server::kPostgres &&
      (contains(kRedisKeys, item.key) || contains(kRedisServerKeys, item.key))) {
    fail(item.key_mark, item.path,
         "does not apply to a postgres backend: hosts, credentials, database and TLS go in "
         "'dsn'");
  }
  if (spec.server == Server::kZookeeper || spec.server == Server::kEtcd) {
    if (const std::string_view why = consensus_refusal(spec.server, item.key); !why.empty()) {
      fail(item.key_mark, item.path,
           fmt::format("does not apply to {} backend: {}", with_article(spec.name), why));
    }
  }
  if (const std::string owners = owners_of(item.key); !owners.empty()) {
    fail(item.key_mark, item.path,
         fmt::format("does not apply to {} backend (it is {} setting){}", with_article(spec.name),
                     with_article(owners), servers_hint(spec, item.key)));
  }
  unknown_key(item, allowed,
              contains(kLockKeys, item.key)
                  ? " (lock settings go under 'defaults', 'policies' or 'locks')"
                  : "");
}

void Loader::backend_value(const Entry& item, const TopologySpec& spec,
                           BackendConfig& backend) const {
  const std::string_view key = item.key;
  const auto read_list = [&](std::string_view noun, std::string_view credentials_keys) {
    AddressList list = endpoint_list(item, noun, credentials_keys);
    backend.endpoints = std::move(list.endpoints);
    backend.tls.enabled = list.tls;
  };
  if (key == "sentinels") {
    read_list("sentinel", "sentinel_username and sentinel_password");
  } else if (key == "nodes") {
    read_list("node", "username and password");
  } else if (key == "instances") {
    read_list("instance", "username and password");
  } else if (key == "dsn") {
    backend.dsn = dsn(item);
  } else if (key == "table") {
    backend.table = table(item);
  } else if (key == "hosts") {
    backend.endpoints = zookeeper_hosts(item);
  } else if (key == "session_timeout") {
    backend.session_timeout = session_timeout(item);
  } else if (key == "endpoints") {
    AddressList list = etcd_endpoints(item);
    backend.endpoints = std::move(list.endpoints);
    backend.tls.enabled = list.tls;
  } else if (key == "root") {
    backend.root = spec.topology == Topology::kEtcd ? etcd_root(item) : znode_root(item);
  } else if (key == "tls") {
    tls_settings(item, spec.server, backend.tls);
  } else if (key == "master_name") {
    backend.master_name = non_empty(item, "a master name");
  } else if (key == "wait_replicas") {
    backend.wait_replicas = integer(item, 0, std::numeric_limits<int>::max());
  } else if (key == "clock_drift_factor") {
    backend.clock_drift_factor = clock_drift_factor(item);
  } else if (key == "username" || key == "sentinel_username") {
    (key == "username" ? backend.username : backend.sentinel_username) =
        expanded(item, "a user name");
  } else if (key == "password" || key == "sentinel_password") {
    (key == "password" ? backend.password : backend.sentinel_password) =
        expanded(item, "a password");
  } else if (key == "database") {
    backend.database = integer(item, 0, std::numeric_limits<int>::max());
    if (spec.topology == Topology::kCluster && backend.database != 0) {
      fail(item.value_mark(), item.path, "Redis Cluster has only database 0");
    }
  } else if (key == "connect_timeout") {
    backend.connect_timeout = duration(item, false);
  } else if (key == "command_timeout") {
    backend.command_timeout = duration(item, false);
  } else if (key == "poll_interval") {
    backend.poll_interval = duration(item, false);
  } else if (key == "pool_size") {
    backend.pool_size = integer(item, 1, kMaxPoolSize);
  } else if (key == "spin_us") {
    backend.spin = std::chrono::microseconds(integer(item, 0, kMaxSpinUs));
  }
}

void Loader::merge_url(const ParsedAddress& url, const Entry& address_entry,
                       const std::vector<Entry>& items, BackendConfig& backend) const {
  merge_from_url(address_entry, items, "username", !url.username.empty(),
                 [&] { backend.username = url.username; });
  merge_from_url(address_entry, items, "password", !url.password.empty(),
                 [&] { backend.password = url.password; });
  merge_from_url(address_entry, items, "database", url.database.has_value(),
                 [&] { backend.database = *url.database; });
}

void Loader::check_credentials(const std::vector<Entry>& items, const Entry* address_entry,
                               const BackendConfig& backend) const {
  const Entry* user_entry = find_entry(items, "username");
  if (user_entry == nullptr) user_entry = address_entry;
  need_password(user_entry, backend.username, backend.password, "password");
  need_password(find_entry(items, "sentinel_username"), backend.sentinel_username,
                backend.sentinel_password, "sentinel_password");
}

void Loader::warn_even_instances(const std::vector<Entry>& items,
                                 const BackendConfig& backend) const {
  if (const Entry* instances = find_entry(items, "instances");
      instances != nullptr && backend.endpoints.size() % 2 == 0) {
    const std::size_t n = backend.endpoints.size();
    warn(instances->value_mark(), instances->path,
         fmt::format("{} instances need a quorum of {} and tolerate {} failed, no more than {} "
                     "would; use an odd number",
                     n, n / 2 + 1, (n - 1) / 2, n - 1));
  }
}

void Loader::need_password(const Entry* user_entry, const std::string& username,
                           const std::string& password, std::string_view password_key) const {
  if (username.empty() || !password.empty()) return;
  fail(user_entry->key == "address" ? user_entry->value_mark() : user_entry->key_mark,
       user_entry->path,
       fmt::format("a user name without a password would connect as the 'default' user; set "
                   "'{}' too",
                   password_key));
}

template <typename Fill>
void Loader::merge_from_url(const Entry& address_entry, const std::vector<Entry>& items,
                            std::string_view key, bool in_url, Fill fill) const {
  if (!in_url) return;
  const Entry* explicit_entry = find_entry(items, key);
  if (explicit_entry == nullptr) {
    fill();
    return;
  }
  const Entry& second =
      before(explicit_entry->key_mark, address_entry.key_mark) ? address_entry : *explicit_entry;
  fail(second.value_mark(), second.path,
       fmt::format("{} given twice, in 'address' and in '{}'; keep one", key, key));
}

// A lease that a grant could outlast on its way back is refused at run time: said at once.
void Loader::warn_short_lease(const Entry& lease_entry, Millis lease,
                              const std::string& backend_name,
                              const std::map<std::string, BackendConfig>& backends) const {
  const auto backend = backends.find(backend_name);
  if (backend != backends.end() && backend->second.topology != Topology::kMemory &&
      lease <= backend->second.command_timeout) {
    warn(lease_entry.value_mark(), lease_entry.path,
         fmt::format("{} is not longer than the command_timeout ({}) of backend '{}': a grant "
                     "that arrives after its lease has run out is refused",
                     format_millis(lease), format_millis(backend->second.command_timeout),
                     backend->first));
  }
}

}  // namespace dlock::internal::loading
