// Fuzz target: the scalar grammars shared by the configuration and the generator.
//
// - Durations: dlock::parse_duration (YAML) and dlock::codegen::parse_duration (attributes)
//   must accept exactly the same texts with the same values (codegen/.../duration.hpp says
//   so), never above the documented bound, and the generator must say why it refuses.
// - Addresses: dlock::parse_address must give a port in 1..65535 and a host, and what it
//   accepts must read back the same when written out again (host:port, and as a redis://
//   URL with percent-encoded user info), as the loader's duplicate check relies on.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/codegen/duration.hpp"
#include "dlock/config.hpp"
#include "fuzz_check.hpp"

namespace {

constexpr std::int64_t kMaxDurationMillis = 9223372036854;  // docs/CONFIG.md

void check_duration(std::string_view text) {
  const std::optional<dlock::Millis> config = dlock::parse_duration(text);
  const dlock::codegen::DurationParse attribute = dlock::codegen::parse_duration(text);
  DLOCK_FUZZ_CHECK(config == attribute.value, "'{}': config {} ms, attribute {} ms ({})", text,
                   config ? config->count() : -1, attribute.value ? attribute.value->count() : -1,
                   attribute.error);
  DLOCK_FUZZ_CHECK(attribute.value.has_value() == attribute.error.empty(),
                   "'{}': value and error '{}'", text, attribute.error);
  if (config) {
    DLOCK_FUZZ_CHECK(config->count() >= 0 && config->count() <= kMaxDurationMillis,
                     "'{}' -> {} ms", text, config->count());
  }
}

std::string percent_encoded(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("%{:02X}", c);
  return out;
}

std::string host_port(const dlock::Endpoint& e) {
  return e.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", e.host, e.port)
                                               : fmt::format("{}:{}", e.host, e.port);
}

void check_address(std::string_view text) {
  const std::optional<dlock::ParsedAddress> parsed = dlock::parse_address(text);
  if (!parsed) return;
  const dlock::Endpoint& e = parsed->endpoint;
  DLOCK_FUZZ_CHECK(!e.host.empty() && e.port >= 1 && e.port <= 65535, "'{}' -> '{}' port {}",
                   text, e.host, e.port);
  if (parsed->database) DLOCK_FUZZ_CHECK(*parsed->database >= 0, "database {}", *parsed->database);

  const std::string plain = host_port(e);
  const auto again = dlock::parse_address(plain);
  DLOCK_FUZZ_CHECK(again && again->endpoint == e && again->username.empty() &&
                       again->password.empty() && !again->database,
                   "'{}' -> '{}' does not read back", text, plain);

  std::string url = "redis://";
  if (!parsed->username.empty() || !parsed->password.empty()) {
    url += percent_encoded(parsed->username);
    if (!parsed->password.empty()) url += ":" + percent_encoded(parsed->password);
    url += "@";
  }
  url += plain;
  if (parsed->database) url += fmt::format("/{}", *parsed->database);
  const auto from_url = dlock::parse_address(url);
  DLOCK_FUZZ_CHECK(from_url && from_url->endpoint == e && from_url->username == parsed->username &&
                       from_url->password == parsed->password &&
                       from_url->database == parsed->database,
                   "'{}' -> URL '{}' does not read back", text, url);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_duration(text);
  check_address(text);
  return 0;
}
