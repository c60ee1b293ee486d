// A postgres backend's `dsn` and `table`. libpq reads the dsn here as it will at connection
// time (PQconninfoParse), so that a connection string it would refuse stops loading instead.
#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/common/text.hpp"
#include "loader.hpp"

namespace dlock::internal::loading {
namespace {

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;  // [begin, end) in a text

constexpr std::string_view kSpace = " \t\n\r\f\v";
// libpq's messages are never cut; what they quote of the dsn is (printable()).
constexpr common::TextProfile kWholeMessage{true, 0, 0};

// The options of a connection string as libpq reads it, or libpq's reason to refuse it.
class Conninfo {
 public:
  explicit Conninfo(const std::string& dsn) {
    char* error = nullptr;
    options_.reset(PQconninfoParse(dsn.c_str(), &error));
    if (error == nullptr) return;
    error_ = error;
    PQfreemem(error);
    error_.erase(error_.find_last_not_of(kSpace) + 1);
    std::replace(error_.begin(), error_.end(), '\n', ' ');
  }

  [[nodiscard]] bool ok() const { return options_ != nullptr; }
  [[nodiscard]] std::string error() const { return error_.empty() ? "out of memory" : error_; }

  // The value given for `keyword`; empty when none was.
  [[nodiscard]] std::string_view value(std::string_view keyword) const {
    for (const PQconninfoOption* option = options_.get(); option != nullptr && option->keyword;
         ++option) {
      if (option->keyword == keyword && option->val != nullptr) return option->val;
    }
    return {};
  }

 private:
  struct Free {
    void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
  };
  std::unique_ptr<PQconninfoOption, Free> options_;
  std::string error_;
};

// The length of the `postgresql://` or `postgres://` that starts a URL; 0 for the
// `keyword=value` form. libpq compares the scheme case-sensitively.
std::size_t uri_prefix_length(std::string_view dsn) {
  for (std::string_view prefix : {"postgresql://", "postgres://"}) {
    if (dsn.substr(0, prefix.size()) == prefix) return prefix.size();
  }
  return 0;
}

std::string percent_encoded(std::string_view value) {
  std::string out;
  for (const char c : value) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    out += unreserved ? std::string(1, c) : fmt::format("%{:02X}", static_cast<unsigned char>(c));
  }
  return out;
}

std::vector<std::string_view> split_list(std::string_view list) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t comma = list.find(',', start);
    parts.push_back(list.substr(start, comma - start));
    if (comma == std::string_view::npos) return parts;
    start = comma + 1;
  }
}

bool valid_port(std::string_view port) {
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos) {
    return false;
  }
  const int number = std::stoi(std::string(port));
  return number >= 1 && number <= 65535;
}

// What makes the dsn's hosts unfit for locks, if anything: a port that is not a number (in a
// URL, often a password with an unencoded '/'), several hosts any of which could answer.
std::optional<std::string> hosts_problem(const Conninfo& options, bool url) {
  for (std::string_view port : split_list(options.value("port"))) {
    if (port.empty() || valid_port(port)) continue;  // empty: the default port
    return fmt::format("a port in the dsn is not a number between 1 and 65535{}",
                       url ? " (write a '/', '@' or ':' in a user name or password as %2F, %40 "
                             "or %3A)"
                           : "");
  }
  const std::size_t hosts = std::max(split_list(options.value("host")).size(),
                                     split_list(options.value("hostaddr")).size());
  const std::string_view attrs = options.value("target_session_attrs");
  if (hosts < 2 || attrs == "read-write" || attrs == "primary") return std::nullopt;
  return fmt::format(
      "the dsn lists {} hosts {}: libpq takes the first host that answers, which can be a "
      "read-only standby, or a former primary after a failover; set "
      "target_session_attrs=read-write (or primary)",
      hosts,
      attrs.empty() ? "without target_session_attrs"
                    : fmt::format("with target_session_attrs={}", printable(attrs)));
}

