// How a user's key becomes Redis keys. Every key of one lock carries the same hash tag, so
// they land in one cluster slot, and escaping keeps distinct (service, key) pairs distinct:
//
//   service "shop", key "order:{7}"  ->  dlock:{shop:order%3A%7B7%7D}:lock
//                                        dlock:{shop:order%3A%7B7%7D}:fence
//                                        dlock:{shop:order%3A%7B7%7D}:released  (channel)
//                                        dlock:{shop:order%3A%7B7%7D}:holders
//                                        dlock:{shop:order%3A%7B7%7D}:queue, :places
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dlock::internal {

struct LockKeys {
  std::string lock;
  std::string fence;
  std::string channel;
  std::string holders;  ///< a lock held shared or as a semaphore: its holders (holders.lua)
  std::string queue;    ///< the fair queue: owner -> ticket (holders.lua)
  std::string places;   ///< the places in the fair queue: owner -> when it lapses, kind
};

[[nodiscard]] LockKeys lock_keys(std::string_view service, std::string_view key);

/// '%', '{', '}' and ':' as %XX; every other byte as is.
[[nodiscard]] std::string escape_key_part(std::string_view text);
[[nodiscard]] std::optional<std::string> unescape_key_part(std::string_view text);

}  // namespace dlock::internal
