// Redis Cluster's key-to-slot mapping: CRC16 (XMODEM: polynomial 0x1021, initial value 0,
// no reflection) of the key's hash tag, modulo 16384.
//
//   key_slot("dlock:{shop:order%3A7}:lock") == key_slot("shop:order%3A7")
#pragma once

#include <cstdint>
#include <string_view>

namespace dlock::internal {

inline constexpr int kClusterSlots = 16384;

/// CRC16-XMODEM; crc16("123456789") == 0x31C3.
[[nodiscard]] std::uint16_t crc16(std::string_view data) noexcept;

/// The slot of `key`: the bytes between the first '{' and the first '}' after it, when
/// that is not empty, else the whole key (as CLUSTER KEYSLOT computes it).
[[nodiscard]] int key_slot(std::string_view key) noexcept;

}  // namespace dlock::internal
