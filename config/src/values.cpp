// The two scalar grammars of the configuration file: durations and server addresses (Redis
// addresses, and the plain host:port of a ZooKeeper server).
#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "values.hpp"

#include "dlock/common/duration.hpp"
#include "dlock/common/text.hpp"

#include <fmt/format.h>

namespace dlock {
namespace internal {
namespace {

constexpr std::string_view kRedisScheme = "redis";
constexpr std::string_view kTlsScheme = "rediss";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

char to_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!is_digit(c)) return false;
  }
  return true;
}

// A non-negative decimal number no larger than `max`; no sign, no spaces.
std::optional<std::int64_t> parse_bounded(std::string_view text, std::int64_t max) {
  if (!all_digits(text)) return std::nullopt;
  std::int64_t value = 0;
  for (char c : text) {
    const int digit = c - '0';
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  const char lower = to_lower(c);
  if (lower >= 'a' && lower <= 'f') return lower - 'a' + 10;
  return -1;
}

}  // namespace

std::string format_millis(Millis value) {
  const auto ms = value.count();
  if (ms != 0 && ms % 3'600'000 == 0) return fmt::format("{}h", ms / 3'600'000);
  if (ms != 0 && ms % 60'000 == 0) return fmt::format("{}m", ms / 60'000);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{}ms", ms);
}

namespace {

bool valid_ipv6(std::string_view text) {
  // A zone id (`fe80::1%eth0`) is allowed; inet_pton does not know about it.
  const std::size_t percent = text.find('%');
  const std::string_view address = text.substr(0, percent);
  if (percent != std::string_view::npos) {
    const std::string_view zone = text.substr(percent + 1);
    if (zone.empty()) return false;
    for (char c : zone) {
      if (!is_alpha(c) && !is_digit(c) && c != '.' && c != '_' && c != '-') return false;
    }
  }
  // Checked before inet_pton, which would stop reading at an embedded NUL.
  for (char c : address) {
    if (hex_value(c) < 0 && c != ':' && c != '.') return false;
  }
  std::array<unsigned char, 16> bytes{};
  return ::inet_pton(AF_INET6, std::string(address).c_str(), bytes.data()) == 1;
}

// DNS labels of letters, digits, '-' and '_' (container names use it), not starting or
// ending with '-'.
bool valid_host_name(std::string_view host) {
  if (host.empty()) return false;
  bool only_digits_and_dots = true;
  std::size_t label_start = 0;
  for (std::size_t i = 0; i <= host.size(); ++i) {
    if (i == host.size() || host[i] == '.') {
      const std::string_view label = host.substr(label_start, i - label_start);
      if (label.empty() || label.front() == '-' || label.back() == '-') return false;
      label_start = i + 1;
      continue;
    }
    const char c = host[i];
    if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '_') return false;
    if (!is_digit(c)) only_digits_and_dots = false;
  }
  if (only_digits_and_dots) {
    // `6379` or `127.0.0.300` is a mistake, not a host name.
    std::array<unsigned char, 4> bytes{};
    return ::inet_pton(AF_INET, std::string(host).c_str(), bytes.data()) == 1;
  }
  return true;
}

std::optional<int> parse_port(std::string_view text) {
  const auto port = parse_bounded(text, 65535);
  if (!port || *port == 0) return std::nullopt;
  return static_cast<int>(*port);
}

// `host`, `host:port`, `[ipv6]` or `[ipv6]:port`; `default_port` when no port is written.
std::optional<Endpoint> parse_host_port(std::string_view text, int default_port = 6379) {
  Endpoint endpoint;
  endpoint.port = default_port;
  std::string_view port_text;
  bool has_port = false;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view host = text.substr(1, close - 1);
    if (!valid_ipv6(host)) return std::nullopt;
    endpoint.host = std::string(host);
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port_text = rest.substr(1);
      has_port = true;
    }
  } else {
    const std::size_t colon = text.find(':');
    const std::string_view host = text.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = text.substr(colon + 1);
      has_port = true;
    }
    // A second colon means an IPv6 address without brackets: ambiguous about the port.
    if (!valid_host_name(host)) return std::nullopt;
    endpoint.host = std::string(host);
  }
  if (has_port) {
    const auto port = parse_port(port_text);
    if (!port) return std::nullopt;
    endpoint.port = *port;
  }
  return endpoint;
}

}  // namespace
}  // namespace internal

std::optional<Millis> parse_duration(std::string_view text) {
  return common::read_duration(text).value;
}

namespace internal {

std::optional<Endpoint> parse_server(std::string_view text, int default_port) {
  return parse_host_port(text, default_port);
}

std::optional<ParsedAddress> parse_address_parts(std::string_view text, const AddressPart& part) {
  ParsedAddress result;
  std::string host_port(text);

  const std::size_t scheme_end = text.find("://");
  if (scheme_end != std::string_view::npos) {
    std::string scheme(text.substr(0, scheme_end));
    for (char& c : scheme) c = internal::to_lower(c);
    if (scheme != internal::kRedisScheme && scheme != internal::kTlsScheme) return std::nullopt;
    result.tls = scheme == internal::kTlsScheme;
    std::string_view rest = text.substr(scheme_end + 3);

    const std::size_t slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    if (slash != std::string_view::npos) {
      // `redis://host/` names no database, like `redis://host`.
      const auto database = part(rest.substr(slash + 1), false);
      if (!database) return std::nullopt;
      if (!database->empty()) {
        const auto number = parse_bounded(*database, std::numeric_limits<int>::max());
        if (!number) return std::nullopt;
        result.database = static_cast<int>(*number);
      }
    }

    // The last '@' ends the user info, so an unencoded '@' in a password still works.
    const std::size_t at = authority.rfind('@');
    if (at != std::string_view::npos) {
      const std::string_view user_info = authority.substr(0, at);
      const std::size_t colon = user_info.find(':');
      const auto username = part(user_info.substr(0, colon), true);
      if (!username) return std::nullopt;
      result.username = *username;
      if (colon != std::string_view::npos) {
        const auto password = part(user_info.substr(colon + 1), true);
        if (!password) return std::nullopt;
        result.password = *password;
      }
      authority = authority.substr(at + 1);
    }
    const auto expanded = part(authority, false);
    if (!expanded) return std::nullopt;
    host_port = *expanded;
  } else {
    const auto expanded = part(text, false);
    if (!expanded) return std::nullopt;
    host_port = *expanded;
  }

  auto endpoint = parse_host_port(host_port);
  if (!endpoint) return std::nullopt;
  result.endpoint = std::move(*endpoint);
  return result;
}

}  // namespace internal

std::optional<ParsedAddress> parse_address(std::string_view text) {
  return internal::parse_address_parts(
      text, [](std::string_view raw, bool user_info) -> std::optional<std::string> {
        if (user_info) return common::percent_decode(raw);
        return std::string(raw);
      });
}

}  // namespace dlock
