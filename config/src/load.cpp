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
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/common/duration.hpp"
#include "dlock/common/text.hpp"
#include "dlock/config.hpp"
#include "log.hpp"
#include "loader.hpp"
#include "values.hpp"

namespace dlock::internal::loading {
namespace {

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

}  // namespace

[[noreturn]] void Loader::fail(const YAML::Mark& mark, std::string_view path,
                               std::string_view message) const {
  failed_at_ = mark.is_null() ? -1 : mark.pos;
  throw ConfigError(error_text(mark, path, message));
}

void Loader::report(const YAML::Mark& mark, std::string_view path, std::string_view message) const {
  errors_.push_back(KeptError{mark.is_null() ? -1 : mark.pos, error_text(mark, path, message)});
}

std::string Loader::error_text(const YAML::Mark& mark, std::string_view path,
                               std::string_view message) const {
  std::string where = source_;
  if (!mark.is_null()) where += fmt::format(":{}:{}", mark.line + 1, mark.column + 1);
  if (path.empty()) return fmt::format("{}: error: {}", where, message);
  return fmt::format("{}: error: {}: {}", where, path, message);
}

void Loader::warn(const YAML::Mark& mark, std::string_view path, std::string_view message) const {
  std::string where = source_;
  if (!mark.is_null()) where += fmt::format(":{}:{}", mark.line + 1, mark.column + 1);
  warnings_.push_back(fmt::format("{}: warning: {}: {}", where, path, message));
}

void Loader::check_single_document(const std::string& text) const {
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

[[nodiscard]] Config Loader::load(const YAML::Node& root) const {
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
      keep_going([&] { unknown_key(item, kTopLevelKeys, hint); });
    }
  }

  if (const Entry* item = find_entry(items, "service")) {
    keep_going([&] { config.service = service(*item); });
  }
  // An empty `backends:` reads like an absent one, as for every other section.
  const Entry* backends_entry = find_entry(items, "backends");
  if (backends_entry != nullptr && backends_entry->value.IsNull()) backends_entry = nullptr;
  if (backends_entry != nullptr) {
    // Refused as a whole (not a map, a name given twice), its names are unknown: references
    // to backends are not checked then, rather than all reported as not configured.
    backends_unknown_ = !keep_going([&] { config.backends = backends(*backends_entry); });
  }
  const std::size_t errors_before_defaults = errors_.size();
  if (const Entry* item = find_entry(items, "defaults")) {
    keep_going([&] { config.defaults = overrides(*item, config.backends, kDefaultBackend); });
  }
  // A refused `defaults` may have named the default backend.
  const bool defaults_read = errors_.size() == errors_before_defaults;
  const std::string fallback_backend =
      config.defaults.backend.value_or(std::string(kDefaultBackend));
  if (backends_entry != nullptr && defaults_read && !backends_unknown_ &&
      !config.defaults.backend &&
      config.backends.find(std::string(kDefaultBackend)) == config.backends.end()) {
    // Caught here rather than at the first guard's resolve(), long after start-up.
    report(backends_entry->key_mark, backends_entry->path,
           "no backend named 'default'; add one or set defaults.backend");
  }
  if (const Entry* item = find_entry(items, "policies")) {
    keep_going([&] {
      config.policies = named_overrides(*item, "policy", config.backends, fallback_backend);
    });
  }
  if (const Entry* item = find_entry(items, "locks")) {
    keep_going(
        [&] { config.locks = named_overrides(*item, "guard", config.backends, fallback_backend); });
  }
  // A refused file logs no warnings: they could stem from its errors.
  if (!errors_.empty()) throw ConfigError(all_errors());
  for (const std::string& line : warnings_) log(LogLevel::kWarn, "{}", line);
  return config;
}

