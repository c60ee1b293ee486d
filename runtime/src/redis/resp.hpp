// RESP, the protocol Redis speaks: commands encoded for sending, and a reply parser (hiredis's
// reader, with dlock's limits on what one reply may allocate).
#pragma once

#include <string>
#include <string_view>
#include <vector>

struct redisReader;

namespace dlock::internal {

/// Appends `argv` to `out` as one RESP command (an array of bulk strings; binary-safe).
void append_command(std::string& out, const std::vector<std::string_view>& argv);

/// A reply reader that refuses (fails, and sets `*too_large`) a reply above kMaxReplyElements
/// elements or kMaxReplyString bytes in one string. Free it with redisReaderFree; its replies
/// with freeReplyObject. nullptr when out of memory.
[[nodiscard]] redisReader* new_reply_reader(bool* too_large);

}  // namespace dlock::internal
