// How a user's key becomes Redis keys. Every key of one lock carries the same hash tag, so
// they land in one cluster slot, and escaping keeps distinct (service, key) pairs distinct:
//
//   service "shop", key "order:7"  ->  dlock:{shop:order%3A7}:lock
//                                      dlock:{shop:order%3A7}:fence
//                                      dlock:{shop:order%3A7}:released  (channel)
//                                      dlock:{shop:order%3A7}:holders
//                                      dlock:{shop:order%3A7}:queue, :places
//
// A key with a hash tag of its own (Redis's rule: from the first '{' to the next '}', not
// empty) is placed by that tag, so the keys of one service that share it share a slot, and
// a lease of several of them is taken in one request on a cluster too:
//
//   service "shop", key "acct:{42}:from"  ->  dlock:{shop:42}:acct%3A%7B42%7D%3Afrom:lock, ...
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

/// The hash tag of a user's key by Redis's rule, or none.
[[nodiscard]] std::optional<std::string_view> hash_tag_of(std::string_view key);

/// '%', '{', '}' and ':' as %XX; every other byte as is.
[[nodiscard]] std::string escape_key_part(std::string_view text);
[[nodiscard]] std::optional<std::string> unescape_key_part(std::string_view text);

}  // namespace dlock::internal
