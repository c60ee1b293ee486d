// Bytes in the text forms engines store them in: hex, and a short digest of a key.
#pragma once

#include <string>
#include <string_view>

namespace dlock::internal {

/// Bytes as lower-case hex, and back (`unhex` also reads upper case; an odd last digit is
/// dropped).
[[nodiscard]] std::string hex(std::string_view bytes);
[[nodiscard]] std::string unhex(std::string_view text);
/// The first 128 bits of the key's SHA-256, in hex: where a key must fit a name or a
/// notification payload (PostgreSQL, ZooKeeper) and keys have no size limit.
[[nodiscard]] std::string key_digest(std::string_view key);

}  // namespace dlock::internal
