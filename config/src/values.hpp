// What the loader and resolve() share of the value grammars in values.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/config.hpp"

namespace dlock::internal {

/// Turns one raw part of an address into its value. `user_info` is true for the user name
/// and the password, which are percent-decoded; the host, port and database are not.
/// Returns nullopt when the part is malformed.
using AddressPart = std::function<std::optional<std::string>(std::string_view raw, bool user_info)>;

/// parse_address, with each part passed through `part` after the address has been split,
/// so that what `part` adds (a value from the environment) cannot change the split.
[[nodiscard]] std::optional<ParsedAddress> parse_address_parts(std::string_view text,
                                                               const AddressPart& part);

/// `host`, `host:port`, `[ipv6]` or `[ipv6]:port`, nothing else (no scheme, no user info):
/// a ZooKeeper server. `default_port` when none is written.
[[nodiscard]] std::optional<Endpoint> parse_server(std::string_view text, int default_port);

/// `250ms`, `30s`, `10m`, `1h`: the largest unit that divides the value.
[[nodiscard]] std::string format_millis(Millis value);

}  // namespace dlock::internal
