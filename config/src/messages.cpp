// The text of the loader's messages: suggestions, values echoed safely, addresses with their
// secrets hidden, hints for YAML syntax errors, paths to a key.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/common/suggest.hpp"
#include "dlock/common/text.hpp"
#include "loader.hpp"

namespace dlock::internal::loading {

bool contains(Keys keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

bool is_backend_key(std::string_view key) {
  if (key == "topology" || contains(kConnectionKeys, key) || contains(kRedisKeys, key)) {
    return true;
  }
  return std::any_of(std::begin(kTopologies), std::end(kTopologies),
                     [&](const TopologySpec& spec) { return contains(spec.own_keys, key); });
}

std::string join(Keys keys) {
  std::string out;
  for (std::string_view key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

std::string with_article(std::string_view word) {
  const bool vowel =
      !word.empty() && std::string_view("aeiou").find(word.front()) != std::string_view::npos;
  return fmt::format("{} {}", vowel ? "an" : "a", word);
}

// "; did you mean 'lease'?" when one candidate is close enough to be a typo, else "".
std::string did_you_mean(std::string_view word, Keys candidates) {
  const auto best = common::closest_match(word, candidates);
  return best ? fmt::format("; did you mean '{}'?", *best) : "";
}

// Control bytes escaped and long text cut, without splitting a UTF-8 sequence.
std::string printable(std::string_view text) {
  return common::printable(text, common::kMessageText);
}

// An address fit for a message. Everything before the last '@' but the user name is treated
// as a secret; `redis://secret@host` hides all of its user info because redis-cli reads a
// lone user-info part as a password.
std::string redact_address(std::string_view text) {
  const std::size_t scheme = text.find("://");
  const std::size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  const std::size_t at = text.rfind('@');
  if (at == std::string_view::npos || at < start) return printable(text);
  const std::string_view user_info = text.substr(start, at - start);
  const std::size_t colon = user_info.find(':');
  const std::string hidden =
      colon == std::string_view::npos ? "***" : fmt::format("{}:***", user_info.substr(0, colon));
  return printable(fmt::format("{}{}{}", text.substr(0, start), hidden, text.substr(at)));
}

std::string endpoint_text(const Endpoint& endpoint) {
  return common::endpoint_text(endpoint.host, endpoint.port);
}

// The same server written two ways (`::1` and `0::1`, `Redis1` and `redis1`) compares equal.
std::string canonical_endpoint(const Endpoint& endpoint) {
  std::array<unsigned char, 16> bytes{};
  std::array<char, INET6_ADDRSTRLEN> buffer{};
  const std::string host = endpoint.host.substr(0, endpoint.host.find('%'));
  if (::inet_pton(AF_INET6, host.c_str(), bytes.data()) == 1 &&
      ::inet_ntop(AF_INET6, bytes.data(), buffer.data(), buffer.size()) != nullptr) {
    return fmt::format("[{}{}]:{}", buffer.data(), endpoint.host.substr(host.size()),
                       endpoint.port);
  }
  std::string lower = endpoint.host;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return fmt::format("{}:{}", lower, endpoint.port);
}

namespace {

// What is wrong with the `host[:port]` part of an address, if its fault is there.
std::optional<std::string> host_port_problem(std::string_view rest) {
  if (rest.empty() || rest.front() == ':') return "missing host";
  std::string_view port;
  bool has_port = false;
  if (rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return "missing ']' after the IPv6 address";
    if (close + 1 < rest.size() && rest[close + 1] == ':') {
      port = rest.substr(close + 2);
      has_port = true;
    }
  } else {
    const std::size_t colon = rest.find(':');
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      has_port = true;
    }
  }
  if (has_port) {
    if (port.empty()) return "missing port after ':'";
    if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return "the port must be a number";
    }
    return "the port must be between 1 and 65535";
  }
  return std::nullopt;
}

}  // namespace

// Why parse_address refused `text`: a best guess that turns into the message's hint.
std::string address_problem(std::string_view text) {
  constexpr std::string_view kForms =
      "expected redis://[user[:password]@]host[:port][/db] (rediss:// for TLS), host:port or "
      "[ipv6]:port";
  std::string_view rest = text;
  std::string_view database;
  if (const std::size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    std::string name(text.substr(0, scheme));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
    if (name != "redis" && name != "rediss") {
      return fmt::format("unknown scheme '{}://'; use redis:// or rediss://", printable(name));
    }
    rest = text.substr(scheme + 3);
    if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
      database = rest.substr(slash + 1);
      rest = rest.substr(0, slash);
    }
    if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
      rest = rest.substr(at + 1);
    }
  } else if (text.find('@') != std::string_view::npos || text.find('/') != std::string_view::npos) {
    return "credentials and a database need the URL form "
           "redis://[user[:password]@]host[:port][/db]";
  }
  if (database.find('@') != std::string_view::npos) {
    return "write a '/' in a user name or password as %2F";
  }
  if (!database.empty() &&
      !std::all_of(database.begin(), database.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return "the database after '/' must be a whole number 0 or more";
  }
  if (!rest.empty() && rest.front() != '[' && std::count(rest.begin(), rest.end(), ':') > 1) {
    return "put an IPv6 address in brackets, e.g. \"[::1]:6379\"";
  }
  if (const auto problem = host_port_problem(rest)) return *problem;
  return std::string(kForms);
}

// Why parse_server refused `text`, a ZooKeeper server or an etcd member (host, host:port,
// [ipv6]:port), in the words address_problem uses.
std::string server_problem(std::string_view text, int default_port) {
  if (!text.empty() && text.front() != '[' && std::count(text.begin(), text.end(), ':') > 1) {
    return fmt::format("put an IPv6 address in brackets, e.g. \"[::1]:{}\"", default_port);
  }
  if (text.empty() || text.front() == ':') return "missing host";
  // host_port_problem blames the port for any fault after a ':'; when the port is a good one,
  // the fault is in the host.
  const bool bracketed = !text.empty() && text.front() == '[';
  const std::size_t close = bracketed ? text.find(']') : 0;
  const std::size_t colon =
      close == std::string_view::npos ? close : text.find(':', bracketed ? close : 0);
  const std::string_view port = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int number = digits ? std::stoi(std::string(port)) : 0;
  if (number < 1 || number > 65535) {
    if (const auto problem = host_port_problem(text)) return *problem;
  }
  if (bracketed) return "expected [ipv6] or [ipv6]:port with a valid IPv6 address";
  return "expected host:port, host or [ipv6]:port; a host is a DNS name or an IPv4 address";
}

// How an address was written, for messages about mixing TLS and plain entries.
std::string_view address_form(std::string_view text, bool tls) {
  if (tls) return "rediss://";
  return text.find("://") == std::string_view::npos ? "host:port" : "redis://";
}

std::string_view tls_scheme(Server server) {
  return server == Server::kEtcd ? "https://" : "rediss://";
}

std::string_view tls_addresses(Server server) {
  return server == Server::kEtcd ? "https:// endpoints" : "rediss:// addresses";
}

std::string comma_list(std::string_view text) {
  std::string list;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (!list.empty()) list += ", ";
    list += redact_address(text.substr(start, comma - start));
    start = comma + 1;
  }
  return list;
}

