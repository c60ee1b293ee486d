// A zookeeper backend's `hosts`, `session_timeout` and `root`, and the check of the session
// timeout against command_timeout.
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

// The characters ZooKeeper refuses in a path (PathUtils.validatePath).
bool refused_in_znode(std::uint32_t point) {
  return point <= 0x1F || (point >= 0x7F && point <= 0x9F) ||
         (point >= 0xD800 && point <= 0xF8FF) || (point >= 0xFFF0 && point <= 0xFFFF);
}

// Why `path` cannot be a zookeeper backend's root, if it cannot.
std::optional<std::string> root_problem(std::string_view path) {
  if (auto problem = character_problem(path, refused_in_znode,
                                       "a character ZooKeeper refuses in a znode path")) {
    return problem;
  }
  const std::string shown = printable(path);
  if (path.size() > kMaxRootLength) {
    return fmt::format("'{}' is longer than {} bytes", shown, kMaxRootLength);
  }
  if (path.empty()) {
    return std::string("must not be empty; write an absolute znode path like /dlock");
  }
  if (path.front() != '/') {
    return fmt::format("'{}' is not an absolute znode path: it must start with '/' (/{})", shown,
                       shown);
  }
  const std::size_t end = path.find_last_not_of('/');
  if (end == std::string_view::npos) {
    return fmt::format(
        "'{}' is the top of ZooKeeper's tree; give dlock a path of its own like /dlock", shown);
  }
  if (end + 1 < path.size()) {
    return fmt::format("'{}' ends in '/'; write {}", shown, printable(path.substr(0, end + 1)));
  }
  for (std::size_t start = 1; start <= path.size();) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view component = path.substr(start, slash - start);
    if (component.empty()) return fmt::format("'{}' has an empty component ('//')", shown);
    if (component == "." || component == "..") {
      return fmt::format("'{}' has a '{}' component; ZooKeeper takes no relative paths", shown,
                         component);
    }
    if (start == 1 && component == "zookeeper") {
      return fmt::format(
          "'{}' is under /zookeeper, which ZooKeeper reserves for itself; use another root, "
          "like /dlock",
          shown);
    }
    start = slash + 1;
  }
  return std::nullopt;
}

}  // namespace

std::vector<Endpoint> Loader::zookeeper_hosts(const Entry& item) const {
  // The connection string of ZooKeeper's own clients: "a:2181,b:2181/chroot".
  check_server_list(
      item, "a list of servers like [host:port, ...]", "server", [](std::string_view servers) {
        std::string chroot;
        if (const std::size_t slash = servers.find('/'); slash != std::string_view::npos) {
          chroot = fmt::format(", and the chroot in 'root' (root: {})",
                               printable(servers.substr(slash)));
          servers = servers.substr(0, slash);
        }
        return fmt::format("write the servers as a YAML list (hosts: [{}]){}", comma_list(servers),
                           chroot);
      });
  std::vector<Endpoint> hosts;
  std::map<std::string, YAML::Mark> seen;
  std::size_t index = 0;
  for (auto it = item.value.begin(); it != item.value.end(); ++it, ++index) {
    const YAML::Node node = *it;
    const Entry element = list_item(item, node, index);
    const Endpoint host = zookeeper_host(element);
    check_listed_once(seen, host, element, "server");
    hosts.push_back(host);
  }
  return hosts;
}

Endpoint Loader::zookeeper_host(const Entry& element) const {
  const YAML::Mark mark = element.value_mark();
  const std::string text = expand(scalar(element, "a server like host:port"), mark, element.path);
  if (text.empty()) fail(mark, element.path, "the address is empty");
  if (text.find(',') != std::string::npos) {
    fail(mark, element.path,
         fmt::format("'{}' holds several servers; give each its own entry of the list",
                     redact_address(text)));
  }
  if (const std::size_t scheme = text.find("://"); scheme != std::string::npos) {
    fail(mark, element.path,
         fmt::format("bad address '{}': a ZooKeeper server is host:port, with no scheme",
                     redact_address(text)));
  }
  if (const std::size_t slash = text.find('/'); slash != std::string::npos) {
    fail(mark, element.path,
         fmt::format("'{}' after the server is a chroot, which hosts do not take; set root: {} "
                     "instead (the znodes live under <root>/<service>/)",
                     printable(text.substr(slash)), printable(text.substr(slash))));
  }
  const auto host = parse_server(text, kZookeeperPort);
  if (!host) {
    fail(mark, element.path,
         fmt::format("bad address '{}': {}", redact_address(text),
                     server_problem(text, kZookeeperPort)));
  }
  return *host;
}

Millis Loader::session_timeout(const Entry& item) const {
  const Millis value = duration(item, true);
  if (value < kMinSessionTimeout || value > kMaxSessionTimeout) {
    fail(item.value_mark(), item.path,
         fmt::format("must be between {} and {}, got {} ({})", format_millis(kMinSessionTimeout),
                     format_millis(kMaxSessionTimeout), printable(item.value.Scalar()),
                     value < kMinSessionTimeout
                         ? "a shorter session expires on any pause of the client or the network"
                         : "a holder that stopped talking to the ensemble would keep its locks "
                           "that long"));
  }
  return value;
}

std::string Loader::znode_root(const Entry& item) const {
  const std::string path = scalar(item, "an absolute znode path like /dlock");
  if (const auto problem = root_problem(path)) fail(item.value_mark(), item.path, *problem);
  return path;
}

void Loader::check_session_timeout(const std::vector<Entry>& items,
                                   const BackendConfig& backend) const {
  if (backend.session_timeout > 2 * backend.command_timeout) return;
  const Entry* session = find_entry(items, "session_timeout");
  const Entry* command = find_entry(items, "command_timeout");
  const auto shown = [](const Entry* entry, Millis value) {
    return entry != nullptr ? printable(entry->value.Scalar())
                            : fmt::format("{} (the default)", format_millis(value));
  };
  // One of them is given: the defaults (10s, 1s) agree.
  const Entry& at = session != nullptr ? *session : *command;
  fail(at.value_mark(), at.path,
       fmt::format("session_timeout {} is not greater than twice command_timeout {}: a renewal "
                   "must be able to time out and be retried before the session expires; raise "
                   "session_timeout above {} or lower command_timeout",
                   shown(session, backend.session_timeout), shown(command, backend.command_timeout),
                   format_millis(2 * backend.command_timeout)));
}

}  // namespace dlock::internal::loading