// Where the value of a `password` keyword or URL query parameter that starts at `begin` ends.
// An unquoted keyword value runs on over the words after it up to the next `key=`, since a
// password with an unquoted space leaves its second half for libpq to quote as a keyword.
std::size_t password_end(std::string_view dsn, std::size_t begin, bool url) {
  if (url) return std::min(dsn.find('&', begin), dsn.size());
  if (begin < dsn.size() && dsn[begin] == '\'') {
    for (std::size_t i = begin + 1; i < dsn.size(); ++i) {
      if (dsn[i] == '\'') return i + 1;
      if (dsn[i] == '\\') ++i;  // \' and \\ are a quote and a backslash
    }
    return dsn.size();
  }
  std::size_t end = std::min(dsn.find_first_of(kSpace, begin), dsn.size());
  for (;;) {
    const std::size_t word = dsn.find_first_not_of(kSpace, end);
    if (word == std::string_view::npos) return end;
    const std::size_t word_end = std::min(dsn.find_first_of(kSpace, word), dsn.size());
    if (dsn.substr(word, word_end - word).find('=') != std::string_view::npos) return end;
    end = word_end;
  }
}

// The stretches of `dsn` that hold a password: a URL's user info after its ':' (up to the
// last '@', for a password with an unencoded '/'), the value of each `password`. Generous
// where the text is malformed, since that is when libpq quotes it.
Ranges secret_ranges(std::string_view dsn) {
  Ranges secrets;
  // Any scheme: libpq quotes the whole text of a URL it does not know as a keyword.
  const std::size_t scheme = dsn.find("://");
  const std::size_t prefix = scheme == std::string_view::npos ? 0 : scheme + 3;
  const std::size_t at = dsn.rfind('@');
  const std::size_t colon = dsn.find(':', prefix);
  if (prefix > 0 && at != std::string_view::npos && colon < at) secrets.emplace_back(colon + 1, at);
  for (std::size_t key = dsn.find("password"); key != std::string_view::npos;
       key = dsn.find("password", key + 1)) {
    std::size_t begin = dsn.find_first_not_of(kSpace, key + 8);
    if (begin == std::string_view::npos || dsn[begin] != '=') continue;
    begin = std::min(dsn.find_first_not_of(kSpace, begin + 1), dsn.size());
    secrets.emplace_back(begin, password_end(dsn, begin, prefix > 0));
  }
  std::erase_if(secrets, [](const auto& range) { return range.first >= range.second; });
  return secrets;
}

// A piece of the dsn that libpq quotes, with what it holds of a password shown as ***. A
// piece found only where a password is counts as one; a single character is libpq's own
// punctuation as often as not, and tells little.
std::string shown(std::string_view piece, std::string_view dsn, const Ranges& secrets) {
  if (piece.size() < 2) return std::string(piece);
  for (std::size_t at = dsn.find(piece); at != std::string_view::npos;
       at = dsn.find(piece, at + 1)) {
    const std::size_t end = at + piece.size();
    const auto overlaps = [&](const auto& range) { return range.first < end && at < range.second; };
    if (std::none_of(secrets.begin(), secrets.end(), overlaps)) continue;
    std::string out;
    for (std::size_t i = at; i < end;) {
      const auto inside = [&](const auto& range) { return range.first <= i && i < range.second; };
      const auto secret = std::find_if(secrets.begin(), secrets.end(), inside);
      if (secret == secrets.end()) {
        out += dsn[i++];
        continue;
      }
      out += "***";
      i = secret->second;
    }
    return out;
  }
  return std::string(piece);
}

// libpq's message about `dsn` with the passwords it quotes hidden, and what it quotes made
// printable.
std::string redacted(std::string_view message, std::string_view dsn) {
  const Ranges secrets = secret_ranges(dsn);
  std::string out;
  std::size_t i = 0;
  for (std::size_t open; (open = message.find('"', i)) != std::string_view::npos;) {
    const std::size_t close = std::min(message.find('"', open + 1), message.size());
    out += message.substr(i, open + 1 - i);
    out += printable(shown(message.substr(open + 1, close - open - 1), dsn, secrets));
    if (close == message.size()) return common::printable(out, kWholeMessage);
    out += '"';
    i = close + 1;
  }
  return common::printable(out + std::string(message.substr(i)), kWholeMessage);
}