// `address: [::1]:6379` is a YAML list followed by junk; the parser's complaint alone does
// not say so.
std::string syntax_hint(const std::string& text, int line) {
  std::size_t start = 0;
  for (int i = 0; i < line && start != std::string::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (start == std::string::npos || line < 0) return "";
  const std::string_view content =
      std::string_view(text).substr(start, text.find('\n', start) - start);
  const std::size_t open = content.find('[');
  if (open == std::string_view::npos || content.find("]:", open) == std::string_view::npos ||
      content.find(':', open) == content.find("]:", open) + 1) {
    return "";
  }
  return " (an IPv6 address must be quoted: \"[::1]:6379\")";
}

std::string kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      // Never the value itself: it may be a password written in the wrong place.
      return "a single value";
    default:
      return "nothing";
  }
}

bool is_variable_name(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool is_service_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '/';
}

// A key path segment that would read ambiguously is quoted: locks."orders v2".lease
std::string join_path(std::string_view parent, std::string_view key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == ':';
  });
  const std::string segment = plain ? std::string(key) : fmt::format("\"{}\"", printable(key));
  return parent.empty() ? segment : fmt::format("{}.{}", parent, segment);
}

bool before(const YAML::Mark& a, const YAML::Mark& b) {
  return a.line < b.line || (a.line == b.line && a.column < b.column);
}

const Entry* find_entry(const std::vector<Entry>& entries, std::string_view key) {
  for (const Entry& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

namespace {

// The code point of the UTF-8 sequence at `text[i]`, advancing `i` past it; nullopt for a
// malformed, overlong or surrogate sequence.
std::optional<std::uint32_t> next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t at) { return static_cast<unsigned char>(text[at]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  std::uint32_t point = 0;
  std::uint32_t smallest = 0;
  if (lead < 0x80) {
    ++i;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, point = lead & 0x1F, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, point = lead & 0x0F, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, point = lead & 0x07, smallest = 0x10000;
  } else {
    return std::nullopt;
  }
  if (i + length > text.size()) return std::nullopt;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return std::nullopt;
    point = (point << 6) | (byte(i + k) & 0x3F);
  }
  if (point < smallest || point > 0x10FFFF || (point >= 0xD800 && point <= 0xDFFF)) {
    return std::nullopt;
  }
  i += length;
  return point;
}

}  // namespace

std::optional<std::string> character_problem(std::string_view text,
                                             bool (*refused)(std::uint32_t point),
                                             std::string_view what) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t at = i;
    const auto point = next_code_point(text, i);
    if (!point) return fmt::format("is not valid UTF-8 (at byte {})", at + 1);
    if (refused(*point))
      return fmt::format("'{}' holds U+{:04X}, {}", printable(text), *point, what);
  }
  return std::nullopt;
}

}  // namespace dlock::internal::loading
