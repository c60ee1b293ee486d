// Reading the YAML file into a validated Config. This is the only code that knows yaml-cpp:
// every yaml-cpp node, mark and exception stops here and leaves as a ConfigError.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/config.hpp"
#include "log.hpp"
#include "values.hpp"

namespace dlock {
namespace internal {
namespace {

using Keys = std::span<const std::string_view>;
using KeyList = std::vector<std::string_view>;

constexpr std::string_view kDefaultBackend = "default";
constexpr std::string_view kTopologyList = "single, sentinel, cluster, redlock, memory";
constexpr std::string_view kDurationUnits = "ms, s, m, h";
constexpr std::size_t kMaxServiceLength = 128;
constexpr int kMaxPoolSize = 1024;
constexpr double kMaxClockDriftFactor = 0.5;
// Values echoed in messages are cut so that a stray blob does not flood the terminal.
constexpr std::size_t kMaxEchoLength = 80;
constexpr std::size_t kMaxSuggestLength = 64;

constexpr std::string_view kTopLevelKeys[] = {"service", "backends", "defaults", "policies",
                                              "locks"};
constexpr std::string_view kLockKeys[] = {"lease",    "wait",     "on_busy",
                                          "min_hold", "max_hold", "backend"};
constexpr std::string_view kOnBusyValues[] = {"throw", "skip"};
constexpr std::string_view kRedisKeys[] = {"username",        "password",        "database",
                                           "connect_timeout", "command_timeout", "poll_interval",
                                           "pool_size"};
constexpr std::string_view kSingleKeys[] = {"address"};
constexpr std::string_view kSentinelKeys[] = {"master_name", "sentinels", "wait_replicas",
                                              "sentinel_username", "sentinel_password"};
constexpr std::string_view kSentinelRequired[] = {"master_name", "sentinels"};
constexpr std::string_view kClusterKeys[] = {"nodes"};
constexpr std::string_view kRedlockKeys[] = {"instances", "clock_drift_factor"};
constexpr std::string_view kRedlockRequired[] = {"instances"};

struct TopologySpec {
  Topology topology;
  std::string_view name;
  Keys own_keys;  // besides `topology` and, for Redis topologies, kRedisKeys
  Keys required;
  bool uses_redis;
};

constexpr TopologySpec kTopologies[] = {
    {Topology::kSingle, "single", kSingleKeys, kSingleKeys, true},
    {Topology::kSentinel, "sentinel", kSentinelKeys, kSentinelRequired, true},
    {Topology::kCluster, "cluster", kClusterKeys, kClusterKeys, true},
    {Topology::kRedlock, "redlock", kRedlockKeys, kRedlockRequired, true},
    {Topology::kMemory, "memory", {}, {}, false},
};

bool contains(Keys keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string join(Keys keys) {
  std::string out;
  for (std::string_view key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

// Optimal string alignment distance: a swapped pair of letters counts as one typo.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// "; did you mean 'lease'?" when one candidate is close enough to be a typo, else "".
std::string did_you_mean(std::string_view word, Keys candidates) {
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (std::string_view candidate : candidates) {
    // The distance costs the product of the lengths; nobody mistypes a 100-letter name.
    if (word.size() > kMaxSuggestLength || candidate.size() > kMaxSuggestLength) continue;
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  const std::size_t allowed = std::clamp<std::size_t>(best.size() / 3, 1, 3);
  if (best.empty() || best_distance > allowed) return "";
  return fmt::format("; did you mean '{}'?", best);
}

// Control bytes escaped and long text cut, without splitting a UTF-8 sequence.
std::string printable(std::string_view text) {
  std::string out;
  std::size_t end = text.size();
  if (end > kMaxEchoLength) {
    end = kMaxEchoLength;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  for (std::size_t i = 0; i < end; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out.push_back(text[i]);
    }
  }
  if (end < text.size()) out += "...";
  return out;
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
  if (endpoint.host.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", endpoint.host, endpoint.port);
  }
  return fmt::format("{}:{}", endpoint.host, endpoint.port);
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

// Why parse_address refused `text`: a best guess that turns into the message's hint.
std::string address_problem(std::string_view text) {
  constexpr std::string_view kForms =
      "expected redis://[user[:password]@]host[:port][/db], host:port or [ipv6]:port";
  std::string_view rest = text;
  std::string_view database;
  if (const std::size_t scheme = text.find("://"); scheme != std::string_view::npos) {
    std::string name(text.substr(0, scheme));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; });
    if (name == "rediss") return "TLS (rediss://) is not supported; use redis://";
    if (name != "redis") {
      return fmt::format("unknown scheme '{}://'; use redis://", printable(name));
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
  return std::string(kForms);
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

const Entry* find_entry(const std::vector<Entry>& entries, std::string_view key) {
  for (const Entry& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

// Records where each document starts and ignores its content.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;

  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

class Loader {
 public:
  explicit Loader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Mark& mark, std::string_view path,
                         std::string_view message) const {
    std::string where = source_;
    if (!mark.is_null()) where += fmt::format(":{}:{}", mark.line + 1, mark.column + 1);
    if (path.empty()) throw ConfigError(fmt::format("{}: error: {}", where, message));
    throw ConfigError(fmt::format("{}: error: {}: {}", where, path, message));
  }

  // A setting that works but is probably not what was meant, logged where it was written.
  void warn(const YAML::Mark& mark, std::string_view path, std::string_view message) const {
    std::string where = source_;
    if (!mark.is_null()) where += fmt::format(":{}:{}", mark.line + 1, mark.column + 1);
    log(LogLevel::kWarn, "{}: warning: {}: {}", where, path, message);
  }

  // Refuses a stream of several documents. yaml-cpp 0.7 can also get stuck on a stray ','
  // outside brackets and report empty documents at that spot forever (jbeder/yaml-cpp#1040):
  // YAML::LoadAll then fills memory and YAML::Load passes the garbage off as an empty file.
  void check_single_document(const std::string& text) const {
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    DocumentStarts documents;
    while (documents.starts.size() < 3 && parser.HandleNextDocument(documents)) {
      const std::vector<YAML::Mark>& starts = documents.starts;
      if (starts.size() >= 2 && starts.back().pos == starts[starts.size() - 2].pos) {
        const auto at = static_cast<std::size_t>(starts.back().pos);
        fail(starts.back(), "",
             at < text.size()
                 ? fmt::format("invalid YAML: unexpected '{}'", printable(text.substr(at, 1)))
                 : std::string("invalid YAML: unexpected end of input"));
      }
    }
    if (documents.starts.size() >= 2) {
      fail(documents.starts[1], "", "found a second YAML document; a configuration file holds one");
    }
  }

  [[nodiscard]] Config load(const YAML::Node& root) const {
    Config config = Config::builtin();
    config.source = source_;
    if (root.IsNull()) return config;
    if (!root.IsMap()) {
      fail(root.Mark(), "",
           fmt::format("expected a map of settings at the top level, got {}", kind_of(root)));
    }
    const std::vector<Entry> items = entries(root, root.Mark(), "", "settings");
    for (const Entry& item : items) {
      if (!contains(kTopLevelKeys, item.key)) {
        std::string hint;
        if (contains(kLockKeys, item.key)) hint = " (lock settings go under 'defaults')";
        unknown_key(item, kTopLevelKeys, hint);
      }
    }

    if (const Entry* item = find_entry(items, "service")) config.service = service(*item);
    // An empty `backends:` reads like an absent one, as for every other section.
    const Entry* backends_entry = find_entry(items, "backends");
    if (backends_entry != nullptr && backends_entry->value.IsNull()) backends_entry = nullptr;
    if (backends_entry != nullptr) config.backends = backends(*backends_entry);
    if (const Entry* item = find_entry(items, "defaults")) {
      config.defaults = overrides(*item, config.backends, kDefaultBackend);
    }
    const std::string fallback_backend = config.defaults.backend.value_or(std::string(kDefaultBackend));
    if (backends_entry != nullptr && !config.defaults.backend &&
        config.backends.find(std::string(kDefaultBackend)) == config.backends.end()) {
      // Caught here rather than at the first guard's resolve(), long after start-up.
      fail(backends_entry->key_mark, backends_entry->path,
           "no backend named 'default'; add one or set defaults.backend");
    }
    if (const Entry* item = find_entry(items, "policies")) {
      config.policies = named_overrides(*item, "policy", config.backends, fallback_backend);
    }
    if (const Entry* item = find_entry(items, "locks")) {
      config.locks = named_overrides(*item, "guard", config.backends, fallback_backend);
    }
    return config;
  }

 private:
  // The pairs of a map in document order; a null node is an empty map. A key given twice
  // is refused here because yaml-cpp keeps both and a lookup would silently take the first.
  std::vector<Entry> entries(const YAML::Node& node, const YAML::Mark& mark,
                             const std::string& path, std::string_view what) const {
    std::vector<Entry> out;
    if (node.IsNull()) return out;
    if (!node.IsMap()) {
      fail(mark, path, fmt::format("expected a map of {}, got {}", what, kind_of(node)));
    }
    std::map<std::string, YAML::Mark> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Mark key_mark = key.Mark().is_null() ? mark : key.Mark();
      if (!key.IsScalar()) {
        fail(key_mark, path, fmt::format("expected a key name, got {}", kind_of(key)));
      }
      const std::string name = key.Scalar();
      const std::string child = join_path(path, name);
      const auto [first, inserted] = seen.emplace(name, key_mark);
      if (!inserted) {
        fail(key_mark, child,
             fmt::format("duplicate key; first given at {}:{}", first->second.line + 1,
                         first->second.column + 1));
      }
      out.push_back(Entry{name, key_mark, it->second, child});
    }
    return out;
  }

  [[noreturn]] void unknown_key(const Entry& item, Keys allowed, std::string_view hint = {}) const {
    std::string message = fmt::format("unknown key '{}'", printable(item.key));
    std::string typo = did_you_mean(item.key, allowed);
    if (item.key == "<<") {
      message += "; YAML merge keys are not supported";
    } else if (!typo.empty()) {
      message += typo;
    } else if (!hint.empty()) {
      message += hint;
    } else {
      message += fmt::format(" (expected one of: {})", join(allowed));
    }
    fail(item.key_mark, item.path, message);
  }

  std::string scalar(const Entry& item, std::string_view expected) const {
    if (item.value.IsNull()) {
      fail(item.key_mark, item.path, fmt::format("missing value; expected {}", expected));
    }
    if (!item.value.IsScalar()) {
      fail(item.value_mark(), item.path,
           fmt::format("expected {}, got {}", expected, kind_of(item.value)));
    }
    return item.value.Scalar();
  }

  // `${NAME}` from the environment; `$${` is a literal `${`. Messages never quote the text,
  // which may be a password.
  std::string expand(std::string_view text, const YAML::Mark& mark, const std::string& path) const {
    return *expand_around(text, mark, path,
                          [](std::string_view literal) { return std::string(literal); });
  }

  // expand(), with the text around the references (not the values) passed through `literal`;
  // nullopt when `literal` refuses a piece.
  template <typename Literal>
  std::optional<std::string> expand_around(std::string_view text, const YAML::Mark& mark,
                                           const std::string& path, Literal literal) const {
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
      const char* value = std::getenv(std::string(name).c_str());
      if (value == nullptr) {
        fail(mark, path, fmt::format("environment variable '{}' is not set", name));
      }
      out += value;
      i = close + 1;
    }
    if (!flush()) return std::nullopt;
    return out;
  }

  std::string expanded(const Entry& item, std::string_view expected) const {
    return expand(scalar(item, expected), item.value_mark(), item.path);
  }

  std::string non_empty(const Entry& item, std::string_view expected) const {
    std::string value = expanded(item, expected);
    if (value.empty()) fail(item.value_mark(), item.path, "must not be empty");
    return value;
  }

  Millis duration(const Entry& item, bool allow_zero) const {
    const std::string text = scalar(item, "a duration like 30s");
    const auto value = parse_duration(text);
    if (!value) {
      fail(item.value_mark(), item.path,
           fmt::format("bad duration '{}': {}", printable(text), duration_problem(text)));
    }
    if (!allow_zero && value->count() == 0) {
      fail(item.value_mark(), item.path, "must be greater than 0");
    }
    return *value;
  }

  static std::string duration_problem(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    const std::string_view unit = text.substr(digits);
    const bool known_unit = unit == "ms" || unit == "s" || unit == "m" || unit == "h";
    if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
      return fmt::format("write a whole number and a unit ({}) with no sign", kDurationUnits);
    }
    if (text.find('.') != std::string_view::npos) {
      return "use a whole number with a smaller unit, e.g. 1500ms rather than 1.5s";
    }
    if (digits > 0 && unit.empty()) {
      return fmt::format("missing unit ({}), e.g. {}s", kDurationUnits, printable(text));
    }
    if (digits > 0 && known_unit) {
      return "too large (the limit is 9223372036854ms, about 292 years)";
    }
    if (digits > 0 && std::all_of(unit.begin(), unit.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        })) {
      return fmt::format("unknown unit '{}' (units: {})", printable(unit), kDurationUnits);
    }
    return fmt::format("expected a whole number and a unit ({}), e.g. 30s", kDurationUnits);
  }

  int integer(const Entry& item, int minimum, int maximum) const {
    const std::string text = scalar(item, "a whole number");
    long long value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, error] = std::from_chars(text.data(), end, value);
    const bool out_of_range = error == std::errc::result_out_of_range && ptr == end;
    if (!out_of_range && (text.empty() || error != std::errc() || ptr != end)) {
      fail(item.value_mark(), item.path,
           fmt::format("expected a whole number, got '{}'", printable(text)));
    }
    const bool too_small = out_of_range ? text.front() == '-' : value < minimum;
    if (too_small || out_of_range || value > maximum) {
      std::string range = fmt::format("must be between {} and {}", minimum, maximum);
      if (maximum == std::numeric_limits<int>::max()) {
        range = too_small ? fmt::format("must be {} or more", minimum)
                          : fmt::format("must be at most {}", maximum);
      }
      fail(item.value_mark(), item.path, fmt::format("{}, got {}", range, printable(text)));
    }
    return static_cast<int>(value);
  }

  double clock_drift_factor(const Entry& item) const {
    const std::string text = scalar(item, "a number");
    double value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, error] = std::from_chars(text.data(), end, value);
    if (text.empty() || error != std::errc() || ptr != end || !std::isfinite(value)) {
      fail(item.value_mark(), item.path,
           fmt::format("expected a number, got '{}'", printable(text)));
    }
    if (value < 0 || value >= kMaxClockDriftFactor) {
      fail(item.value_mark(), item.path,
           fmt::format("must be at least 0 and less than {}, got {}", kMaxClockDriftFactor,
                       printable(text)));
    }
    return value;
  }

  std::string service(const Entry& item) const {
    const std::string value = non_empty(item, "a service name");
    if (value.size() > kMaxServiceLength) {
      fail(item.value_mark(), item.path,
           fmt::format("is longer than {} characters", kMaxServiceLength));
    }
    // Braces would act as a Redis Cluster hash tag and globs would confuse `dlockctl list`.
    if (!std::all_of(value.begin(), value.end(), is_service_char)) {
      fail(item.value_mark(), item.path,
           fmt::format("'{}' may hold only letters, digits and . _ - : /", printable(value)));
    }
    return value;
  }

  // A URL is split into its parts before `${NAME}` is expanded in each, so that a value from
  // the environment is taken as it is: never percent-decoded, and a '/' or '@' in it cannot
  // change the split. Without "://" in the file (`${REDIS_URL}`, `${HOST}:6379`) the
  // expanded text is parsed as a whole.
  ParsedAddress address(const Entry& item, std::string_view expected, const YAML::Mark& mark) const {
    const std::string& path = item.path;
    const std::string raw = scalar(item, expected);
    const std::string text = expand(raw, mark, path);
    if (text.empty()) fail(mark, path, "the address is empty");
    auto parsed = raw.find("://") == std::string::npos
                      ? parse_address(text)
                      : parse_address_parts(raw, [&](std::string_view part, bool user_info) {
                          return expand_around(part, mark, path, [&](std::string_view literal) {
                            return user_info ? percent_decode(literal)
                                             : std::optional<std::string>(literal);
                          });
                        });
    if (!parsed) {
      fail(mark, path,
           fmt::format("bad address '{}': {}", redact_address(text), address_problem(text)));
    }
    return *parsed;
  }

  // sentinels, nodes, instances: plain addresses that must all differ.
  std::vector<Endpoint> endpoint_list(const Entry& item, std::string_view noun,
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
    std::vector<Endpoint> endpoints;
    std::map<std::string, YAML::Mark> seen;
    std::size_t index = 0;
    for (auto it = item.value.begin(); it != item.value.end(); ++it, ++index) {
      const YAML::Node node = *it;
      Entry element{item.key, item.value_mark(), node, fmt::format("{}[{}]", item.path, index)};
      if (!node.IsNull() && !node.Mark().is_null()) element.key_mark = node.Mark();
      const YAML::Mark mark = element.value_mark();
      const ParsedAddress parsed = address(element, "an address like host:port", mark);
      if (!parsed.username.empty() || !parsed.password.empty()) {
        fail(mark, element.path,
             fmt::format("credentials are not allowed in a list entry; set {} on the backend",
                         credentials_keys));
      }
      if (parsed.database) {
        fail(mark, element.path,
             "a database is not allowed in a list entry; set 'database' on the backend");
      }
      const auto [first, inserted] = seen.emplace(canonical_endpoint(parsed.endpoint), mark);
      if (!inserted) {
        fail(mark, element.path,
             fmt::format("{} {} is listed twice (first at {}:{})", noun,
                         endpoint_text(parsed.endpoint), first->second.line + 1,
                         first->second.column + 1));
      }
      endpoints.push_back(parsed.endpoint);
    }
    return endpoints;
  }

  std::map<std::string, BackendConfig> backends(const Entry& section) const {
    std::map<std::string, BackendConfig> out;
    for (const Entry& item :
         entries(section.value, section.value_mark(), section.path, "backends by name")) {
      if (item.key.empty()) fail(item.key_mark, section.path, "a backend name must not be empty");
      out.emplace(item.key, backend(item));
    }
    return out;
  }

  BackendConfig backend(const Entry& entry) const {
    const std::string missing_topology =
        fmt::format("missing required key 'topology' (one of: {})", kTopologyList);
    if (entry.value.IsNull()) fail(entry.key_mark, entry.path, missing_topology);
    const std::vector<Entry> items =
        entries(entry.value, entry.value_mark(), entry.path, "backend settings");
    const Entry* topology_entry = find_entry(items, "topology");
    if (topology_entry == nullptr) fail(entry.value_mark(), entry.path, missing_topology);
    const TopologySpec& spec = topology(*topology_entry);
    // Every key is checked before any value, so a typo is reported before what it causes.
    check_backend_keys(items, spec);

    BackendConfig backend;
    backend.name = entry.key;
    backend.topology = spec.topology;
    std::optional<ParsedAddress> url;
    const Entry* address_entry = nullptr;
    for (const Entry& item : items) {
      if (item.key == "address") {
        address_entry = &item;
        url = address(item, "an address", item.value_mark());
        backend.endpoints = {url->endpoint};
      } else {
        backend_value(item, spec, backend);
      }
    }
    for (std::string_view key : spec.required) {
      if (find_entry(items, key) == nullptr) {
        fail(entry.value_mark(), entry.path,
             fmt::format("missing required key '{}' for a {} backend", key, spec.name));
      }
    }
    if (url) merge_url(*url, *address_entry, items, backend);
    check_credentials(items, address_entry, backend);
    warn_even_instances(items, backend);
    return backend;
  }

  // The topology named by the `topology:` entry.
  const TopologySpec& topology(const Entry& topology_entry) const {
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

  // Refuses a key that does not belong in a backend of `spec`'s topology.
  void check_backend_keys(const std::vector<Entry>& items, const TopologySpec& spec) const {
    KeyList allowed = {"topology"};
    allowed.insert(allowed.end(), spec.own_keys.begin(), spec.own_keys.end());
    if (spec.uses_redis) {
      allowed.insert(allowed.end(), std::begin(kRedisKeys), std::end(kRedisKeys));
    }
    for (const Entry& item : items) {
      if (contains(allowed, item.key)) continue;
      const TopologySpec* owner = nullptr;
      for (const TopologySpec& other : kTopologies) {
        if (contains(other.own_keys, item.key)) owner = &other;
      }
      if (!spec.uses_redis && (owner != nullptr || contains(kRedisKeys, item.key))) {
        fail(item.key_mark, item.path,
             "does not apply to a memory backend: it lives in this process and connects to "
             "no server");
      }
      if (owner != nullptr) {
        fail(item.key_mark, item.path,
             fmt::format("does not apply to a {} backend (it is a {} setting)", spec.name,
                         owner->name));
      }
      unknown_key(item, allowed,
                  contains(kLockKeys, item.key)
                      ? " (lock settings go under 'defaults', 'policies' or 'locks')"
                      : "");
    }
  }

  // Reads one backend setting (any but `topology` and `address`) into `backend`.
  void backend_value(const Entry& item, const TopologySpec& spec, BackendConfig& backend) const {
    const std::string_view key = item.key;
    if (key == "sentinels") {
      backend.endpoints =
          endpoint_list(item, "sentinel", "sentinel_username and sentinel_password");
    } else if (key == "nodes") {
      backend.endpoints = endpoint_list(item, "node", "username and password");
    } else if (key == "instances") {
      backend.endpoints = endpoint_list(item, "instance", "username and password");
    } else if (key == "master_name") {
      backend.master_name = non_empty(item, "a master name");
    } else if (key == "wait_replicas") {
      backend.wait_replicas = integer(item, 0, std::numeric_limits<int>::max());
    } else if (key == "clock_drift_factor") {
      backend.clock_drift_factor = clock_drift_factor(item);
    } else if (key == "username") {
      backend.username = expanded(item, "a user name");
    } else if (key == "password") {
      backend.password = expanded(item, "a password");
    } else if (key == "sentinel_username") {
      backend.sentinel_username = expanded(item, "a user name");
    } else if (key == "sentinel_password") {
      backend.sentinel_password = expanded(item, "a password");
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
    }
  }

  // What the address URL carries: user name, password, database.
  void merge_url(const ParsedAddress& url, const Entry& address_entry,
                 const std::vector<Entry>& items, BackendConfig& backend) const {
    merge_from_url(address_entry, items, "username", !url.username.empty(),
                   [&] { backend.username = url.username; });
    merge_from_url(address_entry, items, "password", !url.password.empty(),
                   [&] { backend.password = url.password; });
    merge_from_url(address_entry, items, "database", url.database.has_value(),
                   [&] { backend.database = *url.database; });
  }

  // Redis authenticates only with a password; a user name alone would silently run as
  // the 'default' user, with whatever rights that one has.
  void check_credentials(const std::vector<Entry>& items, const Entry* address_entry,
                         const BackendConfig& backend) const {
    const Entry* user_entry = find_entry(items, "username");
    if (user_entry == nullptr) user_entry = address_entry;
    need_password(user_entry, backend.username, backend.password, "password");
    need_password(find_entry(items, "sentinel_username"), backend.sentinel_username,
                  backend.sentinel_password, "sentinel_password");
  }

  // An even number of Redlock instances tolerates no more failures than one fewer would.
  void warn_even_instances(const std::vector<Entry>& items, const BackendConfig& backend) const {
    if (const Entry* instances = find_entry(items, "instances");
        instances != nullptr && backend.endpoints.size() % 2 == 0) {
      const std::size_t n = backend.endpoints.size();
      warn(instances->value_mark(), instances->path,
           fmt::format("{} instances need a quorum of {} and tolerate {} failed, no more than {} "
                       "would; use an odd number",
                       n, n / 2 + 1, (n - 1) / 2, n - 1));
    }
  }

  void need_password(const Entry* user_entry, const std::string& username,
                     const std::string& password, std::string_view password_key) const {
    if (username.empty() || !password.empty()) return;
    fail(user_entry->key == "address" ? user_entry->value_mark() : user_entry->key_mark,
         user_entry->path,
         fmt::format("a user name without a password would connect as the 'default' user; set "
                     "'{}' too",
                     password_key));
  }

  // A value the address URL carries fills its field, unless the field's own key is there too.
  template <typename Fill>
  void merge_from_url(const Entry& address_entry, const std::vector<Entry>& items,
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

  // `fallback_backend`: the backend these settings use unless they name one.
  LockOverrides overrides(const Entry& section,
                          const std::map<std::string, BackendConfig>& backends,
                          std::string_view fallback_backend) const {
    LockOverrides out;
    const std::vector<Entry> items =
        entries(section.value, section.value_mark(), section.path, "lock settings");
    const Entry* lease = nullptr;
    const Entry* min_hold = nullptr;
    const Entry* max_hold = nullptr;
    for (const Entry& item : items) {
      const std::string_view key = item.key;
      if (key == "lease") {
        out.lease = duration(item, false);
        lease = &item;
        if (*out.lease < kMinimumLease) {
          fail(item.value_mark(), item.path,
               fmt::format("must be at least {}: the watchdog renews a lease every lease/3",
                           format_millis(kMinimumLease)));
        }
      } else if (key == "wait") {
        out.wait = duration(item, true);
      } else if (key == "on_busy") {
        const std::string value = scalar(item, "throw or skip");
        if (value == "throw") {
          out.on_busy = OnBusy::kThrow;
        } else if (value == "skip") {
          out.on_busy = OnBusy::kSkip;
        } else {
          std::string typo = did_you_mean(value, kOnBusyValues);
          fail(item.value_mark(), item.path,
               fmt::format("expected throw or skip, got '{}'{}", printable(value), typo));
        }
      } else if (key == "min_hold") {
        out.min_hold = duration(item, true);
        min_hold = &item;
      } else if (key == "max_hold") {
        out.max_hold = duration(item, false);
        max_hold = &item;
      } else if (key == "backend") {
        out.backend = backend_reference(item, backends);
      } else {
        const bool backend_key = contains(kRedisKeys, key) || key == "topology" || key == "address";
        unknown_key(item, kLockKeys, backend_key ? " (backend settings go under 'backends')" : "");
      }
    }
    if (min_hold != nullptr && max_hold != nullptr && *out.min_hold > *out.max_hold) {
      fail(min_hold->value_mark(), min_hold->path,
           fmt::format("min_hold {} exceeds max_hold {}", min_hold->value.Scalar(),
                       max_hold->value.Scalar()));
    }
    if (lease != nullptr) {
      const auto backend = backends.find(out.backend.value_or(std::string(fallback_backend)));
      if (backend != backends.end() && backend->second.topology != Topology::kMemory &&
          *out.lease <= backend->second.command_timeout) {
        warn(lease->value_mark(), lease->path,
             fmt::format("{} is not longer than the command_timeout ({}) of backend '{}': a grant "
                         "that arrives after its lease has run out is refused",
                         format_millis(*out.lease),
                         format_millis(backend->second.command_timeout), backend->first));
      }
    }
    return out;
  }

  std::string backend_reference(const Entry& item,
                                const std::map<std::string, BackendConfig>& backends) const {
    const std::string name = scalar(item, "a backend name");
    if (backends.find(name) != backends.end()) return name;
    KeyList names;
    for (const auto& [configured, backend] : backends) names.push_back(configured);
    fail(item.value_mark(), item.path,
         fmt::format("backend '{}' is not configured{} (configured: {})", printable(name),
                     did_you_mean(name, names), join(names)));
  }

  std::map<std::string, LockOverrides> named_overrides(
      const Entry& section, std::string_view noun,
      const std::map<std::string, BackendConfig>& backends,
      std::string_view fallback_backend) const {
    std::map<std::string, LockOverrides> out;
    const std::string what = fmt::format("lock settings by {} name", noun);
    for (const Entry& item : entries(section.value, section.value_mark(), section.path, what)) {
      if (item.key.empty()) {
        fail(item.key_mark, section.path, fmt::format("a {} name must not be empty", noun));
      }
      out.emplace(item.key, overrides(item, backends, fallback_backend));
    }
    return out;
  }

  std::string source_;
};

}  // namespace
}  // namespace internal

Config parse_config(const std::string& yaml_text, const std::string& source_name) {
  const internal::Loader loader(source_name);
  try {
    loader.check_single_document(yaml_text);
    return loader.load(YAML::Load(yaml_text));
  } catch (const ConfigError&) {
    throw;
  } catch (const YAML::DeepRecursion& error) {
    loader.fail(error.mark, "", "invalid YAML: nested too deeply");
  } catch (const YAML::ParserException& error) {
    loader.fail(error.mark, "",
                fmt::format("invalid YAML: {}{}", error.msg,
                            internal::syntax_hint(yaml_text, error.mark.line)));
  } catch (const YAML::Exception& error) {
    loader.fail(error.mark, "", error.msg);
  } catch (const std::exception& error) {
    throw ConfigError(
        fmt::format("{}: error: cannot load the configuration: {}", source_name, error.what()));
  }
}

Config load_config(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const std::error_code error(errno, std::generic_category());
    throw ConfigError(
        fmt::format("{}: error: cannot open the configuration file: {}", path, error.message()));
  }
  std::string text;
  std::array<char, 64 * 1024> buffer{};
  std::size_t count = 0;
  while ((count = std::fread(buffer.data(), 1, buffer.size(), file)) > 0) {
    text.append(buffer.data(), count);
  }
  const bool failed = std::ferror(file) != 0;
  const int read_error = errno != 0 ? errno : EIO;
  std::fclose(file);
  if (failed) {
    const std::error_code error(read_error, std::generic_category());
    throw ConfigError(
        fmt::format("{}: error: cannot read the configuration file: {}", path, error.message()));
  }
  return parse_config(text, path);
}

}  // namespace dlock