bool is_identifier(std::string_view name) {
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (name.empty() || !(letter(name.front()) || name.front() == '_')) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9') || c == '_'; });
}

}  // namespace

std::string Loader::expanded_dsn(const Entry& item) const {
  const std::string raw = scalar(item, "a connection string");
  const YAML::Mark mark = item.value_mark();
  // The user info ends where libpq ends it: at the first '@' or '/'.
  const std::size_t start = uri_prefix_length(raw);
  const std::size_t end = start == 0 ? std::string::npos : raw.find_first_of("@/", start);
  if (end == std::string::npos || raw[end] != '@') return expand(raw, mark, item.path);
  const auto as_written = [](std::string_view literal) {
    return std::optional<std::string>(literal);
  };
  const std::string user_info = *expand_around(std::string_view(raw).substr(start, end - start),
                                               mark, item.path, as_written, percent_encoded);
  return raw.substr(0, start) + user_info + expand(raw.substr(end), mark, item.path);
}

std::string Loader::dsn(const Entry& item) const {
  std::string text = expanded_dsn(item);
  const YAML::Mark mark = item.value_mark();
  if (text.find_first_not_of(kSpace) == std::string::npos) {
    fail(mark, item.path, "must not be empty");
  }
  if (const std::size_t scheme = text.find("://");
      scheme != std::string::npos && uri_prefix_length(text) == 0 && text.find('=') > scheme) {
    fail(mark, item.path, "a URL must start with postgresql:// or postgres://");
  }
  const Conninfo options(text);
  if (!options.ok()) {
    fail(mark, item.path, fmt::format("libpq refuses it: {}", redacted(options.error(), text)));
  }
  if (const auto problem = hosts_problem(options, uri_prefix_length(text) > 0)) {
    fail(mark, item.path, *problem);
  }
  return text;
}

void Loader::warn_dsn_timeout(const std::vector<Entry>& items, const BackendConfig& backend) const {
  const Entry* dsn_entry = find_entry(items, "dsn");
  if (dsn_entry == nullptr || Conninfo(backend.dsn).value("connect_timeout").empty()) return;
  warn(dsn_entry->value_mark(), dsn_entry->path,
       fmt::format("connect_timeout in the dsn does not apply: the backend's connect_timeout "
                   "({}) bounds the connection; set it there",
                   format_millis(backend.connect_timeout)));
}

std::string Loader::table(const Entry& item) const {
  const std::string name = scalar(item, "a table name");
  const YAML::Mark mark = item.value_mark();
  const std::size_t dot = name.find('.');
  const std::string schema = dot == std::string::npos ? "" : name.substr(0, dot);
  const std::string table = dot == std::string::npos ? name : name.substr(dot + 1);
  if (!is_identifier(table) || (dot != std::string::npos && !is_identifier(schema))) {
    fail(mark, item.path,
         fmt::format("'{}' is not a table name: write name or schema.name, each of letters, "
                     "digits and '_', not starting with a digit",
                     printable(name)));
  }
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  });
  if (lower != name) {
    fail(mark, item.path,
         fmt::format("'{}' has upper-case letters: dlock quotes the name, so the table would not "
                     "be {}, which is what {} means unquoted in SQL; write '{}'",
                     name, lower, name, lower));
  }
  if (schema.starts_with("pg_")) {
    fail(mark, item.path,
         fmt::format("schema '{}' is reserved: names starting with 'pg_' are PostgreSQL's own "
                     "(in pg_temp each connection would have a table of its own, and no lock "
                     "would be shared); use another schema",
                     schema));
  }
  if (schema.size() > kMaxIdentifierLength) {
    fail(mark, item.path,
         fmt::format("the schema name '{}' is longer than {} characters, the limit of "
                     "PostgreSQL names",
                     printable(schema), kMaxIdentifierLength));
  }
  if (table.size() > kMaxTableLength) {
    fail(mark, item.path,
         fmt::format("the table name '{}' is longer than {} characters: dlock also creates "
                     "<table>_runs and <table>_audit, and PostgreSQL names are at most {} bytes",
                     printable(table), kMaxTableLength, kMaxIdentifierLength));
  }
  return name;
}

}  // namespace dlock::internal::loading
