// An etcd backend's `endpoints` and `root`.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "loader.hpp"

namespace dlock::internal::loading {
namespace {

// C0 controls, DEL and C1 controls: a key holding one cannot be typed or shown as it is.
bool is_control(std::uint32_t point) { return point <= 0x1F || (point >= 0x7F && point <= 0x9F); }

// Why `path` cannot be an etcd backend's root, if it cannot.
std::optional<std::string> etcd_root_problem(std::string_view path) {
  if (auto problem = character_problem(path, is_control, "a control character")) return problem;
  const std::string shown = printable(path);
  if (path.size() > kMaxEtcdRootLength) {
    return fmt::format("'{}' is longer than {} bytes", shown, kMaxEtcdRootLength);
  }
  if (path.empty()) return std::string("must not be empty; write a key prefix like /dlock");
  if (path.front() != '/') {
    return fmt::format("'{}' must start with '/' (/{})", shown, shown);
  }
  const std::size_t end = path.find_last_not_of('/');
  if (end == std::string_view::npos) {
    return fmt::format(
        "'{}' leaves dlock no prefix of its own: every key of the cluster starts with it; "
        "write one like /dlock",
        shown);
  }
  if (end + 1 < path.size()) {
    return fmt::format("'{}' ends in '/'; write {} (the keys of a service start with "
                       "<root>/<service>/)",
                       shown, printable(path.substr(0, end + 1)));
  }
  return std::nullopt;
}

std::string lower_case(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
  return out;
}

}  // namespace

AddressList Loader::etcd_endpoints(const Entry& item) const {
  // etcdctl's --endpoints and ETCDCTL_ENDPOINTS: "http://a:2379,http://b:2379".
  check_server_list(item, "a list of endpoints like [http://host:port, ...]", "endpoint",
                    [](std::string_view text) {
                      return fmt::format("write the endpoints as a YAML list (endpoints: [{}])",
                                         comma_list(text));
                    });
  AddressList list;
  EtcdEndpoint first;  // https:// or not, every entry must be like the first
  YAML::Mark first_mark;
  std::map<std::string, YAML::Mark> seen;
  std::size_t index = 0;
  for (auto it = item.value.begin(); it != item.value.end(); ++it, ++index) {
    const Entry element = list_item(item, *it, index);
    const EtcdEndpoint member = etcd_endpoint(element);
    if (index == 0) {
      first = member;
      first_mark = element.value_mark();
    } else if (member.tls != first.tls) {
      fail(element.value_mark(), element.path,
           fmt::format("mixes {} (here) and {} (at {}:{}) entries; write every entry as "
                       "https:// for TLS, or none",
                       member.form, first.form, first_mark.line + 1, first_mark.column + 1));
    }
    check_listed_once(seen, member.endpoint, element, "endpoint");
    list.endpoints.push_back(member.endpoint);
  }
  list.tls = first.tls;
  return list;
}

EtcdEndpoint Loader::etcd_endpoint(const Entry& element) const {
  const YAML::Mark mark = element.value_mark();
  const std::string text =
      expand(scalar(element, "an endpoint like http://host:port"), mark, element.path);
  if (text.empty()) fail(mark, element.path, "the endpoint is empty");
  const std::string shown = redact_address(text);
  if (text.find(',') != std::string::npos) {
    fail(mark, element.path,
         fmt::format("'{}' holds several endpoints; give each its own entry of the list", shown));
  }
  EtcdEndpoint member{{}, false, "host:port"};
  std::string_view rest = text;
  if (const std::size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    const std::string name = lower_case(rest.substr(0, scheme));
    if (name != "http" && name != "https") {
      fail(mark, element.path,
           fmt::format("bad endpoint '{}': unknown scheme '{}://'; use http:// or https://",
                       shown, printable(name)));
    }
    member.tls = name == "https";
    member.form = member.tls ? "https://" : "http://";
    rest = rest.substr(scheme + 3);
  }
  if (rest.find('@') != std::string_view::npos) {
    fail(mark, element.path,
         fmt::format("bad endpoint '{}': credentials are not allowed in an endpoint; etcd "
                     "authentication is not supported by dlock yet, use client certificates "
                     "over https:// instead (tls: cert_file, key_file)",
                     shown));
  }
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view member_text =
        std::string_view(text).substr(0, text.size() - rest.size() + slash);
    fail(mark, element.path,
         fmt::format("'{}' after the member is a path, which an endpoint does not take; write "
                     "{} (the keys go under 'root')",
                     printable(rest.substr(slash)), printable(member_text)));
  }
  const auto endpoint = parse_server(rest, kEtcdPort);
  if (!endpoint) {
    fail(mark, element.path,
         fmt::format("bad endpoint '{}': {}", shown, server_problem(rest, kEtcdPort)));
  }
  member.endpoint = *endpoint;
  return member;
}

std::string Loader::etcd_root(const Entry& item) const {
  const std::string path = scalar(item, "a key prefix like /dlock");
  if (const auto problem = etcd_root_problem(path)) fail(item.value_mark(), item.path, *problem);
  return path;
}

}  // namespace dlock::internal::loading
