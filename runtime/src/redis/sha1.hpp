// SHA-1, only to name Lua scripts for EVALSHA the way Redis does.
#pragma once

#include <string>
#include <string_view>

namespace dlock::internal {

/// Lower-case hex digest.
[[nodiscard]] std::string sha1_hex(std::string_view data);

}  // namespace dlock::internal