std::string Loader::all_errors() const {
  // In document order: sections are read in an order of their own (backends before the
  // policies that name them). Errors without a position come first.
  std::vector<KeptError> sorted = errors_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const KeptError& a, const KeptError& b) { return a.pos < b.pos; });
  constexpr std::size_t kShown = 20;
  std::string text;
  for (std::size_t i = 0; i < sorted.size() && i < kShown; ++i) {
    if (i > 0) text += '\n';
    text += sorted[i].text;
  }
  if (sorted.size() > kShown) {
    text += fmt::format("\n{}: {} more errors not shown", source_, sorted.size() - kShown);
  }
  return text;
}

std::vector<Entry> Loader::entries(const YAML::Node& node, const YAML::Mark& mark,
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

[[noreturn]] void Loader::unknown_key(const Entry& item, Keys allowed,
                                      std::string_view hint) const {
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

std::string Loader::scalar(const Entry& item, std::string_view expected) const {
  if (item.value.IsNull()) {
    fail(item.key_mark, item.path, fmt::format("missing value; expected {}", expected));
  }
  if (!item.value.IsScalar()) {
    fail(item.value_mark(), item.path,
         fmt::format("expected {}, got {}", expected, kind_of(item.value)));
  }
  return item.value.Scalar();
}

std::string Loader::expand(std::string_view text, const YAML::Mark& mark,
                           const std::string& path) const {
  return *expand_around(text, mark, path,
                        [](std::string_view literal) { return std::string(literal); });
}

std::string Loader::expanded(const Entry& item, std::string_view expected) const {
  return expand(scalar(item, expected), item.value_mark(), item.path);
}

std::string Loader::non_empty(const Entry& item, std::string_view expected) const {
  std::string value = expanded(item, expected);
  if (value.empty()) fail(item.value_mark(), item.path, "must not be empty");
  return value;
}

Millis Loader::duration(const Entry& item, bool allow_zero) const {
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

std::string Loader::duration_problem(std::string_view text) {
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

int Loader::integer(const Entry& item, int minimum, int maximum) const {
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

double Loader::clock_drift_factor(const Entry& item) const {
  const std::string text = scalar(item, "a number");
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || ptr != end || !std::isfinite(value)) {
    fail(item.value_mark(), item.path, fmt::format("expected a number, got '{}'", printable(text)));
  }
  if (value < 0 || value >= kMaxClockDriftFactor) {
    fail(item.value_mark(), item.path,
         fmt::format("must be at least 0 and less than {}, got {}", kMaxClockDriftFactor,
                     printable(text)));
  }
  return value;
}

std::string Loader::service(const Entry& item) const {
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

LockOverrides Loader::overrides(const Entry& section,
                                const std::map<std::string, BackendConfig>& backends,
                                std::string_view fallback_backend) const {
  LockOverrides out;
  const std::vector<Entry> items =
      entries(section.value, section.value_mark(), section.path, "lock settings");
  OverrideEntries given;
  const std::size_t errors_before = errors_.size();
  for (const Entry& item : items) {
    keep_going([&] { override_value(item, backends, out, given); });
  }
  // Checks across keys would misread a value that was refused.
  if (errors_.size() != errors_before) return out;
  if (given.min_hold != nullptr && given.max_hold != nullptr && *out.min_hold > *out.max_hold) {
    fail(given.min_hold->value_mark(), given.min_hold->path,
         fmt::format("min_hold {} exceeds max_hold {}", given.min_hold->value.Scalar(),
                     given.max_hold->value.Scalar()));
  }
  if (given.lease != nullptr) {
    warn_short_lease(*given.lease, *out.lease, out.backend.value_or(std::string(fallback_backend)),
                     backends);
  }
  return out;
}

void Loader::override_value(const Entry& item, const std::map<std::string, BackendConfig>& backends,
                            LockOverrides& out, OverrideEntries& given) const {
  const std::string_view key = item.key;
  if (key == "lease") {
    out.lease = duration(item, false);
    given.lease = &item;
    if (*out.lease < kMinimumLease) {
      fail(item.value_mark(), item.path,
           fmt::format("must be at least {}: the watchdog renews a lease every lease/3",
                       format_millis(kMinimumLease)));
    }
  } else if (key == "wait") {
    out.wait = duration(item, true);
  } else if (key == "on_busy") {
    out.on_busy = on_busy(item);
  } else if (key == "min_hold") {
    out.min_hold = duration(item, true);
    given.min_hold = &item;
  } else if (key == "max_hold") {
    out.max_hold = duration(item, false);
    given.max_hold = &item;
  } else if (key == "backend") {
    out.backend = backend_reference(item, backends);
  } else if (key == "fair") {
    out.fair = boolean(item);
  } else if (key == "permits") {
    out.permits = integer(item, 0, kMaxPermits);  // 0: a lock again, where a level below set N
  } else if (key == "mode") {
    fail(item.key_mark, item.path,
         "is set in the guard attribute or the runtime API only: whether holders may share a "
         "key is part of what the code means, not a setting");
  } else {
    unknown_key(item, kLockKeys,
                is_backend_key(key) ? " (backend settings go under 'backends')" : "");
  }
}

OnBusy Loader::on_busy(const Entry& item) const {
  const std::string value = scalar(item, "throw or skip");
  if (value == "throw") return OnBusy::kThrow;
  if (value == "skip") return OnBusy::kSkip;
  std::string typo = did_you_mean(value, kOnBusyValues);
  fail(item.value_mark(), item.path,
       fmt::format("expected throw or skip, got '{}'{}", printable(value), typo));
}

std::string Loader::backend_reference(const Entry& item,
                                      const std::map<std::string, BackendConfig>& backends) const {
  const std::string name = scalar(item, "a backend name");
  if (backends_unknown_ || backends.find(name) != backends.end()) return name;
  KeyList names;
  for (const auto& [configured, backend] : backends) names.push_back(configured);
  fail(item.value_mark(), item.path,
       fmt::format("backend '{}' is not configured{} (configured: {})", printable(name),
                   did_you_mean(name, names), join(names)));
}

std::map<std::string, LockOverrides> Loader::named_overrides(
    const Entry& section, std::string_view noun,
    const std::map<std::string, BackendConfig>& backends, std::string_view fallback_backend) const {
  std::map<std::string, LockOverrides> out;
  const std::string what = fmt::format("lock settings by {} name", noun);
  for (const Entry& item : entries(section.value, section.value_mark(), section.path, what)) {
    if (item.key.empty()) {
      fail(item.key_mark, section.path, fmt::format("a {} name must not be empty", noun));
    }
    keep_going([&] { out.emplace(item.key, overrides(item, backends, fallback_backend)); });
  }
  return out;
}

Config parse(const std::string& yaml_text, const std::string& source_name,
             const std::string& base_dir) {
  const Loader loader(source_name, base_dir);
  try {
    loader.check_single_document(yaml_text);
    return loader.load(YAML::Load(yaml_text));
  } catch (const ConfigError&) {
    throw;
  } catch (const YAML::DeepRecursion& error) {
    loader.fail(error.mark, "", "invalid YAML: nested too deeply");
  } catch (const YAML::ParserException& error) {
    loader.fail(
        error.mark, "",
        fmt::format("invalid YAML: {}{}", error.msg, syntax_hint(yaml_text, error.mark.line)));
  } catch (const YAML::Exception& error) {
    loader.fail(error.mark, "", error.msg);
  } catch (const std::exception& error) {
    throw ConfigError(
        fmt::format("{}: error: cannot load the configuration: {}", source_name, error.what()));
  }
}

}  // namespace dlock::internal::loading

namespace dlock {

Config parse_config(const std::string& yaml_text, const std::string& source_name) {
  // source_name need not name a file: relative paths stay relative to the current directory,
  // where load_config makes them relative to the file's directory.
  return internal::loading::parse(yaml_text, source_name, "");
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
  std::error_code ignored;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ignored);
  return internal::loading::parse(text, path, absolute.parent_path().string());
}

}  // namespace dlock
